package slot

import (
	"slices"

	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// Recorder records an event in the journal's history.
type Recorder interface {
	Record(journal.Event) error
}

// RecordMove records that an S3 pivot moved the Cluster API objects of
// workload clusters from slot from to slot to: from then on slot to's
// providers manage their containers, so slot to's destroy removes them and
// its losses list them, and slot from's destroy leaves them running (on
// the kind provider it would otherwise remove every container of its
// workload-cluster names, the moved ones too). A move back undoes a move
// (MovedIn of the slot they leave, MovedOut of the slot they return to).
// Each record is saved, then its identity is recorded in the history (h,
// when not nil), so that a lost or damaged record keeps the move. A slot
// without a readable record is skipped.
func RecordMove(d *state.Dir, h Recorder, from, to string, clusters []string) error {
	if len(clusters) == 0 {
		return nil
	}
	for _, side := range []struct {
		name string
		in   bool
	}{{to, true}, {from, false}} {
		rec, err := Load(d, side.name)
		if err != nil {
			continue
		}
		for _, c := range clusters {
			if side.in {
				rec.MovedOut, rec.MovedIn = moveName(rec.MovedOut, rec.MovedIn, c)
			} else {
				rec.MovedIn, rec.MovedOut = moveName(rec.MovedIn, rec.MovedOut, c)
			}
		}
		if err := Save(d, rec); err != nil {
			return err
		}
		if h != nil {
			if err := h.Record(IdentityEvent(rec, record.DetailMoved, journal.StatusDone)); err != nil {
				return err
			}
		}
	}
	return nil
}

// moveName takes c out of back when it is there (a move undone), else
// adds it to forth.
func moveName(back, forth []string, c string) ([]string, []string) {
	if i := slices.Index(back, c); i >= 0 {
		return slices.Delete(back, i, i+1), forth
	}
	if !slices.Contains(forth, c) {
		forth = append(forth, c)
	}
	return back, forth
}
