package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

func newJournal(t *testing.T) *Journal {
	t.Helper()
	d, err := state.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	// The repairs printed find this state dir by themselves: no
	// KUBECTL_BUNDLE_STATE_DIR in them (internal/site's
	// TestRepairNamesTheStateDir checks them with a relative one).
	t.Setenv(state.EnvStateDir, d.Path)
	return New(d)
}

// TestTransitionTable walks every strategy's happy path and checks that
// each phase is refused from every phase it does not follow.
func TestTransitionTable(t *testing.T) {
	happy := map[Strategy][]Phase{
		BlueGreen: {Verified, Provisioning, Provisioned, Healthy, Switched, Soaking, Accepted, Retired},
		InPlace:   {Verified, Deploying, Healthy, Committed},
		Recreate:  {Verified, Teardown, Building, Healthy, Committed},
	}
	for st, path := range happy {
		t.Run(string(st), func(t *testing.T) {
			j := newJournal(t)
			if _, err := j.Begin(BeginOptions{Strategy: st, Target: "x"}); err != nil {
				t.Fatal(err)
			}
			for i, p := range path {
				// Every later phase is illegal now.
				for _, q := range path[i+1:] {
					if _, err := j.Start(q); !isConflict(err) {
						t.Fatalf("starting %s before %s: %v", q, p, err)
					}
				}
				if _, err := j.Start(p); err != nil {
					t.Fatal(err)
				}
				if IsFinal(p) {
					// A final step runs a command too (retiring a slot): it
					// is not over, and cannot be ended, until it is done.
					if _, err := j.End(); !isConflict(err) {
						t.Fatalf("end during a started %s: %v", p, err)
					}
					if txn, _ := j.Load(); Next(txn).Command == "kubectl bundle-journal end" {
						t.Fatalf("next during a started %s says end", p)
					}
				}
				if _, err := j.Done(p); err != nil {
					t.Fatal(err)
				}
			}
			txn, _ := j.Load()
			if !IsFinal(txn.Phase) || Next(txn).Command != "kubectl bundle-journal end" {
				t.Fatalf("ended in %s, next %q", txn.Phase, Next(txn).Command)
			}
			if _, err := j.End(); err != nil {
				t.Fatal(err)
			}
			if txn, _ := j.Load(); txn != nil {
				t.Fatal("still open after end")
			}
		})
	}
}

func isConflict(err error) bool {
	var ce *ConflictError
	return errors.As(err, &ce)
}

func TestRetryAndRecovery(t *testing.T) {
	j := newJournal(t)
	j.Begin(BeginOptions{Strategy: InPlace, Target: "x", Fallback: "y"})
	j.Start(Verified)
	j.Done(Verified)
	j.Start(Deploying)
	if _, err := j.Fail(Deploying, "helm timed out"); err != nil {
		t.Fatal(err)
	}
	txn, _ := j.Load()
	if got := Legal(txn); !slices.Equal(got, []Phase{Deploying, Restoring}) {
		t.Fatalf("after a failure legal is %v", got)
	}
	if !strings.Contains(Next(txn).Why, "helm timed out") || txn.LastError != "DEPLOYING: helm timed out" {
		t.Fatalf("next/last error: %+v %q", Next(txn), txn.LastError)
	}
	txn, _ = j.Start(Deploying)
	if s := txn.Step(Deploying); s.Attempts != 2 || s.Status != StatusStarted || s.Error != "" {
		t.Fatalf("retry: %+v", s)
	}
	// Done twice is idempotent; done on a phase that is not current is not.
	j.Done(Deploying)
	if _, err := j.Done(Deploying); err != nil {
		t.Fatalf("done twice: %v", err)
	}
	if _, err := j.Done(Verified); !isConflict(err) {
		t.Fatalf("done on an old phase: %v", err)
	}
	// Starting an already-done current phase again is a no-op (resumed script).
	if txn, err := j.Start(Deploying); err != nil || txn.Step(Deploying).Attempts != 2 {
		t.Fatalf("restart of a done phase: %v", err)
	}
	j.Start(Healthy)
	if _, err := j.Start(Restoring); err != nil {
		t.Fatalf("recovery from an unfinished phase: %v", err)
	}
	if _, _, err := j.Abort(); !isConflict(err) || !strings.Contains(err.Error(), "aborted only before DEPLOYING") {
		t.Fatalf("abort after deploying: %v", err)
	}
	if _, err := j.End(); !isConflict(err) {
		t.Fatalf("end before a final phase: %v", err)
	}
}

