//go:build linux

package state

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A run lock removed from outside while a run holds it is still listed in
// /proc/locks: the scan of the processes' descriptors is not skipped.
func TestMayHoldRemovedSeesAHeldRemovedLock(t *testing.T) {
	l := linuxProcs{root: "/proc"}
	if !l.readable() {
		t.Skip("no /proc")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, RunLockFile)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if !l.mayHoldRemoved(p) {
		t.Fatal("a flock held on the removed run lock is not seen in /proc/locks")
	}
}
