package site

import (
	"errors"
	"fmt"

	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
)

// Where a strategy run resumes a blue-green transaction: the sets of
// phases its steps decide on (internal/journalcmd, advance).

var (
	rollingBack = []journal.Phase{journal.Destroying, journal.RolledBack, journal.SwitchedBack}
	pastSwitch  = []journal.Phase{journal.Switched, journal.Soaking, journal.Accepted, journal.Retired}
	accepted    = []journal.Phase{journal.Accepted, journal.Retired}
)

func phaseIn(p journal.Phase, set []journal.Phase) bool {
	for _, s := range set {
		if p == s {
			return true
		}
	}
	return false
}

// RollingBack says t is inside a blue-green rollback or revert (the
// candidate is being destroyed or the switch back began): an apply's
// re-run finishes it.
func RollingBack(t *journal.Transaction) bool { return phaseIn(t.Phase, rollingBack) }

// PastSwitch says t switched to its candidate: past the point of no
// return, an apply's re-run only finishes the switch.
func PastSwitch(t *journal.Transaction) bool { return phaseIn(t.Phase, pastSwitch) }

// Accepted says t's soak was accepted: its previous slot is no revert
// target any more.
func Accepted(t *journal.Transaction) bool { return phaseIn(t.Phase, accepted) }

// MovedOff is the next step of an update in place (in-place, recreate)
// whose slot no longer serves: such an update changes and commits the
// slot it began on (t.Slots.Active), and a forced switch made while it was
// open moved the pointer to another slot. Run on, it would commit an
// update on a slot that does not serve and say it is live. Before the
// update's first change the step is its abort (the other slot goes on
// serving); after it, the slot may be half-updated and the update cannot
// be aborted, so the step puts the slot back as the active one, as it was
// when the update began, and the update's run then finishes or restores
// it. Nil when no such update is open, the pointer names its slot, or the
// pointer cannot be read or names no slot (damage, reported as such).
func (s *Site) MovedOff() *journal.NextStep {
	t := s.txnOrNil()
	if t == nil || t.Strategy == journal.BlueGreen || t.Slots.Active == "" || journal.IsFinal(t.Phase) {
		return nil
	}
	if n := s.tornDown(t); n != nil {
		return n
	}
	if !s.pointerPresent || s.pointerProblem != nil || s.pointer == "" || s.pointer == t.Slots.Active || !s.Exists(s.pointer) {
		return nil
	}
	n := journal.NextStep{Phases: journal.Legal(t)}
	moved := fmt.Sprintf("transaction %s (%s) updates slot %s, but the active pointer names slot %s (a forced switch moved it while the update was open): run on, the update would commit on a slot that does not serve",
		t.ID, t.Strategy, t.Slots.Active, s.pointer)
	back := advice.Plugin("switch", "to", t.Slots.Active, "--force")
	if ok, _ := journal.Abortable(t); ok {
		n.Do(advice.Plugin("journal", "abort"), back)
		n.Why = fmt.Sprintf("%s. Nothing of it changed slot %s yet: abort closes it (then %s) and slot %s goes on serving; or put slot %s back as the active slot and run the update again",
			moved, t.Slots.Active, advice.Plugin("journal", "end"), s.pointer, t.Slots.Active)
		return &n
	}
	abort := advice.Plugin("journal", "abort")
	if r, err := s.Slot(t.Slots.Active); err != nil || !r.Ready() {
		// Torn down, half built or gone: it cannot be made active again.
		n.Do(abort)
		n.Why = fmt.Sprintf("%s. Slot %s cannot serve now (%s), so it cannot be switched back to: abort closes the update (then %s) and slot %s goes on serving; slot %s keeps what the update left, to be destroyed or built again by hand",
			moved, t.Slots.Active, slotCondition(r, err), advice.Plugin("journal", "end"), s.pointer, t.Slots.Active)
		return &n
	}
	n.Do(back, abort)
	n.Why = fmt.Sprintf("%s. Slot %s may be half-updated (%s): this puts it back as the active slot, as it was when the update began; then run the update again, which finishes it or restores the previous package. Or abort the update (then %s): slot %s goes on serving and slot %s keeps what the update left",
		moved, t.Slots.Active, t.Phase, advice.Plugin("journal", "end"), s.pointer, t.Slots.Active)
	return &n
}

// tornDown is the next step of an update in place whose slot a destroy
// outside it tore down (kubectl bundle-slot destroy --force of the active
// slot, finished or cut short): nothing of the slot is left for the update
// to restore or commit, and its run would gate a cluster that is gone, the
// same failure each time. The step closes the update (an abandoned one, as
// when the pointer moved off); the slot's own repair comes after. Nil for
// other updates (recreate tears its slot down itself), while the slot
// stands, and when the pointer names another slot (MovedOff's case); a
// pointer removed (the repair of one that names the destroyed slot) does
// not change it.
func (s *Site) tornDown(t *journal.Transaction) *journal.NextStep {
	if t.Strategy != journal.InPlace {
		return nil
	}
	// A pointer naming another slot: that one serves, the pointer's own
	// step says so. No pointer (removed as the repair of one naming the
	// destroyed slot) or one naming the update's slot: the slot's state
	// decides.
	if s.pointerPresent && s.pointer != t.Slots.Active {
		return nil
	}
	r, err := s.Slot(t.Slots.Active)
	var how string
	switch {
	case err == nil && r != nil && r.State == record.StateDestroying:
		how = "is being destroyed (its record says destroying: a destroy outside the update, perhaps cut short)"
	case errors.As(err, new(*record.NotFoundError)) && !s.Exists(t.Slots.Active):
		how = "was destroyed (the history says so and it has no record)"
	default:
		return nil
	}
	n := journal.NextStep{Phases: journal.Legal(t)}
	n.Do(advice.Plugin("journal", "abort"))
	n.Why = fmt.Sprintf("transaction %s (in-place) updates slot %s, but slot %s %s: nothing of it is left for the update to restore or commit. Abort closes the update (then %s); then finish the destroy (%s) and build the site again",
		t.ID, t.Slots.Active, t.Slots.Active, how, advice.Plugin("journal", "end"), advice.Plugin("slot", "destroy", t.Slots.Active, "--yes", "--force"))
	return &n
}

// slotCondition says why a slot cannot serve: its record's state, or that
// it has none.
func slotCondition(r *record.Slot, err error) string {
	if err != nil || r == nil {
		return "it has no readable record"
	}
	return "its record says " + r.State
}

// SoakLost is the next step of a blue-green update that switched and
// soaks while the switch record is missing (a partial restore of the state
// dir, or removed by hand): accept and revert both follow that record and
// refuse without it, so the step writes it again first, with a forced
// switch to the slot that serves, which keeps the update's active slot as
// the revert target (Switcher.To, SoakingOn). Nil when no such update is
// open, the switch record is there (or damaged: its own repair), or the
// pointer does not name the update's candidate.
func (s *Site) SoakLost() *journal.NextStep {
	t := SoakingOn(s.txnOrNil(), s.pointer)
	if t == nil || s.sw != nil || s.swProblem != nil || !s.pointerPresent || s.pointerProblem != nil {
		return nil
	}
	n := journal.NextStep{Phases: journal.Legal(t)}
	n.Do(advice.Plugin("switch", "to", t.Slots.Candidate, "--force"))
	n.Why = fmt.Sprintf("transaction %s (blue-green) soaks on slot %s, but the switch record is missing, and accept and revert both follow it: this writes it again with slot %s as the revert target (no cluster changes); then accept or revert as before",
		t.ID, t.Slots.Candidate, t.Slots.Active)
	return &n
}
