package verify

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
)

// MaxSBOMDocuments bounds how many documents sboms.tar may hold.
const MaxSBOMDocuments = 100000

// sbomScan is what reading sboms.tar found.
type sbomScan struct {
	documents []string // names of valid Syft JSON documents
	err       error    // first problem found, nil when every document is valid
}

// scanSBOMTar reads the nested sboms.tar as it streams past and checks that
// every .json member is a Syft JSON document. Nothing is buffered beyond one
// JSON token.
func scanSBOMTar(r io.Reader) sbomScan {
	var s sbomScan
	tr := tar.NewReader(r)
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			s.err = fmt.Errorf("reading sboms.tar: %w", err)
			return s
		}
		if seen[h.Name] {
			s.err = fmt.Errorf("sboms.tar: duplicate member %s", h.Name)
			return s
		}
		seen[h.Name] = true
		if h.Typeflag != tar.TypeReg || !strings.HasSuffix(h.Name, ".json") {
			continue
		}
		if len(s.documents) >= MaxSBOMDocuments {
			s.err = fmt.Errorf("sboms.tar holds more than %d documents", MaxSBOMDocuments)
			return s
		}
		if err := CheckSyftJSON(tr); err != nil {
			s.err = fmt.Errorf("sboms.tar: %s is not a Syft JSON document: %w", h.Name, err)
			return s
		}
		s.documents = append(s.documents, h.Name)
	}
	return s
}

// CheckSyftJSON checks, streaming, that r holds one JSON object with an
// "artifacts" array, "source" and "descriptor" objects and a "schema" object
// whose "version" is a string: the shape of a Syft JSON document.
func CheckSyftJSON(r io.Reader) error {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	t, err := dec.Token()
	if err != nil {
		return fmt.Errorf("reading JSON: %w", err)
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("not a JSON object")
	}
	found := map[string]bool{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return fmt.Errorf("reading JSON: %w", err)
		}
		key, _ := kt.(string)
		switch key {
		case "artifacts":
			if err := expectDelim(dec, '['); err != nil {
				return fmt.Errorf("artifacts: %w", err)
			}
			if err := skipRest(dec, 1); err != nil {
				return err
			}
		case "source", "descriptor":
			if err := expectDelim(dec, '{'); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			if err := skipRest(dec, 1); err != nil {
				return err
			}
		case "schema":
			if err := checkSchema(dec); err != nil {
				return fmt.Errorf("schema: %w", err)
			}
		default:
			if err := skipValue(dec); err != nil {
				return err
			}
		}
		if found[key] {
			return fmt.Errorf("duplicate key %q", key)
		}
		found[key] = true
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("reading JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("trailing data after the JSON object")
	}
	var missing []string
	for _, k := range []string{"artifacts", "source", "descriptor", "schema"} {
		if !found[k] {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	return nil
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	t, err := dec.Token()
	if err != nil {
		return fmt.Errorf("reading JSON: %w", err)
	}
	if d, ok := t.(json.Delim); !ok || d != want {
		return fmt.Errorf("want %q, got %v", want, t)
	}
	return nil
}

// skipRest consumes tokens until depth open delimiters are closed.
func skipRest(dec *json.Decoder, depth int) error {
	for depth > 0 {
		t, err := dec.Token()
		if err != nil {
			return fmt.Errorf("reading JSON: %w", err)
		}
		if d, ok := t.(json.Delim); ok {
			switch d {
			case '{', '[':
				depth++
			default:
				depth--
			}
		}
	}
	return nil
}

func skipValue(dec *json.Decoder) error {
	t, err := dec.Token()
	if err != nil {
		return fmt.Errorf("reading JSON: %w", err)
	}
	if d, ok := t.(json.Delim); ok && (d == '{' || d == '[') {
		return skipRest(dec, 1)
	}
	return nil
}

func checkSchema(dec *json.Decoder) error {
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	version := false
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return fmt.Errorf("reading JSON: %w", err)
		}
		if kt == "version" {
			vt, err := dec.Token()
			if err != nil {
				return fmt.Errorf("reading JSON: %w", err)
			}
			if s, ok := vt.(string); !ok || s == "" {
				return fmt.Errorf("version is not a non-empty string")
			}
			version = true
			continue
		}
		if err := skipValue(dec); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("reading JSON: %w", err)
	}
	if !version {
		return fmt.Errorf("no version")
	}
	return nil
}

var sbomNameRegex = regexp.MustCompile(`[^a-zA-Z0-9.\-]`)

// sbomFileName is the name zarf gives an SBOM document for identifier.
func sbomFileName(identifier string) string {
	return sbomNameRegex.ReplaceAllString(identifier+".json", "_")
}

// NormalizeImageRef expands an image reference the way the container
// tooling zarf uses does: docker.io for a bare name, library/ for a
// single-segment Docker Hub name, :latest when there is no tag or digest.
func NormalizeImageRef(ref string) string {
	ref = strings.TrimPrefix(ref, "oci://")
	name, digest, hasDigest := strings.Cut(ref, "@")
	domain, rest, hasSlash := strings.Cut(name, "/")
	if !hasSlash || (!strings.ContainsAny(domain, ".:") && domain != "localhost" && strings.ToLower(domain) == domain) {
		domain, rest = "docker.io", name
	}
	if domain == "index.docker.io" {
		domain = "docker.io"
	}
	if domain == "docker.io" && !strings.Contains(rest, "/") {
		rest = "library/" + rest
	}
	out := domain + "/" + rest
	lastSeg := rest[strings.LastIndex(rest, "/")+1:]
	if hasDigest {
		return out + "@" + digest
	}
	if !strings.Contains(lastSeg, ":") {
		out += ":latest"
	}
	return out
}

// missingSBOMs returns the container images and file components that have
// no SBOM document among docs; images named in free (normalized) are OCI
// artifacts that need none. An image matches its own document or a
// per-platform one ("<ref>-<os>-<arch>[-<variant>]").
func missingSBOMs(p *ZarfPackage, docs []string, free map[string]bool) []string {
	have := map[string]bool{}
	for _, d := range docs {
		have[d] = true
	}
	var missing []string
	for _, img := range p.Images {
		if free[NormalizeImageRef(img)] {
			continue
		}
		base := sbomFileName(NormalizeImageRef(img))
		stem := strings.TrimSuffix(base, ".json")
		ok := have[base]
		for _, d := range docs {
			if ok {
				break
			}
			ok = strings.HasPrefix(d, stem+"-") && strings.HasSuffix(d, ".json")
		}
		if !ok {
			missing = append(missing, "image "+img)
		}
	}
	for _, c := range p.FileComponents {
		if !have[sbomFileName("zarf-component-"+c)] {
			missing = append(missing, "component "+c)
		}
	}
	sort.Strings(missing)
	return missing
}
