package site

import (
	"errors"
	"fmt"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// Next is the next step on a site where no transaction is open, decided
// from the pointer, the switch record, the history and the slot records:
// the repair of damage first, then a switch that did not finish, then a
// soak to end, else nothing (the site is at rest; Command is empty). The
// step of an open transaction is the journal's (journal.NextWithGateFile),
// which journal next and journal status ask when one is open.
func (s *Site) Next(now time.Time) journal.NextStep {
	if _, err := s.Protection(); err != nil {
		var dmg *state.DamageError
		if errors.As(err, &dmg) && !dmg.Fix.IsZero() {
			n := journal.NextStep{Why: "the state is damaged: " + dmg.Path + ": " + dmg.Problem}
			n.Fix(dmg.Fix)
			return n
		}
		return journal.NextStep{Why: "the state cannot be read: " + err.Error()}
	}
	active, _ := s.Active()
	sw := s.sw
	var n journal.NextStep
	switch {
	case sw != nil && sw.Phase == record.PhaseSwitching:
		n.Do(advice.Plugin("switch", "to", sw.Target))
		n.Why = fmt.Sprintf("the switch to slot %s began and did not finish: this completes it", sw.Target)
		return n
	case sw != nil && sw.Phase == record.PhaseSwitchingBack:
		n.Do(advice.Plugin("switch", "back"))
		n.Why = fmt.Sprintf("the switch back to slot %s began and did not finish: this completes it", sw.Target)
		return n
	case sw != nil && sw.Phase == record.PhaseSwitched && sw.Previous != "":
		why := fmt.Sprintf("slot %s soaks as the active slot, slot %s kept as its revert target", sw.Target, sw.Previous)
		if w, err := time.ParseDuration(sw.SoakWindow); err == nil && !sw.SoakStarted.IsZero() {
			if left := sw.SoakStarted.Add(w).Sub(now); left > 0 {
				why += fmt.Sprintf(" (%s of its soak window left)", left.Round(time.Second))
			} else {
				why += " (its soak window has passed)"
			}
		}
		n.Do(advice.Plugin("switch", "accept"), advice.Plugin("switch", "back"))
		n.Why = why + ": accept keeps slot " + sw.Target + "; back returns to slot " + sw.Previous
		return n
	case sw == nil:
		if to, from := s.HistorySoak(); from != "" && to == active {
			n.Do(advice.Plugin("switch", "to", to, "--force"))
			n.Why = fmt.Sprintf("the switch record is missing, but the history says slot %s was switched to from slot %s and not accepted: this writes the record again with slot %s as the revert target", to, from, from)
			return n
		}
	}
	if active == "" {
		return journal.NextStep{Why: fmt.Sprintf("no slot is active: the first install is made by hand (%s, deploy, gate --record, switch to a), then updates run through a strategy", advice.Plugin("slot", "create", "a"))}
	}
	return journal.NextStep{Why: fmt.Sprintf("the site is at rest: slot %s serves and no update is open; an update runs through a strategy: %s PACKAGE, %s apply PACKAGE or %s PACKAGE",
		active, journal.ScriptPath(journal.InPlace), journal.ScriptPath(journal.BlueGreen), journal.ScriptPath(journal.Recreate))}
}
