//go:build linux

package state

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Attack (change 8, mayHoldRemoved/mayHoldDeleted): a strategy run holds
// its run lock on the script shell's descriptor 9 (scripts/lib.sh: exec
// 9<>run.lock), but the flock is taken by a child, `journal advance --hold
// 9`, which exits at once: /proc/locks names that child's pid as the
// taker, never the shell. Once that pid is reused by an unrelated live
// process (a long run spawns thousands; pid_max is often 32768), and the
// run lock is removed from outside (rm journal/run.lock), the taker
// /proc/locks names is alive and holds no descriptor on the removed lock,
// so mayHoldRemoved says no one may hold it and openers skips the walk:
// the shell that still holds "run.lock (deleted)" is not seen, and the
// live run goes unseen (another run or a mutating command may go ahead
// beside it). Before the change any unknown flock on the file system made
// the walk run, and the shell was found.
func TestRemovedRunLockSeenWhenTakerPidReused(t *testing.T) {
	stateDir := t.TempDir()
	p := filepath.Join(stateDir, RunLockFile)
	fi, err := os.Stat(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	dev := uint64(fi.Sys().(*syscall.Stat_t).Dev) //nolint:unconvert
	root := t.TempDir()
	mk := func(pid, fd, target string) {
		t.Helper()
		dir := filepath.Join(root, pid, "fd")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(dir, fd)); err != nil {
			t.Fatal(err)
		}
	}
	// /proc/self/stat: a readable /proc.
	if err := os.MkdirAll(filepath.Join(root, "self"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "self", "stat"), []byte("1 (x) S 0"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The flock on the removed run lock (inode 900001), taken by advance
	// --hold as pid 4242; pid 4242 is now an unrelated live program.
	locks := fmt.Sprintf("1: FLOCK  ADVISORY  WRITE 4242 %02x:%02x:900001 0 EOF\n", devMajor(dev), devMinor(dev))
	if err := os.WriteFile(filepath.Join(root, "locks"), []byte(locks), 0o600); err != nil {
		t.Fatal(err)
	}
	mk("4242", "3", "/var/log/syslog")
	// The script shell (pid 777) holds the lock on its descriptor 9.
	mk("777", "9", p+" (deleted)")
	got, ok := (linuxProcs{root: root}).openers(p, true)
	if !ok {
		t.Fatal("openers: /proc not readable")
	}
	found := false
	for _, o := range got {
		found = found || o.PID == 777
	}
	if !found {
		t.Errorf("openers(removed run lock) = %v: the script shell 777 that holds %s (deleted) on descriptor 9 is not seen (the flock's taker, pid 4242, exited and its pid was reused)", got, p)
	}
}
