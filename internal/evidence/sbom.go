package evidence

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/kubectl-bundle/kubectl-bundle/internal/stage"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
	"github.com/kubectl-bundle/kubectl-bundle/internal/verify"
	"github.com/kubectl-bundle/kubectl-bundle/internal/zst"
)

// Caps on the SBOM documents kept: one document, and all of them.
const (
	MaxSBOMDocument = 64 << 20
	MaxSBOMTotal    = 512 << 20
)

// SBOMDocument is one decoded SBOM document, as sbom/index.json lists it.
type SBOMDocument struct {
	Name          string `json:"name"`
	File          string `json:"file"`
	SHA256        string `json:"sha256"`
	Bytes         int64  `json:"bytes"`
	SchemaVersion string `json:"schemaVersion"`
	Source        string `json:"source,omitempty"`
	Artifacts     int    `json:"artifacts"`
}

// KeepVerification copies the verification record of the staged package
// digest into the evidence of id and extracts and decodes its SBOM
// documents into sbom/. Done once: a second call finds them there.
func KeepVerification(d *state.Dir, id, digest string) error {
	dir, err := Ensure(d, id)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(filepath.Join(dir, VerificationFile)); err == nil {
		return nil
	}
	p, err := stage.Resolve(d, digest)
	if err != nil {
		return fmt.Errorf("finding the staged package %s: %w", digest, err)
	}
	rec, err := state.ReadSmall(filepath.Join(p.Dir, stage.RecordFile), 16<<20)
	if err != nil {
		return fmt.Errorf("reading the verification record of %s: %w", digest, err)
	}
	docs, serr := ExtractSBOMs(p.Path, d, id)
	if serr == nil {
		if err := WriteJSON(d, id, filepath.Join(SBOMDir, "index.json"), docs); err != nil {
			return err
		}
	}
	// The record last: its presence says the rest is done.
	if err := WriteFile(d, id, VerificationFile, rec); err != nil {
		return err
	}
	return serr
}

// ExtractSBOMs reads the Zarf package archive at pkg, and writes every
// Syft JSON document of its sboms.tar, decoded, into sbom/ of the evidence
// of id. A package without sboms.tar has none.
func ExtractSBOMs(pkg string, d *state.Dir, id string) ([]SBOMDocument, error) {
	f, err := os.Open(pkg)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var r io.Reader = br
	if magic, _ := br.Peek(4); string(magic) == zst.Magic {
		zr, err := zst.NewReader(br, 128<<20)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", pkg, err)
		}
		defer zr.Close()
		r = zr
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return []SBOMDocument{}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", pkg, err)
		}
		if path.Clean(h.Name) == "sboms.tar" && h.Typeflag == tar.TypeReg {
			return extractSBOMTar(tar.NewReader(tr), d, id)
		}
	}
}

func extractSBOMTar(tr *tar.Reader, d *state.Dir, id string) ([]SBOMDocument, error) {
	docs := []SBOMDocument{}
	var total int64
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return docs, fmt.Errorf("reading sboms.tar: %w", err)
		}
		if h.Typeflag != tar.TypeReg || !strings.HasSuffix(h.Name, ".json") {
			continue
		}
		if h.Size > MaxSBOMDocument || total+h.Size > MaxSBOMTotal {
			return docs, fmt.Errorf("sboms.tar: %s (%d bytes) is over the cap (%d per document, %d in all)", h.Name, h.Size, MaxSBOMDocument, MaxSBOMTotal)
		}
		b, err := io.ReadAll(io.LimitReader(tr, MaxSBOMDocument+1))
		if err != nil {
			return docs, fmt.Errorf("reading sboms.tar: %s: %w", h.Name, err)
		}
		total += int64(len(b))
		doc, err := decodeSyft(b)
		if err != nil {
			return docs, fmt.Errorf("sboms.tar: %s does not decode as Syft JSON: %w", h.Name, err)
		}
		// Flat, unique, safe file names: the member's path with / as _.
		file := strings.ReplaceAll(strings.TrimLeft(path.Clean("/"+h.Name), "/"), "/", "_")
		for seen[file] {
			file = "_" + file
		}
		seen[file] = true
		sum := sha256.Sum256(b)
		doc.Name, doc.File, doc.SHA256, doc.Bytes = h.Name, filepath.Join(SBOMDir, file), hex.EncodeToString(sum[:]), int64(len(b))
		if err := WriteFile(d, id, doc.File, b); err != nil {
			return docs, err
		}
		docs = append(docs, doc)
	}
}

// decodeSyft checks b is a Syft JSON document (verify's rule) and reads
// what the index says of it.
func decodeSyft(b []byte) (SBOMDocument, error) {
	if err := verify.CheckSyftJSON(bytes.NewReader(b)); err != nil {
		return SBOMDocument{}, err
	}
	var v struct {
		Artifacts []json.RawMessage `json:"artifacts"`
		Schema    struct {
			Version string `json:"version"`
		} `json:"schema"`
		Source struct {
			Name     string `json:"name"`
			Metadata struct {
				UserInput string `json:"userInput"`
			} `json:"metadata"`
		} `json:"source"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return SBOMDocument{}, err
	}
	src := v.Source.Metadata.UserInput
	if src == "" {
		src = v.Source.Name
	}
	return SBOMDocument{SchemaVersion: v.Schema.Version, Source: src, Artifacts: len(v.Artifacts)}, nil
}
