package verify

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/sigstore/sigstore-go/pkg/root"
)

// The Sigstore public-good trusted root that the pinned zarf embeds, copied
// by `make trusted-root` (hack/trusted-root.sh) with a record of where it
// came from. Keyless verification uses it when no --trusted-root is given,
// as zarf does.
var (
	//go:embed trustedroot/embedded_trusted_root.json
	embeddedTrustedRoot []byte
	//go:embed trustedroot/source.json
	embeddedTrustedRootSource []byte
)

// EmbeddedRootSource records where the embedded trusted root was copied
// from: the module, its version and the file inside it, the file's sha256,
// and the module version's date (the root is no newer than that).
type EmbeddedRootSource struct {
	Module  string    `json:"module"`
	Version string    `json:"version"`
	Path    string    `json:"path"`
	SHA256  string    `json:"sha256"`
	Date    time.Time `json:"date"`
}

// EmbeddedTrustedRoot returns the embedded trusted root's bytes and the
// record of its source.
func EmbeddedTrustedRoot() ([]byte, EmbeddedRootSource, error) {
	var s EmbeddedRootSource
	if err := json.Unmarshal(embeddedTrustedRootSource, &s); err != nil {
		return nil, s, fmt.Errorf("reading the embedded trusted root's source record: %w", err)
	}
	return embeddedTrustedRoot, s, nil
}

// Trusted root sources, as a report names them.
const (
	RootEmbedded = "embedded"
	RootFile     = "file"
)

// TrustedRootInfo says which trusted root keyless material was checked
// against.
type TrustedRootInfo struct {
	// Source is "embedded" (the public-good root the pinned zarf embeds)
	// or "file" (--trusted-root).
	Source string `json:"source"`
	Path   string `json:"path,omitempty"`
	SHA256 string `json:"sha256"`
	// From and Date are the embedded root's origin and date.
	From string `json:"from,omitempty"`
	Date string `json:"date,omitempty"`

	date time.Time
}

// String names the root in one phrase, as the report's lines do.
func (t *TrustedRootInfo) String() string {
	if t.Source == RootEmbedded {
		return fmt.Sprintf("the embedded public-good trusted root (%s, %s, sha256 %.12s)", t.From, t.date.Format(time.DateOnly), t.SHA256)
	}
	return fmt.Sprintf("the trusted root %s (sha256 %.12s)", t.Path, t.SHA256)
}

// loadTrustedRoot reads --trusted-root, or the embedded root when path is "".
func loadTrustedRoot(path string) (*root.TrustedRoot, *TrustedRootInfo, error) {
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, namedFileError("reading --trusted-root", err)
		}
		tr, err := root.NewTrustedRootFromJSON(b)
		if err != nil {
			return nil, nil, usagef("--trusted-root %s: %v", path, err)
		}
		sum := sha256.Sum256(b)
		return tr, &TrustedRootInfo{Source: RootFile, Path: path, SHA256: hex.EncodeToString(sum[:])}, nil
	}
	b, src, err := EmbeddedTrustedRoot()
	if err != nil {
		return nil, nil, err
	}
	tr, err := root.NewTrustedRootFromJSON(b)
	if err != nil {
		return nil, nil, fmt.Errorf("the embedded trusted root: %w", err)
	}
	sum := sha256.Sum256(b)
	info := &TrustedRootInfo{Source: RootEmbedded, SHA256: hex.EncodeToString(sum[:]),
		From: "zarf " + src.Version, Date: src.Date.UTC().Format(time.RFC3339), date: src.Date.UTC()}
	return tr, info, nil
}
