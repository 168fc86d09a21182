package journalcmd_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journalcmd"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
	"github.com/kubectl-bundle/kubectl-bundle/internal/verifycmd"
)

const (
	demoPkg = "../../testdata/packages/zarf-package-demo-amd64-1.0.0.tar.zst"
	demoKey = "../../testdata/keys/cosign.pub"
	// The sha256 of demoPkg.
	demoDigest = "34cafc06f5db85eacf600515d33b333510ee1bee14fae72d9690ded494b5a6b0"
	target     = "1111111111111111111111111111111111111111111111111111111111111111"
)

// run runs kubectl-bundle-journal against the state dir dir and returns its
// exit code, stdout and stderr.
func run(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	streams := kcli.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	code := journalcmd.Main(context.Background(), streams, append([]string{"kubectl-bundle-journal", "--state-dir", dir}, args...))
	return code, out.String(), errOut.String()
}

func newStateDir(t *testing.T) (string, *state.Dir) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "state")
	d, err := state.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	return p, d
}

// stageDemo verifies and stages the demo package, as an operator would.
func stageDemo(t *testing.T, dir string) {
	t.Helper()
	var out, errOut bytes.Buffer
	streams := kcli.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	if code := verifycmd.Main(context.Background(), streams, []string{"kubectl-bundle-verify", "--state-dir", dir, "--stage", "-q", "--key", demoKey, demoPkg}); code != 0 {
		t.Fatalf("staging the demo package exited %d: %s", code, errOut.String())
	}
}

// activeSlot writes slot name's record with pkg deployed ("" : none) and
// makes it the active slot.
func activeSlot(t *testing.T, d *state.Dir, name, pkg string) {
	t.Helper()
	r := &slot.Record{Name: name, Provider: "existing", Context: "ctx-" + name}
	if pkg != "" {
		r.Package = &slot.PackageRef{Digest: pkg, Name: "demo", Deployed: time.Now()}
	}
	if err := slot.Save(d, r); err != nil {
		t.Fatal(err)
	}
	if err := state.WriteFile(d.Join("active"), []byte(name+"\n")); err != nil {
		t.Fatal(err)
	}
}

