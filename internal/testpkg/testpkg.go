// Package testpkg reads and rewrites small Zarf package archives in memory,
// so that tests and hack/gentestdata can derive tampered and re-signed
// variants of packages that the real zarf built. It is not used at run time.
package testpkg

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// Member is one archive entry.
type Member struct {
	Header tar.Header
	Data   []byte
}

// Archive is a whole package in memory, in member order.
type Archive struct {
	Members    []*Member
	Compressed bool
}

// ReadFile reads a .tar.zst or .tar package.
func ReadFile(path string) (*Archive, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Read(b)
}

// Read parses archive bytes, zstd-compressed or not.
func Read(b []byte) (*Archive, error) {
	a := &Archive{}
	var r io.Reader = bytes.NewReader(b)
	if len(b) >= 4 && string(b[:4]) == "\x28\xb5\x2f\xfd" {
		dec, err := zstd.NewReader(r)
		if err != nil {
			return nil, err
		}
		defer dec.Close()
		r = dec
		a.Compressed = true
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return a, nil
		}
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		a.Members = append(a.Members, &Member{Header: *h, Data: data})
	}
}

// Bytes serialises the archive, compressed when it was read compressed.
func (a *Archive) Bytes() ([]byte, error) {
	var buf bytes.Buffer
	var w io.Writer = &buf
	var enc *zstd.Encoder
	if a.Compressed {
		var err error
		enc, err = zstd.NewWriter(&buf)
		if err != nil {
			return nil, err
		}
		w = enc
	}
	tw := tar.NewWriter(w)
	for _, m := range a.Members {
		h := m.Header
		h.Size = int64(len(m.Data))
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(&h); err != nil {
			return nil, fmt.Errorf("writing header %s: %w", h.Name, err)
		}
		if h.Size > 0 {
			if _, err := tw.Write(m.Data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if enc != nil {
		if err := enc.Close(); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// WriteFile writes the archive to path.
func (a *Archive) WriteFile(path string) error {
	b, err := a.Bytes()
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Get returns the member named name, or nil.
func (a *Archive) Get(name string) *Member {
	for _, m := range a.Members {
		if m.Header.Name == name {
			return m
		}
	}
	return nil
}

// Set replaces the data of member name, adding a regular file when absent.
func (a *Archive) Set(name string, data []byte) {
	if m := a.Get(name); m != nil {
		m.Data = data
		return
	}
	a.Members = append(a.Members, &Member{Header: tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Format: tar.FormatPAX}, Data: data})
	sort.SliceStable(a.Members, func(i, j int) bool { return a.Members[i].Header.Name < a.Members[j].Header.Name })
}

// Remove deletes member name.
func (a *Archive) Remove(name string) {
	out := a.Members[:0]
	for _, m := range a.Members {
		if m.Header.Name != name {
			out = append(out, m)
		}
	}
	a.Members = out
}

// SHA256 returns the hex sha256 of b.
func SHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Rechecksum rewrites the checksums.txt line of member name to its current
// sha256 and the aggregate checksum in zarf.yaml to match: the package then
// passes every integrity check again, and its signature (if any) fails,
// because zarf.yaml changed.
func (a *Archive) Rechecksum(names ...string) error {
	cs := a.Get("checksums.txt")
	zy := a.Get("zarf.yaml")
	if cs == nil || zy == nil {
		return fmt.Errorf("package has no checksums.txt or zarf.yaml")
	}
	old := SHA256(cs.Data)
	lines := strings.Split(string(cs.Data), "\n")
	for _, name := range names {
		m := a.Get(name)
		if m == nil {
			return fmt.Errorf("no member %s", name)
		}
		found := false
		for i, l := range lines {
			if strings.HasSuffix(l, " "+name) {
				lines[i] = SHA256(m.Data) + " " + name
				found = true
			}
		}
		if !found {
			lines = append(lines[:len(lines)-1], SHA256(m.Data)+" "+name, lines[len(lines)-1])
		}
	}
	cs.Data = []byte(strings.Join(lines, "\n"))
	zy.Data = bytes.ReplaceAll(zy.Data, []byte(old), []byte(SHA256(cs.Data)))
	return nil
}
