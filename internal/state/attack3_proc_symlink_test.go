//go:build linux

package state

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Attack 3 (mayHoldRemoved/mayHoldDeleted and the walk of /proc they
// guard). Operator's steps: the state dir is a symlink (allowed: CheckDir
// follows it; e.g. ~/.local/state/kubectl-bundle -> /data/kb, or
// KUBECTL_BUNDLE_STATE_DIR naming a symlinked path), a strategy script
// runs (its shell holds run.lock on descriptor 9, the flock taken by
// `journal advance --hold`, which exits), and the hurried operator
// removes journal/run.lock (rm, a cleanup of "stale" locks).
// What goes wrong: the kernel names the shell's descriptor by the real
// path ("/data/kb/journal/run.lock (deleted)"), while the probe compares
// it with the path through the symlink: the live run's holder is not
// found, so a second run or any mutating command goes ahead beside the
// live run (the run lock's whole point).
// Expected: the process holding the removed run lock is named, whatever
// path the state dir was reached by (compare by inode, or by the
// resolved path).
// Here: a child (`sleep`, standing for the script's shell) inherits the
// descriptor; the flock is taken by this process, which then closes its
// own descriptor (as advance --hold exits).
func TestAttack3RemovedRunLockSeenThroughSymlinkedStateDir(t *testing.T) {
	l := linuxProcs{root: "/proc"}
	if !l.readable() {
		t.Skip("no /proc")
	}
	for _, c := range []struct {
		name    string
		symlink bool
	}{{"state dir by its real path", false}, {"state dir through a symlink", true}} {
		t.Run(c.name, func(t *testing.T) {
			real := filepath.Join(t.TempDir(), "kb")
			if err := os.MkdirAll(filepath.Join(real, "journal"), 0o700); err != nil {
				t.Fatal(err)
			}
			stateDir := real
			if c.symlink {
				stateDir = filepath.Join(t.TempDir(), "link")
				if err := os.Symlink(real, stateDir); err != nil {
					t.Fatal(err)
				}
			}
			p := filepath.Join(stateDir, RunLockFile)
			f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("sleep", "60")
			cmd.ExtraFiles = []*os.File{f}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			f.Close() // the taker lets go; the child holds the lock
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			var got []Orphan
			deadline := time.Now().Add(5 * time.Second)
			for {
				got, _ = l.openers(p, true)
				if len(got) > 0 || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond) // the child's exec
			}
			found := false
			for _, o := range got {
				found = found || o.PID == cmd.Process.Pid
			}
			if !found {
				t.Errorf("openers(%s, deleted) = %v: the live process %d holding the removed run lock is not seen", p, got, cmd.Process.Pid)
			}
		})
	}
}