func openTxn(t *testing.T, d *state.Dir) *journal.Transaction {
	t.Helper()
	tx, err := journal.New(d).Load()
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

// Defect 8: begin refuses what no strategy can run, before writing anything.
func TestBeginRefusesBadSlotsAndFallback(t *testing.T) {
	dir, d := newStateDir(t)
	stageDemo(t, dir)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--strategy", "blue-green", "--active", "a", "--candidate", "a"}, "--candidate a is the active slot"},
		{[]string{"--strategy", "blue-green", "--active", "a b", "--candidate", "b"}, `--active: slot name "a b": use 1-32 lower-case letters`},
		{[]string{"--strategy", "blue-green", "--active", "a", "--candidate", ".."}, `--candidate: slot name ".."`},
		{[]string{"--strategy", "in-place", "--active", "../x"}, `--active: slot name "../x"`},
		{[]string{"--strategy", "blue-green"}, "blue-green builds the update in --candidate next to --active: give both"},
		{[]string{"--strategy", "blue-green", "--active", "a"}, "give both"},
		{[]string{"--strategy", "in-place", "--active", "a", "--candidate", "b"}, "--candidate is for blue-green: in-place updates the --active slot itself"},
		{[]string{"--strategy", "in-place", "--fallback", "2222222222222222222222222222222222222222222222222222222222222222"}, "--fallback: package 2222222222222222222222222222222222222222222222222222222222222222 is not staged"},
		{[]string{"--strategy", "recreate", "--fallback", "not-a-digest"}, "--fallback: package \"not-a-digest\" is neither a sha256 digest nor a readable file"},
		{[]string{"--strategy", "recreate", "--fallback", "begin_test.go"}, "--fallback: package begin_test.go ("},
	} {
		code, _, stderr := run(t, dir, append([]string{"begin", "--package", target}, tc.args...)...)
		if code != kcli.ExitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("begin %v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
		for _, f := range []string{journal.TransactionFile, journal.HistoryFile} {
			if _, err := os.Stat(d.Join(journal.Dir, f)); err == nil {
				t.Fatalf("begin %v wrote %s", tc.args, f)
			}
		}
	}

	// A staged fallback, by digest or by path, is recorded as its digest
	// (blue-green builds next to an active slot).
	activeSlot(t, d, "a", "")
	for _, fb := range []string{demoDigest, "sha256:" + demoDigest, demoPkg} {
		code, _, stderr := run(t, dir, "begin", "--strategy", "blue-green", "--package", target, "--active", "a", "--candidate", "b", "--fallback", fb, "-q")
		if code != 0 {
			t.Fatalf("begin --fallback %s: exit %d: %s", fb, code, stderr)
		}
		if tx := openTxn(t, d); tx.Fallback != demoDigest || tx.Slots != (journal.Slots{Active: "a", Candidate: "b"}) {
			t.Errorf("begin --fallback %s recorded fallback %q, slots %+v", fb, tx.Fallback, tx.Slots)
		}
		if code, _, stderr := run(t, dir, "abort", "-q"); code != 0 {
			t.Fatalf("abort: %s", stderr)
		}
		if code, _, stderr := run(t, dir, "end", "-q"); code != 0 {
			t.Fatalf("end: %s", stderr)
		}
	}
}

// Defect 14: without --fallback, the fallback is the package deployed in
// the active slot; a recreate that would have nothing to rebuild with is
// refused, except on a first install.
func TestBeginFallbackFromActiveSlot(t *testing.T) {
	t.Run("recreate takes the active slot's package", func(t *testing.T) {
		dir, d := newStateDir(t)
		stageDemo(t, dir)
		activeSlot(t, d, "a", demoDigest)
		if code, _, stderr := run(t, dir, "begin", "--strategy", "recreate", "--package", target, "--active", "a", "-q"); code != 0 {
			t.Fatalf("begin: exit %d: %s", code, stderr)
		}
		if tx := openTxn(t, d); tx.Fallback != demoDigest {
			t.Errorf("fallback %q, want the package deployed in slot a, %s", tx.Fallback, demoDigest)
		}
	})
	t.Run("in-place takes it too", func(t *testing.T) {
		dir, d := newStateDir(t)
		stageDemo(t, dir)
		activeSlot(t, d, "b", demoDigest)
		if code, _, stderr := run(t, dir, "begin", "--strategy", "in-place", "--package", target, "--active", "b", "-q"); code != 0 {
			t.Fatalf("begin: exit %d: %s", code, stderr)
		}
		if tx := openTxn(t, d); tx.Fallback != demoDigest {
			t.Errorf("fallback %q, want %s", tx.Fallback, demoDigest)
		}
	})
	t.Run("recreate of an active slot with no package is refused", func(t *testing.T) {
		dir, d := newStateDir(t)
		activeSlot(t, d, "a", "")
		code, _, stderr := run(t, dir, "begin", "--strategy", "recreate", "--package", target, "--active", "a")
		if code != kcli.ExitEnvironment || !strings.Contains(stderr, "slot a records no deployed package, so a failed recreate would have nothing to rebuild it with") ||
			!strings.Contains(stderr, "kubectl bundle-slot deploy a PACKAGE") || !strings.Contains(stderr, "--fallback DIGEST|PATH") {
			t.Errorf("exit %d, stderr %q; want exit 3 naming what to do", code, stderr)
		}
		if tx := openTxn(t, d); tx != nil {
			t.Errorf("a transaction was opened: %+v", tx)
		}
	})
	t.Run("recreate whose fallback is no longer staged is refused", func(t *testing.T) {
		dir, d := newStateDir(t)
		activeSlot(t, d, "a", demoDigest)
		code, _, stderr := run(t, dir, "begin", "--strategy", "recreate", "--package", target, "--active", "a")
		if code != kcli.ExitEnvironment || !strings.Contains(stderr, "is not staged") || !strings.Contains(stderr, "stage it again with KUBECTL_BUNDLE_STATE_DIR="+d.Path+" kubectl bundle-verify --stage PACKAGE --key KEY") {
			t.Errorf("exit %d, stderr %q; want exit 3 saying to stage it again", code, stderr)
		}
	})
	t.Run("an explicit --fallback stands in for the missing package", func(t *testing.T) {
		dir, d := newStateDir(t)
		stageDemo(t, dir)
		activeSlot(t, d, "a", "")
		if code, _, stderr := run(t, dir, "begin", "--strategy", "recreate", "--package", target, "--active", "a", "--fallback", demoPkg, "-q"); code != 0 {
			t.Fatalf("begin: exit %d: %s", code, stderr)
		}
		if tx := openTxn(t, d); tx.Fallback != demoDigest {
			t.Errorf("fallback %q, want %s", tx.Fallback, demoDigest)
		}
	})
	t.Run("blue-green on a site with no active slot is refused, naming the first install", func(t *testing.T) {
		dir, d := newStateDir(t)
		code, _, stderr := run(t, dir, "begin", "--strategy", "blue-green", "--package", target, "--active", "a", "--candidate", "b")
		if code != kcli.ExitEnvironment || !strings.Contains(stderr, "no slot is active yet: blue-green builds a candidate next to the active slot") ||
			!strings.Contains(stderr, "first step: KUBECTL_BUNDLE_STATE_DIR=") || !strings.Contains(stderr, " kubectl bundle-slot create a, then ") ||
			strings.Count(stderr, "KUBECTL_BUNDLE_STATE_DIR=") != 5 || // each step pasted alone acts on this state dir !strings.Contains(stderr, "kubectl bundle-gate --slot a --record") ||
			!strings.Contains(stderr, "kubectl bundle-switch to a") || strings.Contains(stderr, "in-place.sh PACKAGE") {
			t.Errorf("exit %d, stderr %q; want exit 3 naming the first install", code, stderr)
		}
		if tx := openTxn(t, d); tx != nil {
			t.Errorf("a transaction was opened: %+v", tx)
		}
	})
	t.Run("a first install has no fallback", func(t *testing.T) {
		dir, d := newStateDir(t)
		if code, _, stderr := run(t, dir, "begin", "--strategy", "recreate", "--package", target, "--active", "a", "-q"); code != 0 {
			t.Fatalf("begin: exit %d: %s", code, stderr)
		}
		if tx := openTxn(t, d); tx.Fallback != "" {
			t.Errorf("fallback %q on a first install", tx.Fallback)
		}
	})
	t.Run("an open transaction is named before the fallback is looked at", func(t *testing.T) {
		dir, d := newStateDir(t)
		if code, _, stderr := run(t, dir, "begin", "--strategy", "in-place", "--package", target, "-q"); code != 0 {
			t.Fatalf("begin: exit %d: %s", code, stderr)
		}
		activeSlot(t, d, "a", "")
		code, _, stderr := run(t, dir, "begin", "--strategy", "recreate", "--package", target, "--active", "a")
		if code != kcli.ExitConflict || !strings.Contains(stderr, "is already open") {
			t.Errorf("exit %d, stderr %q; want exit 4 naming the open transaction", code, stderr)
		}
	})
}

// begin records the script's verification material (absolute), so that
// the next command carries it before the package is staged too, and a
// transaction rebuilt from the history keeps it.
func TestBeginRecordsTheKey(t *testing.T) {
	dir, _ := newStateDir(t)
	t.Chdir(t.TempDir())
	if err := os.WriteFile("k.pub", []byte("key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs("k.pub")
	if err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, dir, "begin", "--strategy", "in-place", "--package", target, "--key", "k.pub", "-q"); code != 0 {
		t.Fatalf("begin exited %d: %s", code, errOut)
	}
	code, out, _ := run(t, dir, "status")
	if code != 0 || !strings.Contains(out, "next: ") || !strings.Contains(out, target+" --key "+abs+"\n") || strings.Contains(out, "add the verification material") {
		t.Fatalf("status (exit %d):\n%s", code, out)
	}
	// Rebuilt from the history, the transaction still carries it.
	if err := os.WriteFile(filepath.Join(dir, "journal", "transaction.json"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, dir, "repair"); code != 0 {
		t.Fatalf("repair exited %d: %s", code, errOut)
	}
	if _, out, _ := run(t, dir, "status"); !strings.Contains(out, target+" --key "+abs+"\n") {
		t.Fatalf("status after the rebuild:\n%s", out)
	}
}
