package state_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// ReadFile reads what os.ReadFile reads, stops past its limit, refuses a
// final symlink when told, and fails as os.ReadFile fails (a missing
// file is fs.ErrNotExist; a directory fails).
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{0, 1, 1023, 1024, 1025, 70000} {
		p := filepath.Join(dir, "f")
		want := bytes.Repeat([]byte("x"), n)
		if err := os.WriteFile(p, want, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := state.ReadFile(p, -1, true)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%d bytes: read %d, %v", n, len(got), err)
		}
		if got, err := state.ReadFile(p, 1024, true); err != nil || len(got) != min(n, 1025) {
			t.Errorf("%d bytes, limit 1024: read %d, %v; want %d", n, len(got), err, min(n, 1025))
		}
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(filepath.Join(dir, "f"), link); err != nil {
		t.Fatal(err)
	}
	if _, err := state.ReadFile(link, -1, true); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("a symlink, not followed: %v, want ELOOP", err)
	}
	if b, err := state.ReadFile(link, -1, false); err != nil || len(b) != 70000 {
		t.Errorf("a symlink, followed: %d bytes, %v", len(b), err)
	}
	if _, err := state.ReadFile(filepath.Join(dir, "none"), -1, true); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v, want fs.ErrNotExist", err)
	}
	if _, err := state.ReadFile(dir, -1, true); err == nil {
		t.Error("a directory read as a file")
	}
}
