package session

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

func open(t *testing.T, dir string) *Session {
	t.Helper()
	t.Setenv(EnvStep, "")
	s, err := Open(Options{StateDir: dir, Mutate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// slots records ready slots a, b and c.
func slots(t *testing.T, dir string) {
	t.Helper()
	d := &state.Dir{Path: dir}
	for _, n := range []string{"a", "b", "c"} {
		if err := slot.Save(d, &slot.Record{Name: n, State: slot.StateReady}); err != nil {
			t.Fatal(err)
		}
	}
}

func write(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestGuardProtectsActiveAndSoakingSlots: the active slot, and during a soak
// the previous one, are refused (a conflict naming why); other slots pass.
func TestGuardProtectsActiveAndSoakingSlots(t *testing.T) {
	dir := t.TempDir()
	slots(t, dir)
	write(t, dir, "active", "b\n")
	write(t, dir, "switch.json", `{"phase":"SWITCHED","target":"b","previous":"a","soakWindow":"24h"}`)
	s := open(t, dir)
	for name, want := range map[string]string{"b": "it is the active slot", "a": "kept as the revert target"} {
		for _, c := range []Change{Create, Deploy, Destroy} {
			err := s.Guard(name, c, false)
			if errkind.Of(err) != errkind.Conflict || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--force") {
				t.Errorf("%s %s: %v", c, name, err)
			}
		}
	}
	if err := s.Guard("c", Destroy, false); err != nil {
		t.Errorf("an unprotected slot: %v", err)
	}
	// Accepted: the soak is over, the previous slot may go.
	write(t, dir, "switch.json", `{"phase":"ACCEPTED","target":"b","previous":"a"}`)
	if err := s.Guard("a", Destroy, false); err != nil {
		t.Errorf("after accept: %v", err)
	}
}

// TestGuardForceIsRecorded: --force passes, and the history says so.
func TestGuardForceIsRecorded(t *testing.T) {
	dir := t.TempDir()
	slots(t, dir)
	write(t, dir, "active", "a\n")
	s := open(t, dir)
	if err := s.Guard("a", Destroy, true); err != nil {
		t.Fatal(err)
	}
	h, err := journal.ReadHistory(filepath.Join(dir, "journal", "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if l := h.Last(); l == nil || l.Type != "force" || !strings.Contains(l.Detail, "destroy slot a although it is the active slot") {
		t.Fatalf("history: %+v", l)
	}
}

// TestGuardOwnerStep: only the live step of the table that owns the change
// passes, and only in the process that runs it.
func TestGuardOwnerStep(t *testing.T) {
	dir := t.TempDir()
	slots(t, dir)
	write(t, dir, "active", "a\n")
	s := open(t, dir)
	txn, err := s.Journal.Begin(journal.BeginOptions{Strategy: journal.InPlace, Target: "x", Slots: journal.Slots{Active: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []journal.Phase{journal.Verified, journal.Deploying} {
		if txn, err = s.Journal.Start(p); err != nil {
			t.Fatal(err)
		}
		if p != journal.Deploying {
			if txn, err = s.Journal.Done(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Guard("a", Deploy, false); errkind.Of(err) != errkind.Conflict {
		t.Errorf("deploy from a process that does not run the step: %v", err)
	}
	s.step = StepID(txn)
	if err := s.Guard("a", Deploy, false); errkind.Of(err) != errkind.Conflict {
		t.Errorf("KUBECTL_BUNDLE_STEP without a live journal run holding the step: %v", err)
	}
	lock, err := s.Dir.LockStep(StepID(txn))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	if err := s.Guard("a", Deploy, false); err != nil {
		t.Errorf("deploy by the DEPLOYING step: %v", err)
	}
	if err := s.Guard("a", Destroy, false); errkind.Of(err) != errkind.Conflict {
		t.Errorf("in-place's DEPLOYING may not destroy: %v", err)
	}
	if txn, err = s.Journal.Fail(journal.Deploying, "x"); err != nil {
		t.Fatal(err)
	}
	if err := s.Guard("a", Deploy, false); errkind.Of(err) != errkind.Conflict {
		t.Errorf("a failed step owns nothing: %v", err)
	}
}

// TestDamageIsNotNone: every damaged pointer or switch record stops the
// guard with an environment error naming the repair, never "none".
func TestDamageIsNotNone(t *testing.T) {
	cases := map[string]func(dir string){
		"empty active":    func(dir string) { write(t, dir, "active", "") },
		"two lines":       func(dir string) { write(t, dir, "active", "a\nb\n") },
		"not a slot name": func(dir string) { write(t, dir, "active", "../x\n") },
		"directory":       func(dir string) { os.Mkdir(filepath.Join(dir, "active"), 0o700) },
		"symlink": func(dir string) {
			write(t, dir, "elsewhere", "a\n")
			os.Symlink(filepath.Join(dir, "elsewhere"), filepath.Join(dir, "active"))
		},
		"switch.json garbage": func(dir string) { write(t, dir, "active", "a\n"); write(t, dir, "switch.json", "{") },
		"switch.json phase": func(dir string) {
			write(t, dir, "active", "a\n")
			write(t, dir, "switch.json", `{"phase":"X","target":"a"}`)
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			slots(t, dir)
			damage(dir)
			s := open(t, dir)
			err := s.Guard("b", Deploy, false)
			var de *state.DamageError
			if errkind.Of(err) != errkind.Environment || !strings.Contains(err.Error(), "repair: ") {
				t.Fatalf("got %v (damage error: %v)", err, de)
			}
			if err := s.Guard("b", Deploy, true); errkind.Of(err) != errkind.Environment {
				t.Fatalf("--force does not read damage as none: %v", err)
			}
		})
	}
}

// TestGuardKeepsAnOwnerWhoseRecordIsLost: an S1 owner (the history's
// ownership event) is refused destroy with its record removed or damaged,
// and the advice names the repair of its record.
func TestGuardKeepsAnOwnerWhoseRecordIsLost(t *testing.T) {
	dir := t.TempDir()
	slots(t, dir)
	write(t, dir, "active", "b\n")
	s := open(t, dir)
	rec := &slot.Record{Name: "a", Provider: slot.ProviderKind, State: slot.StateReady, OwnsWorkloads: []string{"airgap-wl-a"}}
	for _, ev := range []journal.Event{{Type: "slot", Slot: "a", Detail: "create", Status: journal.StatusDone}, slot.IdentityEvent(rec, record.DetailOwns, journal.StatusDone)} {
		if err := s.Journal.Record(ev); err != nil {
			t.Fatal(err)
		}
	}
	for _, damage := range []func(){
		func() { write(t, dir, "slots/a.json", "{not json") },
		func() { os.Remove(filepath.Join(dir, "slots", "a.json")) },
	} {
		damage()
		err := s.Guard("a", Destroy, false)
		if errkind.Of(err) != errkind.Conflict || !strings.Contains(err.Error(), "owns workload clusters airgap-wl-a") ||
			!strings.Contains(err.Error(), "kubectl bundle-slot repair a") {
			t.Errorf("destroy of an owner without its record: %v", err)
		}
	}
	if err := s.Guard("c", Destroy, false); err != nil {
		t.Errorf("a slot that owns nothing: %v", err)
	}
}
