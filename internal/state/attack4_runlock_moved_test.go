//go:build linux

package state

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// holdRunLockInChild takes the run lock of d as a script's run does (the
// flock taken by this process, standing for `journal advance --hold`,
// which then exits) and leaves it held by a child (`sleep`, standing for
// the script's shell with descriptor 9).
func holdRunLockInChild(t *testing.T, d *Dir) int {
	t.Helper()
	p, err := d.RunLockPath()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0o600)
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
	f.Close()
	// The child's exec: its descriptor is there once /proc shows it.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if fds, _ := os.ReadDir(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "fd")); len(fds) > 3 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cmd.Process.Pid
}

// Attack 4 (deletedNames and the /proc probe of a run lock that is gone
// from its path, c7a91e0). Operator's steps: a strategy script runs (its
// shell holds journal/run.lock on descriptor 9); the hurried operator,
// taking the lock for stale, moves it aside as journal repair does with
// a damaged one (`mv journal/run.lock journal/run.lock.old`) rather
// than removing it, and runs another mutating command.
// What goes wrong: the probe looks for a descriptor the kernel names
// "…/journal/run.lock (deleted)"; the moved lock is not deleted, and the
// shell's descriptor is named by its new path: no holder is found, the
// flock listed in /proc/locks on the state dir's file system (the live
// run's) is not matched either, and RunConflict says no run holds the
// state dir: a second run or any mutating command goes ahead beside the
// live run (the run lock's whole point).
// Expected: the process that still holds the run lock (moved aside) is
// named, as for a removed one (compare by the flocked inode, not by the
// name).
func TestAttack4MovedRunLockHidesLiveRun(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	d, err := Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	pid := holdRunLockInChild(t, d)
	p := d.Join(RunLockFile)
	if err := os.Rename(p, p+".old"); err != nil {
		t.Fatal(err)
	}
	e, err := d.RunConflict()
	if err != nil {
		t.Fatal(err)
	}
	if e == nil {
		t.Fatalf("RunConflict() = nil after %s was moved aside while pid %d (the live run's shell) holds its flock: a second run may start beside the live one", RunLockFile, pid)
	}
}

// Attack 4 (deletedNames, c7a91e0), "the journal dir removed through a
// symlinked state dir". Operator's steps: the state dir is a symlink
// (allowed; the fix's own case), a strategy script runs, and the hurried
// operator clears the journal dir (`rm -rf STATE/journal`: the run lock
// goes with it).
// What goes wrong: deletedNames resolves the lock's directory with
// EvalSymlinks, which fails once that directory is gone: only the path
// through the symlink is compared, while the kernel names the shell's
// descriptor by the real path, and the live run is not seen (the break
// c7a91e0 fixed, back when the journal dir goes with the lock).
// (A second script's `advance --hold` makes the journal dir first and
// sees the run; a plain mutating command, checked before, does not.)
// Expected: the holder is seen whatever is left of the path (resolve the
// state dir, the nearest existing ancestor, not the lock's directory).
func TestAttack4RemovedJournalDirThroughSymlinkHidesLiveRun(t *testing.T) {
	if !(linuxProcs{root: "/proc"}).readable() {
		t.Skip("no /proc")
	}
	real := filepath.Join(t.TempDir(), "kb")
	if err := os.MkdirAll(real, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	d, err := Open(link)
	if err != nil {
		t.Fatal(err)
	}
	pid := holdRunLockInChild(t, d)
	if err := os.RemoveAll(d.Join("journal")); err != nil {
		t.Fatal(err)
	}
	// A mutating command's first check (session.Open's runConflict, before
	// anything makes the journal dir again).
	e, err := d.RunConflict()
	if err != nil {
		t.Fatal(err)
	}
	if e == nil {
		t.Errorf("RunConflict() = nil after the journal dir (and its run lock) was removed through the symlinked state dir while pid %d (the live run's shell) holds the lock: a mutating command goes ahead beside the live run", pid)
	}
}
