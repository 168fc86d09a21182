// Package zarfsplit reads the metadata zarf writes into a split package's
// .part000: light enough for every command that names a package by path.
package zarfsplit

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kubectl-bundle/kubectl-bundle/internal/digest"
)

// Suffix ends the name of a split package's first file, its metadata.
const Suffix = ".part000"

// MaxParts is zarf's own limit on parts.
const MaxParts = 999

// Metadata is the JSON zarf writes into a split package's .part000.
type Metadata struct {
	Sha256Sum string
	Bytes     int64
	Count     int
}

// Parse parses a .part000 file.
func Parse(b []byte) (*Metadata, error) {
	var m Metadata
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("part000 is not zarf split metadata JSON: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("part000 has trailing data after its JSON")
	}
	if m.Count < 1 || m.Count > MaxParts {
		return nil, fmt.Errorf("part000 Count %d is outside 1..%d", m.Count, MaxParts)
	}
	if m.Bytes < 0 {
		return nil, fmt.Errorf("part000 Bytes %d is negative", m.Bytes)
	}
	if !digest.IsSHA256(m.Sha256Sum) {
		s := m.Sha256Sum
		if len(s) > 80 {
			s = s[:80] + "..."
		}
		return nil, fmt.Errorf("part000 Sha256Sum %q is not a lowercase hex sha256", s)
	}
	return &m, nil
}
