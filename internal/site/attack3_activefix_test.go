package site_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// halfDeployA makes slot a's record that of an in-place deploy of the
// update killed half way: its gate no longer vouches for it.
func halfDeployA(t *testing.T, d *state.Dir) {
	t.Helper()
	now := time.Date(2026, 12, 3, 10, 5, 0, 0, time.UTC)
	a := &record.Slot{Name: "a", Provider: "existing", Context: "a", State: "ready",
		Package:   &record.PackageRef{Digest: digestV1, Deployed: now.Add(-time.Hour)},
		Gate:      &record.GateResult{Gate: "default", Passed: true, Time: now.Add(-time.Hour), Package: digestV1},
		Deploying: &record.DeployAttempt{Digest: strings.Repeat("2", 64), Started: now}}
	if err := record.SaveSlot(d, a); err != nil {
		t.Fatal(err)
	}
}

func pointerFix(t *testing.T, d *state.Dir) string {
	t.Helper()
	if err := os.WriteFile(d.Join(record.ActiveFile), []byte("a\nb\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := site.Read(d).Active()
	var dmg *state.DamageError
	if !errors.As(err, &dmg) {
		t.Fatalf("pointer damaged: Active() = %v, want a damage error", err)
	}
	return dmg.Fix.String()
}

// Attack 3 (ActiveFix, switchedAwayFrom), "away and back". Operator's
// steps: an in-place update of slot a killed inside its deploy; `switch to
// b --force` (b, gated, serves); journal status then names the way back
// (MovedOff: `switch to a --force`), run as printed: slot a serves again
// and the switch record says SWITCHED to a. Then the active pointer is
// damaged (two lines).
// What goes wrong: switchedAwayFrom sees the history's old switch to b
// and says "moved off", although the last switch landed on slot a again;
// the pointer's repair names `switch to b --force`, taking the update's
// slot off service for slot b, after which journal status names `switch
// to a --force` again (MovedOff): two needless moves of service, and the
// repair contradicts the next step (TestModel replays the same flip-flop:
// repair → b, next → a).
// Expected: the last switch put the site back on slot a, as at the
// update's start: the repair is the forced switch to slot a (the update's
// run gates it), as with no switch at all.
func TestAttack3ActiveFixAfterSwitchAwayAndBack(t *testing.T) {
	d := build(t, fixture{pointer: "a", sw: "SWITCHED a b", txn: "in-place DEPLOYING", slots: "ab"})
	halfDeployA(t, d)
	j := journal.New(d)
	for _, ev := range []journal.Event{
		{Type: "switch", Slot: "b", Detail: "to b from a", Status: journal.StatusDone},
		{Type: "switch", Slot: "a", Detail: "to a from b", Status: journal.StatusDone},
	} {
		if err := j.Record(ev); err != nil {
			t.Fatal(err)
		}
	}
	got := pointerFix(t, d)
	if !strings.Contains(got, "switch to a --force") || strings.Contains(got, "switch to b") {
		t.Errorf("the pointer's repair is %q; the last switch (the way back journal status named) put slot a, the update's slot, back on service: want `switch to a --force`, not a move of service to slot b that the next step (MovedOff) undoes", got)
	}
}

// Attack 3 (ActiveFix, switchedAwayFrom), "records lost". Operator's
// steps: an in-place update of slot a killed inside its deploy; `switch to
// b --force` (b, gated, serves); then a partial restore of the state dir
// loses switch.json and cuts the tail of history.jsonl, where the forced
// switch's event was; `kubectl bundle-journal repair` (as journal status
// prints) acknowledges the cut; then the active pointer is damaged.
// What goes wrong: with no switch record and no switch event left,
// switchedAwayFrom says "not moved", and the repair is `switch to a
// --force   # ... (no gate: the update's run gates it)`: a forced switch,
// without a gate, to the half-deployed slot a, taking slot b (known-good,
// serving) off service: the very break c372aee fixed, back through lost
// records. TestModel runs it as printed without complaint (the fake's
// slot a is healthy).
// Expected: a history cut acknowledged since the update began means a
// switch "may" have moved the site (switchedAwayFrom's own contract): the
// repair names only a gated slot (b), or gates slot a first.
func TestAttack3ActiveFixAfterSwitchRecordLostAndHistoryCut(t *testing.T) {
	d := build(t, fixture{pointer: "b", sw: "SWITCHED b a", txn: "in-place DEPLOYING", slots: "ab"})
	halfDeployA(t, d)
	hist := d.Join(journal.Dir, journal.HistoryFile)
	before, err := os.ReadFile(hist)
	if err != nil {
		t.Fatal(err)
	}
	j := journal.New(d)
	if err := j.Record(journal.Event{Type: "switch", Slot: "b", Detail: "to b from a", Status: journal.StatusDone}); err != nil {
		t.Fatal(err)
	}
	// The partial restore: switch.json gone, the history's tail cut.
	if err := os.Remove(d.Join(record.SwitchFile)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hist, before, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := j.RepairDamage(); err != nil {
		t.Fatal(err)
	}
	got := pointerFix(t, d)
	if strings.Contains(got, "switch to a --force") && !strings.Contains(got, "gate --slot a") {
		t.Errorf("the pointer's repair is %q: a forced switch without a gate to the half-deployed slot a, while the history acknowledges lines lost since the update began (a switch away may be among them) and the switch record is gone; want the gated slot b, or a gate of slot a first", got)
	}
}
