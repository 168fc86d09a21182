package state

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
)

func TestResolve(t *testing.T) {
	t.Setenv(EnvStateDir, "")
	t.Setenv("XDG_STATE_HOME", "/xdg")
	if d, _ := Resolve(""); d != "/xdg/kubectl-bundle" {
		t.Errorf("XDG: %s", d)
	}
	t.Setenv(EnvStateDir, "/env")
	if d, _ := Resolve(""); d != "/env" {
		t.Errorf("env: %s", d)
	}
	if d, _ := Resolve("/flag"); d != "/flag" {
		t.Errorf("flag: %s", d)
	}
	t.Setenv(EnvStateDir, "")
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", "/home/op")
	if d, _ := Resolve(""); d != "/home/op/.local/state/kubectl-bundle" {
		t.Errorf("default: %s", d)
	}
}

func TestOpenModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(d.Path)
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("created with %o", fi.Mode().Perm())
	}
	os.Chmod(dir, 0o757)
	_, err = Open(dir)
	var pe *PermissionError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "chmod 700") {
		t.Errorf("world-writable accepted or unhelpful: %v", err)
	}
	os.Chmod(dir, 0o700)
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o600)
	if _, err := Open(f); err == nil {
		t.Error("a file accepted as state dir")
	}
}

func TestWriteFileAndPointer(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "active")
	if err := WriteFile(p, []byte("a\n")); err != nil {
		t.Fatal(err)
	}
	if v, err := ReadPointer(p); err != nil || v != "a" {
		t.Fatalf("%q %v", v, err)
	}
	fi, _ := os.Stat(p)
	if fi.Mode().Perm() != FileMode {
		t.Errorf("mode %o", fi.Mode().Perm())
	}
	os.Symlink(p, filepath.Join(dir, "link"))
	if _, err := ReadPointer(filepath.Join(dir, "link")); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("followed a symlinked pointer: %v", err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".*"))
	if len(leftovers) != 0 {
		t.Errorf("temp files left: %v", leftovers)
	}
}

func TestLock(t *testing.T) {
	d, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l, err := d.Lock()
	if err != nil {
		t.Fatal(err)
	}
	// flock locks belong to open file descriptions: a second Lock in the
	// same process conflicts like another process would.
	_, err = d.Lock()
	var le *LockedError
	if !errors.As(err, &le) || le.Holder == nil || le.Holder.PID != os.Getpid() || le.ErrorKind() != errkind.Conflict {
		t.Fatalf("second lock: %v", err)
	}
	l.Unlock()
	l2, err := d.Lock()
	if err != nil {
		t.Fatalf("lock not free after unlock: %v", err)
	}
	l2.Unlock()
}

func TestOpenRefusesAnotherOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a directory to another user")
	}
	dir := filepath.Join(t.TempDir(), "s")
	os.Mkdir(dir, 0o700)
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir)
	var pe *PermissionError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "is owned by uid 65534, not by you") {
		t.Fatalf("%v", err)
	}
}
