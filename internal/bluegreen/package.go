// Package bluegreen checks that a Zarf package is fit for blue/green as
// the project builds it (S2, rebuild): every name it puts on the host's
// shared Docker daemon or network is derived from the Zarf variable SLOT.
package bluegreen

import (
	"archive/tar"
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/kubectl-bundle/kubectl-bundle/internal/fluxart"
	"github.com/kubectl-bundle/kubectl-bundle/internal/zst"
)

// Variable is the Zarf variable a package fit for blue/green declares.
const Variable = "SLOT"

// Limits on what is read from an untrusted archive: zarf.yaml and every
// manifest or values file are read whole.
const (
	maxFile  = 4 << 20
	maxTotal = 64 << 20
)

// Package is what the check reads of a Zarf package: zarf.yaml and the
// text of every component's manifests and values files, before Zarf's
// templating.
type Package struct {
	// Variables are the names zarf.yaml declares under variables:.
	Variables []string
	// Actions are the components' action commands (docker run --name ...).
	Actions []string
	// Files are the manifests and values files, by their path in the archive.
	Files map[string]string

	// blobs are the OCI index and the blobs kept for the Flux check
	// (flux.go), by digest; kept and keptJSON count the bytes kept.
	blobs    map[string][]byte
	kept     int64
	keptJSON int64
}

// Declares reports whether zarf.yaml declares the variable name.
func (p *Package) Declares(name string) bool {
	for _, v := range p.Variables {
		if v == name {
			return true
		}
	}
	return false
}

// ReadFile reads the package archive at path (.tar.zst or .tar).
func ReadFile(file string) (*Package, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("reading package %s: %w", file, err)
	}
	// A Flux artifact's layer not kept (other images' gzip layers came
	// first and filled the budget): one more pass for it alone.
	if miss := p.missingFluxLayers(); len(miss) > 0 {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("reading package %s again: %w", file, err)
		}
		if err := p.readBlobs(f, miss); err != nil {
			return nil, fmt.Errorf("reading package %s again: %w", file, err)
		}
	}
	return p, nil
}

// openTar is the tar stream of a package archive, zstd-compressed or not.
func openTar(r io.Reader) (*tar.Reader, func(), error) {
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(4); string(magic) == zst.Magic {
		dec, err := zst.NewReader(br, 0)
		if err != nil {
			return nil, nil, err
		}
		return tar.NewReader(dec), dec.Close, nil
	}
	return tar.NewReader(br), func() {}, nil
}

// eachFile calls f with each regular file of a tar archive (zstd-compressed
// or not), by its cleaned name, until f fails.
func eachFile(r io.Reader, f func(name string, h *tar.Header, tr io.Reader) error) error {
	tr, done, err := openTar(r)
	if err != nil {
		return err
	}
	defer done()
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the archive: %w", err)
		}
		if h.Typeflag == tar.TypeReg {
			if err := f(path.Clean(h.Name), h, tr); err != nil {
				return err
			}
		}
	}
}

// readBlobs keeps the OCI blobs named in want (digests) from the archive.
func (p *Package) readBlobs(r io.Reader, want map[string]bool) error {
	return eachFile(r, func(name string, h *tar.Header, tr io.Reader) error {
		dir, file := path.Split(name)
		if dir != "images/blobs/sha256/" || !want["sha256:"+file] || h.Size > fluxart.MaxBytes {
			return nil
		}
		b, err := io.ReadAll(io.LimitReader(tr, fluxart.MaxBytes))
		if err != nil {
			return err
		}
		p.blobs["sha256:"+file] = b
		return nil
	})
}