func TestAbort(t *testing.T) {
	j := newJournal(t)
	j.Begin(BeginOptions{Strategy: BlueGreen, Target: "x", Slots: Slots{Active: "a", Candidate: "b"}})
	j.Start(Verified)
	j.Done(Verified)
	j.Start(Provisioning)
	txn, cleanup, err := j.Abort()
	if err != nil || txn.Phase != Aborted || len(cleanup) != 2 || !strings.Contains(cleanup[0].String(), "kubectl bundle-slot destroy b") {
		t.Fatalf("%v %v %+v", err, cleanup, txn)
	}
	if _, err := j.Begin(BeginOptions{Strategy: InPlace, Target: "y"}); !isConflict(err) || !strings.Contains(err.Error(), "next: kubectl bundle-journal end") {
		t.Fatalf("begin while an aborted one is open: %v", err)
	}
	j.End()
	if _, err := j.Begin(BeginOptions{Strategy: InPlace, Target: "y"}); err != nil {
		t.Fatal(err)
	}
	h, _ := ReadHistory(j.histPath())
	if len(h.Events) != 7 || h.Events[5].Type != EventEnd || h.Events[6].Type != EventBegin || h.Events[6].Seq != 7 {
		t.Fatalf("history: %+v", h.Events)
	}
}

// TestAbortPastDeployWithNothingToRestore: an in-place update past its
// deploy is closed by its restore; with no previous package recorded
// there is none, and abort is the way out (with one, it refuses).
func TestAbortPastDeployWithNothingToRestore(t *testing.T) {
	for _, fallback := range []string{"", "z"} {
		j := newJournal(t)
		j.Begin(BeginOptions{Strategy: InPlace, Target: "x", Fallback: fallback, Slots: Slots{Active: "a"}})
		j.Start(Verified)
		j.Done(Verified)
		j.Start(Deploying)
		_, _, err := j.Abort()
		switch {
		case fallback == "" && err != nil:
			t.Errorf("nothing to restore: abort refused: %v", err)
		case fallback != "" && !isConflict(err):
			t.Errorf("a fallback to restore: abort %v, want refused", err)
		}
	}
}

func TestCorruptNeverMeansNoTransaction(t *testing.T) {
	j := newJournal(t)
	j.Begin(BeginOptions{Strategy: InPlace, Target: "x"})
	os.WriteFile(j.txnPath(), []byte(`{"apiVersion":`), 0o600)
	_, err := j.Load()
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.ErrorKind() != errkind.Environment || !strings.Contains(err.Error(), "transaction.json is unreadable") {
		t.Fatalf("%v", err)
	}
	if _, err := j.Begin(BeginOptions{Strategy: InPlace, Target: "x"}); !errors.As(err, &ce) {
		t.Fatalf("begin over a corrupt transaction: %v", err)
	}
}

func TestTornHistory(t *testing.T) {
	j := newJournal(t)
	j.Begin(BeginOptions{Strategy: InPlace, Target: "x"})
	f, _ := os.OpenFile(j.histPath(), os.O_APPEND|os.O_WRONLY, 0)
	f.Write([]byte(`{"seq":2,"time":"2026-`))
	f.Close()
	h, err := ReadHistory(j.histPath())
	if err != nil || h.Torn == nil || len(h.Events) != 1 {
		t.Fatalf("torn tail: %v %+v", err, h)
	}
	if note, err := j.Repair(); err != nil || !strings.Contains(note, "torn") {
		t.Fatalf("repair: %q %v", note, err)
	}
	j.Start(Verified)
	h, err = ReadHistory(j.histPath())
	if err != nil || h.Torn != nil || len(h.Events) != 2 || h.Events[1].Seq != 2 {
		t.Fatalf("after repair: %v %+v", err, h)
	}
	// A broken line in the middle is corruption, reported with its number.
	os.WriteFile(j.histPath(), []byte("garbage\n{\"seq\":1}\n"), 0o600)
	if _, err := ReadHistory(j.histPath()); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("middle corruption: %v", err)
	}
}

