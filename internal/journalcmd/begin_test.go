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
		{[]string{"--strategy", "recreate", "--fallback", "not-a-digest"}, "--fallback: reading package not-a-digest"},
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

	// A staged fallback, by digest or by path, is recorded as its digest.
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
