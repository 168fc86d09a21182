package state

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Two repairs within one clock tick, or a damaged entry moved aside
// twice: each keeps its own aside name, nothing is overwritten, and a
// directory moves aside as a directory so a file can take its place.
func TestMoveAsideNeverCollides(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "slot-a.json")
	var asides []string
	for i, kind := range []string{"file", "dir", "file", "dir"} {
		if kind == "dir" {
			if err := os.MkdirAll(filepath.Join(p, "inner"), 0o755); err != nil {
				t.Fatal(err)
			}
		} else if err := os.WriteFile(p, []byte{byte('0' + i)}, 0o644); err != nil {
			t.Fatal(err)
		}
		aside, err := MoveAside(p)
		if err != nil {
			t.Fatalf("move aside %d (%s): %v", i, kind, err)
		}
		if !strings.HasPrefix(aside, p+".damaged-") {
			t.Fatalf("aside name %q does not start with %q", aside, p+".damaged-")
		}
		asides = append(asides, aside)
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Fatalf("%s is still there after its move aside: %v", p, err)
		}
	}
	seen := map[string]bool{}
	for i, a := range asides {
		if seen[a] {
			t.Fatalf("aside name %s used twice: %v", a, asides)
		}
		seen[a] = true
		fi, err := os.Lstat(a)
		if err != nil {
			t.Fatalf("aside %s lost: %v", a, err)
		}
		if want := i%2 == 1; fi.IsDir() != want {
			t.Fatalf("aside %s: directory %v, want %v", a, fi.IsDir(), want)
		}
		if !fi.IsDir() {
			if b, _ := os.ReadFile(a); string(b) != string(rune('0'+i)) {
				t.Fatalf("aside %s holds %q, want %q (overwritten)", a, b, string(rune('0'+i)))
			}
		}
	}
	// With the entry gone a write takes its place.
	if err := WriteFile(p, []byte("{}")); err != nil {
		t.Fatal(err)
	}
}

// An aside name already taken at the same instant gets a suffix.
func TestAsideNameSkipsTakenNames(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "active")
	first := AsideName(p)
	if err := os.WriteFile(first, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Take every name this instant could produce with a suffix too, up to -3.
	for i := 0; i < 3; i++ {
		n := AsideName(p)
		if _, err := os.Lstat(n); err == nil {
			t.Fatalf("AsideName returned %s, which exists", n)
		}
		if err := os.WriteFile(n, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// SetAsideIfNotFile leaves regular files and symlinks where they are and
// moves anything else aside.
func TestSetAsideIfNotFile(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	l := filepath.Join(dir, "l")
	d := filepath.Join(dir, "d")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f", l); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{f, l, filepath.Join(dir, "missing")} {
		if aside, err := SetAsideIfNotFile(p); err != nil || aside != "" {
			t.Fatalf("SetAsideIfNotFile(%s) = %q, %v; want it left alone", p, aside, err)
		}
	}
	aside, err := SetAsideIfNotFile(d)
	if err != nil || aside == "" {
		t.Fatalf("SetAsideIfNotFile(dir) = %q, %v", aside, err)
	}
	if fi, err := os.Stat(aside); err != nil || !fi.IsDir() {
		t.Fatalf("the directory is not at %s: %v", aside, err)
	}
}