func FuzzParseTransaction(f *testing.F) {
	j := New(&state.Dir{Path: f.TempDir()})
	txn, err := j.Begin(BeginOptions{Strategy: BlueGreen, Target: "x", Slots: Slots{Candidate: "b"}})
	if err != nil {
		f.Fatal(err)
	}
	b, _ := os.ReadFile(j.txnPath())
	f.Add(b)
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	_ = txn
	f.Fuzz(func(t *testing.T, b []byte) {
		// Through the front door: whatever is in transaction.json, Load
		// returns a transaction or an error, never "none open".
		if err := os.WriteFile(j.txnPath(), b, 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := j.Load(); got == nil && err == nil {
			t.Fatal("a transaction file read as no transaction")
		}
		txn, err := ParseTransaction(b)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		// Whatever parses is usable: the next step can be computed.
		_ = Next(txn)
		_ = Legal(txn)
	})
}

func FuzzParseHistory(f *testing.F) {
	f.Add([]byte("{\"seq\":1,\"time\":\"2026-11-29T00:00:00Z\",\"txn\":\"a\",\"type\":\"begin\"}\n"))
	f.Add([]byte("{\"seq\":1,\"txn\":\"a\",\"type\":\"begin\"}\n{\"seq\":"))
	f.Add([]byte("\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHistory(b)
		if err != nil {
			return
		}
		var last int64
		for _, e := range h.Events {
			if e.Seq <= last || e.TxnID == "" {
				t.Fatalf("accepted a bad event %+v", e)
			}
			last = e.Seq
		}
		if h.ValidBytes > int64(len(b)) {
			t.Fatal("valid bytes beyond input")
		}
	})
}

// TestRecordInterleavesWithTransitions: slot and switch events recorded
// between transitions share the sequence; the history stays readable.
func TestRecordInterleavesWithTransitions(t *testing.T) {
	j := newJournal(t)
	if err := j.Record(Event{Type: "slot", Slot: "a", Detail: "create", Status: "done"}); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Begin(BeginOptions{Strategy: BlueGreen, Target: strings.Repeat("ab", 32)}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := j.Record(Event{Type: "slot", Slot: "b", Detail: fmt.Sprintf("create/step-%d", i), Status: "done"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := j.Start(Verified); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Done(Verified); err != nil {
		t.Fatal(err)
	}
	h, err := ReadHistory(j.histPath())
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Events) != 7 {
		t.Fatalf("%d events", len(h.Events))
	}
	if h.Events[0].TxnID != NoTransaction || h.Events[2].TxnID == NoTransaction || h.Events[2].Slot != "b" {
		t.Errorf("events %+v", h.Events)
	}
	if msg, err := j.Repair(); err != nil || msg != "" {
		t.Errorf("repair after interleaving: %q %v", msg, err)
	}
	// An event after the last transition, then abort and end.
	if err := j.Record(Event{Type: "switch", Slot: "b", Detail: "to b from a", Status: "done"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := j.Abort(); err != nil {
		t.Fatal(err)
	}
	if err := j.Record(Event{Type: "slot", Slot: "b", Detail: "destroy", Status: "done"}); err != nil {
		t.Fatal(err)
	}
	if _, err := j.End(); err != nil {
		t.Fatal(err)
	}
	if h, err = ReadHistory(j.histPath()); err != nil || len(h.Events) != 11 {
		t.Fatalf("history after end: %v, %d events", err, len(h.Events))
	}
}

// The next command names the strategy script installed beside the binary
// (make install, the scripts archive), so that it runs as printed.
func TestScriptPathFindsTheInstalledScripts(t *testing.T) {
	t.Setenv(EnvScriptsDir, "")
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// The test runs in internal/journal of the checkout.
	checkout := filepath.Join(filepath.Dir(filepath.Dir(wd)), "scripts", "in-place.sh")
	if got := ScriptPath(InPlace); got != checkout {
		t.Fatalf("with nothing installed: %q, want the checkout's %s (absolute: it runs from any directory)", got, checkout)
	}
	// From another directory too: never relative to where it was printed.
	// Only a build without -trimpath knows the checkout it was built from.
	t.Chdir(t.TempDir())
	if _, file, _, _ := runtime.Caller(0); filepath.IsAbs(file) {
		if got := ScriptPath(InPlace); got != checkout {
			t.Fatalf("from another directory: %q, want %s", got, checkout)
		}
	} else if got := ScriptPath(InPlace); !filepath.IsAbs(got) {
		t.Fatalf("from another directory, built with -trimpath: %q is not absolute", got)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(filepath.Dir(exe), ScriptsDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Skipf("cannot write beside the test binary: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	want := filepath.Join(dir, "in-place.sh")
	if err := os.WriteFile(want, []byte("#!/usr/bin/env bash\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := ScriptPath(InPlace); got != want {
		t.Errorf("installed: %q, want %q", got, want)
	}
	tx := &Transaction{Strategy: InPlace, Target: strings.Repeat("1", 64), Fallback: strings.Repeat("2", 64), Package: "/site/pkg.tar.zst", Phase: Deploying, Status: StatusFailed,
		Steps: []Step{{Phase: Deploying, Status: StatusFailed, Error: "boom"}}}
	if got := Next(tx).Command; got != want+" /site/pkg.tar.zst" {
		t.Errorf("next command %q, want %q", got, want+" /site/pkg.tar.zst")
	}
	// The scripts a script runs from (lib.sh sets the variable) come first;
	// a relative value is ignored.
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "in-place.sh"), []byte("#!/usr/bin/env bash\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvScriptsDir, other)
	if got := ScriptPath(InPlace); got != filepath.Join(other, "in-place.sh") {
		t.Errorf("with $%s: %q, want %q", EnvScriptsDir, got, filepath.Join(other, "in-place.sh"))
	}
	t.Setenv(EnvScriptsDir, "scripts")
	if got := ScriptPath(InPlace); got != want {
		t.Errorf("with a relative $%s: %q, want %q", EnvScriptsDir, got, want)
	}
}
