package switchover

import (
	"fmt"

	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
)

// transaction reads the open transaction once for a switch (nil when none
// is open or the switch runs without a journal).
func (s *Switcher) transaction() (*journal.Transaction, error) {
	if s.Journal == nil {
		return nil, nil
	}
	return s.Journal.Load()
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
// transaction t is running, or to a slot that is not its candidate.
func checkTransaction(t *journal.Transaction, target string, allowed ...journal.Phase) error {
	if t == nil {
		return nil
	}
	if t.Status == journal.StatusStarted {
		ok := false
		for _, p := range allowed {
			ok = ok || t.Phase == p
		}
		if !ok {
			return &ConflictError{fmt.Sprintf("transaction %s is in step %s (started): switching now would race it; let it finish, or see kubectl bundle-journal status", t.ID, t.Phase)}
		}
	}
	if t.Strategy == journal.BlueGreen && target != "" && t.Slots.Candidate != "" && target != t.Slots.Candidate && target != t.Slots.Active {
		return &ConflictError{fmt.Sprintf("transaction %s switches between slots %s and %s, not to %s", t.ID, t.Slots.Active, t.Slots.Candidate, target)}
	}
	return nil
}