// Read reads a package archive, zstd-compressed or not.
func Read(r io.Reader) (*Package, error) {
	p := &Package{Files: map[string]string{}}
	total := int64(0)
	var zarfYAML []byte
	err := eachFile(r, func(name string, h *tar.Header, tr io.Reader) error {
		var err error
		switch {
		case name == "zarf.yaml":
			if zarfYAML, err = readLimited(tr, &total); err != nil {
				return fmt.Errorf("reading zarf.yaml: %w", err)
			}
		case strings.HasPrefix(name, "images/") && h.Size <= fluxart.MaxBytes:
			// Only JSON (the index, manifests) and gzip (a Flux
			// artifact's content) can matter: the first bytes tell.
			head := make([]byte, 2)
			n, _ := io.ReadFull(tr, head)
			if n == 0 || (head[0] != '{' && head[0] != ' ' && head[0] != '\n' && !(n == 2 && head[0] == 0x1f && head[1] == 0x8b)) {
				return nil
			}
			rest, err := io.ReadAll(io.LimitReader(tr, fluxart.MaxBytes+1))
			if err != nil {
				return fmt.Errorf("reading %s: %w", name, err)
			}
			p.keepBlob(name, append(head[:n], rest...))
		case strings.HasPrefix(name, "components/") && (strings.HasSuffix(name, ".tar") || strings.HasSuffix(name, ".tar.zst")):
			if err := p.readComponent(name, tr, &total); err != nil {
				return fmt.Errorf("reading %s: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if zarfYAML == nil {
		return nil, errors.New("no zarf.yaml: not a Zarf package")
	}
	if err := p.parseZarfYAML(zarfYAML); err != nil {
		return nil, fmt.Errorf("parsing zarf.yaml: %w", err)
	}
	return p, nil
}

func readLimited(r io.Reader, total *int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxFile {
		return nil, fmt.Errorf("larger than %d bytes", maxFile)
	}
	*total += int64(len(b))
	if *total > maxTotal {
		return nil, fmt.Errorf("manifests and values larger than %d bytes in all", maxTotal)
	}
	return b, nil
}

// readComponent keeps the YAML files under a component's manifests/ and
// values/ directories: what Zarf templates with ###ZARF_VAR_...###.
func (p *Package) readComponent(member string, r io.Reader, total *int64) error {
	return eachFile(r, func(name string, _ *tar.Header, tr io.Reader) error {
		if !templated(name) {
			return nil
		}
		b, err := readLimited(tr, total)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		p.Files[member+"/"+name] = string(b)
		return nil
	})
}

func templated(name string) bool {
	parts := strings.Split(name, "/")
	if len(parts) < 3 {
		return false
	}
	dir := parts[len(parts)-2]
	ext := path.Ext(name)
	return (dir == "manifests" || dir == "values") && (ext == ".yaml" || ext == ".yml")
}

type zarfDoc struct {
	Variables []struct {
		Name string `yaml:"name"`
	} `yaml:"variables"`
	Components []struct {
		Actions map[string]struct {
			Before []action `yaml:"before"`
			After  []action `yaml:"after"`
		} `yaml:"actions"`
	} `yaml:"components"`
}

type action struct {
	Cmd string `yaml:"cmd"`
}

func (p *Package) parseZarfYAML(b []byte) error {
	var d zarfDoc
	if err := yaml.Unmarshal(b, &d); err != nil {
		return err
	}
	for _, v := range d.Variables {
		p.Variables = append(p.Variables, v.Name)
	}
	for _, c := range d.Components {
		keys := make([]string, 0, len(c.Actions))
		for k := range c.Actions {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			for _, a := range append(c.Actions[k].Before, c.Actions[k].After...) {
				if a.Cmd != "" {
					p.Actions = append(p.Actions, a.Cmd)
				}
			}
		}
	}
	return nil
}

// render applies Zarf's templating of the variable name to s.
func render(s, name, value string) string {
	return strings.ReplaceAll(s, "###ZARF_VAR_"+name+"###", value)
}

// doc is one YAML document: the fields the check reads, and the whole.
type doc struct {
	object
	all map[string]any
}

type object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		URL string `yaml:"url"`
	} `yaml:"spec"`
}

// splitDocs splits a multi-document YAML text; a document that does not
// parse is an error (Zarf would refuse it too). Documents that are not
// mappings (values of other shapes) are kept for their strings only.
func splitDocs(text string) ([]doc, error) {
	dec := yaml.NewDecoder(bytes.NewReader([]byte(text)))
	var out []doc
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		var d doc
		var all any
		if err := n.Decode(&all); err != nil {
			return out, err
		}
		if m, ok := all.(map[string]any); ok {
			d.all = m
			_ = n.Decode(&d.object) // a field of another shape is just not one the check reads
		} else {
			d.all = map[string]any{"": all}
		}
		out = append(out, d)
	}
}
