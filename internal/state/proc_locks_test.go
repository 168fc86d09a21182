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
// lock walk /proc: its taker, alive, holds a descriptor on that very
// inode, which is not the removed lock. A taker that holds the run's
// removed lock, one that is gone, or one with no descriptor on the
// flock's inode (a child that took the lock for its shell and exited, its
// pid since reused: the scripts' journal advance --hold) still counts.
// (A /proc of the test's making: the machine's own has lockers of every
// kind.)
func TestMayHoldRemovedLooksAtTheLockers(t *testing.T) {
	stateDir := t.TempDir()
	p := filepath.Join(stateDir, RunLockFile)
	other := filepath.Join(stateDir, "other.lock")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(other)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	dev, otherIno := uint64(st.Dev), uint64(st.Ino) //nolint:unconvert
	type lock struct {
		pid    string
		ino    uint64
		target string // what its one descriptor names ("": no such process)
	}
	for _, c := range []struct {
		name  string
		locks []lock
		want  bool
	}{
		{"another live program's flock", []lock{{"4242", otherIno, other}}, false},
		{"the run's own removed lock", []lock{{"4242", 900001, p + " (deleted)"}}, true},
		{"a locker that is gone", []lock{{"4343", 900001, ""}}, true},
		{"a taker's pid reused by a program without the lock", []lock{{"4242", 900001, other}}, true},
		{"one of each: other, then the run's", []lock{{"4242", otherIno, other}, {"4444", 900001, p + " (deleted)"}}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			var locks string
			for n, k := range c.locks {
				locks += fmt.Sprintf("%d: FLOCK  ADVISORY  WRITE %s %02x:%02x:%d 0 EOF\n", n+1, k.pid, devMajor(dev), devMinor(dev), k.ino)
				if k.target == "" {
					continue
				}
				fd := filepath.Join(root, k.pid, "fd")
				if err := os.MkdirAll(fd, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(k.target, filepath.Join(fd, "3")); err != nil {
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
