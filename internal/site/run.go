package site

import "github.com/kubectl-bundle/kubectl-bundle/internal/journal"

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
