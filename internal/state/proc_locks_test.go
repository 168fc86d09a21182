//go:build linux

package state

import (
	"fmt"
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

// A flock on another file of the same file system (another state dir's
// lock, another program's) does not make every probe of a removed run
// lock walk /proc: its taker, alive, holds no descriptor on the removed
// lock. A taker that holds it, or one that is gone (its lock may live on
// in descriptors its children inherited), still counts. (A /proc of the
// test's making: the machine's own has lockers of every kind.)
func TestMayHoldRemovedLooksAtTheLockers(t *testing.T) {
	stateDir := t.TempDir()
	p := filepath.Join(stateDir, RunLockFile)
	fi, err := os.Stat(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	dev := uint64(fi.Sys().(*syscall.Stat_t).Dev) //nolint:unconvert
	for _, c := range []struct {
		name string
		fds  map[string]string // pid -> what its one descriptor names ("": no such process)
		want bool
	}{
		{"another live program's flock", map[string]string{"4242": "/var/lib/other/lock"}, false},
		{"the run's own removed lock", map[string]string{"4242": p + " (deleted)"}, true},
		{"a locker that is gone", map[string]string{"4343": ""}, true},
		{"one of each: other, then the run's", map[string]string{"4242": "/var/lib/other/lock", "4444": p + " (deleted)"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			var locks string
			n := 0
			for pid, target := range c.fds {
				n++
				locks += fmt.Sprintf("%d: FLOCK  ADVISORY  WRITE %s %02x:%02x:%d 0 EOF\n", n, pid, devMajor(dev), devMinor(dev), 900000+n)
				if target == "" {
					continue
				}
				fd := filepath.Join(root, pid, "fd")
				if err := os.MkdirAll(fd, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(target, filepath.Join(fd, "3")); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(root, "locks"), []byte(locks), 0o600); err != nil {
				t.Fatal(err)
			}
			if got := (linuxProcs{root: root}).mayHoldRemoved(p); got != c.want {
				t.Errorf("mayHoldRemoved with /proc/locks\n%s= %v; want %v", locks, got, c.want)
			}
		})
	}
}
