package switchover

import (
	"fmt"
	"slices"

	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
)

// transaction reads the open transaction once for a switch (nil when none
// is open or the switch runs without a journal).
func (s *Switcher) transaction() (*journal.Transaction, error) {
	if s.Journal == nil {
		return nil, nil
	}
	return site.ReadTxn(s.Dir)
}

// blueGreen returns t when it is a blue-green transaction: the only
// strategy whose phases the switch records itself.
func blueGreen(t *journal.Transaction) *journal.Transaction {
	if t == nil || t.Strategy != journal.BlueGreen {
		return nil
	}
	return t
}

// phaseStep records phase p of the blue-green transaction bg around fn;
// without one, fn just runs. A phase already done still runs fn, which
// completes an interrupted move.
func (s *Switcher) phaseStep(bg *journal.Transaction, p journal.Phase, fn func() error) error {
	if bg == nil {
		return fn()
	}
	return journal.RunStep(s.Journal.PhaseStep(p), fn)
}

// checkTransaction refuses to switch while another step of the open
// transaction t is running, or to a slot that is not its candidate. A
// step runs while a live process holds the step lock (journal run), not
// because its status says started: a step whose owner was killed is
// interrupted, and only a forced switch (the repair of a damaged pointer
// or switch record) goes ahead of its re-run.
func (s *Switcher) checkTransaction(t *journal.Transaction, target string, force bool, allowed ...journal.Phase) error {
	if t == nil {
		return nil
	}
	if t.Status == journal.StatusStarted && !slices.Contains(allowed, t.Phase) {
		h, err := s.Dir.StepRunning()
		switch {
		case err != nil:
			return err
		case h != nil:
			return &ConflictError{fmt.Sprintf("transaction %s is in step %s, which pid %d runs now: switching now would race it; let it finish, or see %s", t.ID, t.Phase, h.PID, s.Dir.Plugin("journal", "status"))}
		case !force:
			return &ConflictError{fmt.Sprintf("transaction %s was interrupted in step %s (no process runs it): finish it first with the command %s prints, or pass --force", t.ID, t.Phase, s.Dir.Plugin("journal", "status"))}
		}
	}
	if t.Strategy != journal.BlueGreen && target != "" && t.Slots.Active != "" && target != t.Slots.Active && !force {
		// An update in place commits on the slot it began on: moved away
		// from it, the update would commit on a slot that does not serve.
		return &ConflictError{fmt.Sprintf("transaction %s (%s) updates slot %s, which stays the active slot until it ends: finish it first with the command %s prints (or abort it), then switch; or pass --force",
			t.ID, t.Strategy, t.Slots.Active, s.Dir.Plugin("journal", "status"))}
	}
	if t.Strategy == journal.BlueGreen && target != "" && t.Slots.Candidate != "" && target != t.Slots.Candidate && target != t.Slots.Active {
		return &ConflictError{fmt.Sprintf("transaction %s switches between slots %s and %s, not to %s", t.ID, t.Slots.Active, t.Slots.Candidate, target)}
	}
	return nil
}
