package site_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
)

// lostSlot returns the slot a LostPointerError names, failing the test
// when Active() reports no such loss.
func lostSlot(t *testing.T, s *site.Site) (string, string) {
	t.Helper()
	_, err := s.Active()
	var lp *site.LostPointerError
	if !errors.As(err, &lp) {
		return "", ""
	}
	return lp.Slot, lp.Fix.String()
}

// Attack 4 (lostPointer's fallback to the history's last switch,
// f356a5e), "a forced switch back killed". Operator's steps: slot a
// serves; blue-green switches to slot b (soak); b misbehaves and the
// operator runs `kubectl bundle-switch back --force` (slot a's gate
// cannot run), which is killed inside its move (the docker network
// call); then a partial restore of the state dir loses the slot records,
// switch.json and the pointer (the sequence the fix's own regression,
// i1-destroy-after-records-and-pointer-lost, starts from).
// What goes wrong: the forced switch back records its history event
// "back --force (ungated) a from b" before it moves; switchedTo reads
// its target as the word after "back": "--force". lastSwitchTo then
// names slot "--force", which the history never created, and
// lostPointer gives up: Active() says no slot is active, although the
// history's switches say slot a or b serves. Nothing is protected
// (`slot destroy a --yes` or `slot destroy b --yes` goes ahead, as the
// kept i1 regression showed before its fix).
// Expected: the event's target is slot a (or, the move unfinished, the
// lost pointer names a slot that exists); never "no slot is active".
func TestAttack4LostPointerAfterKilledForcedSwitchBack(t *testing.T) {
	d := build(t, fixture{slots: "", history: []string{
		"slot a create", "slot b create",
		"switch a to a from none",
		"switch b to b from a",
		"switch a back --force (ungated) a from b",
	}})
	s := site.Read(d)
	if n, _ := lostSlot(t, s); n != "a" && n != "b" {
		active, err := s.Active()
		t.Errorf("Active() = %q, %v after a forced switch back killed and the records lost: want a lost pointer naming slot a (the switch back's target) or b, with its repair (slot repair); the history's last switch event was read as a switch to slot %q", active, err, "--force")
	}
}

