package verify

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/digest"
)

// Seeds come from the committed zarf-built packages where they exist, so the
// fuzzers start from real inputs.
func seedFromPackages(f *testing.F, member string) {
	paths, _ := filepath.Glob("../../testdata/packages/*.tar.zst")
	more, _ := filepath.Glob("../../testdata/packages/*/*.tar.zst")
	for _, p := range append(paths, more...) {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if member == "" {
			f.Add(b)
			continue
		}
		a := readArchive(context.Background(), bufio.NewReader(bytes.NewReader(b)))
		if c, ok := a.control[member]; ok {
			f.Add(c)
		}
	}
}

func FuzzParseChecksums(f *testing.F) {
	seedFromPackages(f, controlChecksumsTxt)
	f.Add([]byte(sha + " a\n"))
	f.Add([]byte(sha + " ../a\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		lines, err := ParseChecksums(b)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, l := range lines {
			if checkMemberPath(l.Path) != nil || !digest.IsSHA256(l.SHA256) || seen[l.Path] {
				t.Fatalf("accepted a bad line %+v", l)
			}
			seen[l.Path] = true
		}
	})
}

func FuzzParseZarfYAML(f *testing.F) {
	seedFromPackages(f, controlZarfYAML)
	f.Add([]byte("kind: ZarfPackageConfig\nmetadata:\n  name: a\n"))
	f.Add([]byte("a: &a [x]\nb: [*a, *a]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseZarfYAML(b)
		if err != nil {
			return
		}
		if p.Name == "" || strings.ContainsAny(p.Name, `/\`) {
			t.Fatalf("accepted unsafe name %q", p.Name)
		}
	})
}

func FuzzCheckSyftJSON(f *testing.F) {
	f.Add([]byte(`{"artifacts":[],"source":{},"descriptor":{},"schema":{"version":"1"}}`))
	f.Add([]byte(`{"artifacts":[[[[{}]]]],"source":{"a":[1]},"descriptor":{},"schema":{"version":"1","x":{}}}`))
	f.Add([]byte(`{"artifacts":`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = CheckSyftJSON(bytes.NewReader(b))
	})
}

func FuzzParseSplitMetadata(f *testing.F) {
	f.Add([]byte(`{"Sha256Sum":"` + sha + `","Bytes":10,"Count":2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseSplitMetadata(b)
		if err == nil && (m.Count < 1 || m.Count > MaxSplitParts || m.Bytes < 0) {
			t.Fatalf("accepted %+v", m)
		}
	})
}

// FuzzReadArchive runs the whole verifier on arbitrary bytes: it must never
// panic, never hang, and never call a package verified unless the bytes
// really are a consistent package.
func FuzzReadArchive(f *testing.F) {
	seedFromPackages(f, "")
	good, err := synthetic(f).Bytes()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	plain := synthetic(f)
	plain.Compressed = false
	tb, _ := plain.Bytes()
	f.Add(tb)
	v, err := New(skipSig)
	if err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(dir, "p.tar")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := v.Verify(context.Background(), p)
		if err != nil {
			t.Fatalf("bytes from a readable file gave an I/O error: %v", err)
		}
		if r.Verified {
			for _, c := range r.Checks {
				if c.Status == Fail {
					t.Fatalf("verified with a failed check %+v", c)
				}
			}
			if r.Check(CheckChecksums).Status != Pass || r.Check(CheckMembers).Status != Pass {
				t.Fatalf("verified without checksums: %+v", r.Checks)
			}
		}
	})
}
