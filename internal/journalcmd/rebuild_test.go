package journalcmd_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakePlugins puts kubectl-bundle-slot and kubectl-bundle-journal fakes
// first on $PATH that record their arguments in the returned file and exit 0.
func fakePlugins(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	calls := filepath.Join(bin, "calls")
	for _, name := range []string{"kubectl-bundle-slot", "kubectl-bundle-journal", "kubectl-bundle-verify", "kubectl-bundle-gate", "kubectl-bundle-switch"} {
		script := "#!/bin/sh\necho \"" + name + " $*\" >>'" + calls + "'\nexit 0\n"
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return calls
}

func readCalls(t *testing.T, calls string) string {
	t.Helper()
	b, err := os.ReadFile(calls)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// Break (attack, change 1): the hidden `kubectl bundle-journal rebuild SLOT
// DIGEST` checks nothing before its first command, `slot destroy SLOT
// --force --yes`. Run by hand (it is the recorded BUILDING step's command,
// and journal plan / --dry-run list its commands) while no recreate
// transaction is open, it destroys the active, known-good slot without a
// question, with a digest that was never staged or is not even a digest:
//
//	kubectl bundle-slot create a && deploy a V1 && switch to a
//	kubectl bundle-journal rebuild a 2222...2222   # no transaction open
//
// observed: exit 0 (with real plugins: slot a destroyed --force, then the
// create fails: nothing serves, nothing to revert to).
// expected: a refusal (exit 4, or 2 for a bad digest) before any command
// runs: rebuild is a recreate's BUILDING/BUILDING_FALLBACK step, and runs
// only as that step of an open recreate transaction, for its slot and the
// digest the step builds; the active slot is not touched.
func TestRebuildRefusedWithoutATransaction(t *testing.T) {
	dir, d := newStateDir(t)
	stageDemo(t, dir)
	activeSlot(t, d, "a", demoDigest)
	calls := fakePlugins(t)
	for _, args := range [][]string{
		{"rebuild", "a", demoDigest},
		{"rebuild", "a", "2222222222222222222222222222222222222222222222222222222222222222"},
		{"rebuild", "a", "not-a-digest"},
	} {
		code, stdout, stderr := run(t, dir, args...)
		if c := readCalls(t, calls); code == 0 || strings.Contains(c, "destroy") {
			t.Errorf("journal %s with no transaction open: exit %d, ran:\n%s\nstdout: %s\nstderr: %s\nwant a refusal before any command (slot a, the active slot, is not destroyed)",
				strings.Join(args, " "), code, c, stdout, stderr)
		}
		_ = os.Remove(calls)
	}
}

// Break (attack, change 1): with a recreate of slot a open and only BEGUN
// (nothing verified, nothing torn down), `kubectl bundle-journal rebuild
// b DIGEST` (a wrong slot, by hand) and `rebuild a DIGEST` (before
// TEARDOWN) both run their commands: slot b, which the transaction does
// not touch, and slot a, still serving, are destroyed with --force --yes.
// observed: exit 0, destroy b / destroy a ran.
// expected: rebuild runs only as the BUILDING / BUILDING_FALLBACK step of
// the open recreate, for its slot (t.Slots.Active) and the digest that
// step builds (target or fallback); anything else is refused (exit 4)
// before any command runs.
func TestRebuildRefusedOutsideItsStep(t *testing.T) {
	dir, d := newStateDir(t)
	stageDemo(t, dir)
	activeSlot(t, d, "a", demoDigest)
	if code, _, stderr := run(t, dir, "begin", "--strategy", "recreate", "--package", demoDigest, "--active", "a", "-q"); code != 0 {
		t.Fatalf("begin: exit %d: %s", code, stderr)
	}
	calls := fakePlugins(t)
	for _, args := range [][]string{
		{"rebuild", "b", demoDigest},
		{"rebuild", "a", demoDigest},
	} {
		code, stdout, stderr := run(t, dir, args...)
		if c := readCalls(t, calls); code == 0 || strings.Contains(c, "destroy") {
			t.Errorf("journal %s with a recreate of slot a open in %s: exit %d, ran:\n%s\nstdout: %s\nstderr: %s\nwant a refusal before any command",
				strings.Join(args, " "), openTxn(t, d).Phase, code, c, stdout, stderr)
		}
		_ = os.Remove(calls)
	}
}