// Attack 4 (lostPointer's fallback to the history's last switch,
// f356a5e), "the serving slot's record damaged". Operator's steps: slot
// a serves (switched to, the history says so); a partial restore of the
// state dir loses switch.json and the pointer and leaves slot a's record
// half written (truncated); slot b was destroyed long ago.
// What goes wrong: the fallback handles the last switched slot's record
// missing (slot repair first) and ready (gate first), but not damaged:
// it falls through and Active() says no slot is active (no error), while
// the switch record's own branch (couldServe) counts a damaged record as
// a slot that may serve. The site then reads as fresh: no lost pointer
// is reported, no repair is printed for it, and slot a is not protected
// as the active slot.
// Expected: a lost pointer naming slot a, whose repair rebuilds its
// record first (slot repair a), as for a missing record.
func TestAttack4LostPointerLastSwitchedRecordDamaged(t *testing.T) {
	d := build(t, fixture{slots: "", history: []string{
		"slot a create", "slot b create",
		"switch a to a from none",
		"switch b to b from a",
		"switch a back a from b",
		"slot b destroy",
	}})
	if _, err := d.MkdirAll("slots"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.Join("slots", "a.json"), []byte(`{"name":"a","provider":"exis`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := site.Read(d)
	n, fix := lostSlot(t, s)
	if n != "a" {
		active, err := s.Active()
		t.Fatalf("Active() = %q, %v: the history's last switch made slot a active and its record is damaged (not gone): want a lost pointer naming slot a, not a fresh site", active, err)
	}
	if !strings.Contains(fix, "slot repair a") {
		t.Errorf("the lost pointer's repair is %q: want slot a's record rebuilt first (slot repair a)", fix)
	}
}

// Attack 4 (lostPointer, f356a5e: the history's last switch names the
// serving slot only when no record vouches for one), "switch then
// revert". Operator's steps: slot a serves; slot b (the update) is
// switched to and misbehaves; the operator reverts with `kubectl
// bundle-switch back` (slot a gated, serving again; slot b kept to look
// at); later the operator gates slot b again (`gate --slot b --record`)
// to see whether it is healthy now. Then a partial restore of the state
// dir loses the pointer, switch.json and transaction.json (the slot
// records and the history are whole).
// What goes wrong: lostPointer names the slot whose gate passed last (b),
// before it looks at the history, whose last switch is the revert to
// slot a: the lost pointer is said to be slot b's, slot b is protected
// as the serving slot, and the repair is `switch to b --force`: run as
// printed, it puts back on service the update the operator reverted (the
// regression), and slot a, which serves, is not the one protected.
// Expected: the history's last switch (back to a) decides which slot
// served: the lost pointer names slot a (switch to a --force).
func TestAttack4LostPointerAfterRevertThenGateOfTheOtherSlot(t *testing.T) {
	d := build(t, fixture{slots: "ab", history: []string{
		"slot a create", "slot b create",
		"switch a to a from none",
		"switch b to b from a",
		"switch a back a from b",
	}})
	// Slot b gated again after the revert: its pass is the latest.
	r, err := record.LoadSlot(d, "b")
	if err != nil {
		t.Fatal(err)
	}
	r.Gate.Time = r.Gate.Time.Add(time.Hour)
	if err := record.SaveSlot(d, r); err != nil {
		t.Fatal(err)
	}
	s := site.Read(d)
	n, fix := lostSlot(t, s)
	if n != "a" || strings.Contains(fix, "switch to b") {
		t.Errorf("lost pointer names slot %q, repair %q: the history's last switch was the revert to slot a (slot b is the reverted update, gated again only to look at it); want slot a, not a switch back to the regression", n, fix)
	}
}

// Attack 4 (the history's last switch, f356a5e, read for a lost pointer
// but not for a damaged one). Operator's steps: slot a served; a
// blue-green update switched to slot b, which serves (soaking). A partial
// restore loses switch.json, transaction.json and the slot records, and
// leaves the active pointer damaged (two lines). The operator runs the
// repairs as printed: first `kubectl bundle-slot repair a` (the first
// slot the history says exists without a record), which rebuilds slot
// a's record from what runs (ready, holding its package, no gate); then
// the pointer's repair again.
// What goes wrong: ActiveFix never asks the history which slot was
// switched to last: with slot a the only readable record, its repair is
// `kubectl bundle-gate --slot a && kubectl bundle-switch to a --force`:
// run as printed, it takes slot b, the update that serves, off service
// and puts slot a back (a revert nobody asked for), while slot b's own
// record is still missing. The same site with the pointer missing rather
// than damaged names slot b (lastSwitchTo).
// Expected: the damaged pointer's repair follows the history's last
// switch as the lost pointer's does: slot b's record rebuilt first, then
// slot b gated and switched to; never a switch to slot a.
func TestAttack4DamagedPointerRepairIgnoresLastSwitch(t *testing.T) {
	d := build(t, fixture{pointer: "!", slots: "", history: []string{
		"slot a create", "slot b create",
		"switch a to a from none",
		"switch b to b from a",
	}})
	// `slot repair a`, run as the first repair printed: slot a's record
	// rebuilt from what runs, its package known, no gate.
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	if err := record.SaveSlot(d, &record.Slot{Name: "a", Provider: "existing", Context: "a", State: "ready",
		Package: &record.PackageRef{Digest: digestV1, Deployed: now}}); err != nil {
		t.Fatal(err)
	}
	got := pointerFix(t, d)
	if strings.Contains(got, "switch to a") {
		t.Errorf("the damaged pointer's repair is %q: the history's last switch made slot b active (its record is still missing); want slot b's record rebuilt, then slot b gated and switched to, not a switch that takes slot b off service for slot a", got)
	}
}
