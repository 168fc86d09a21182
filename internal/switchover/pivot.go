package switchover

import (
	"context"
	"fmt"

	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/pivot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
)

func (s *Switcher) pivotPath() string { return s.Dir.Join(pivot.File) }

// endpoint is slot name's management cluster as its record reaches it.
func (s *Switcher) endpoint(name string) (pivot.Endpoint, error) {
	rec, err := slot.Load(s.Dir, name)
	if err != nil {
		return pivot.Endpoint{}, err
	}
	kc := rec.Kubeconfig
	if kc == "" {
		kc = s.Kubeconfig
	}
	return pivot.Endpoint{Slot: name, Kubeconfig: kc, Context: rec.Context}, nil
}

// PivotPlan is the pivot a switch from previous to target would do, for
// a preflight that changes nothing.
func (s *Switcher) PivotPlan(ctx context.Context, previous, target string) (*pivot.Plan, error) {
	from, err := s.endpoint(previous)
	if err != nil {
		return nil, err
	}
	to, err := s.endpoint(target)
	if err != nil {
		return nil, err
	}
	return pivot.Preflight(ctx, from, to, "")
}

// pivotObjects moves the Cluster API objects from slot from to slot to,
// each phase recorded in the history; yes accepts a pivot that a revert
// could not undo.
func (s *Switcher) pivotObjects(ctx context.Context, from, to string, yes bool) error {
	if from == "" {
		return &ConflictError{fmt.Sprintf("--mode pivot moves the workload clusters from the active slot to %s, and no slot is active", to)}
	}
	fe, err := s.endpoint(from)
	if err != nil {
		return err
	}
	te, err := s.endpoint(to)
	if err != nil {
		return err
	}
	res, err := pivot.Run(ctx, pivot.Options{From: fe, To: te, RecordPath: s.pivotPath(), Yes: yes, Log: s.Log,
		Event: func(phase, status, detail string) {
			if s.Journal == nil {
				return
			}
			d := fmt.Sprintf("pivot %s -> %s: %s", from, to, phase)
			if detail != "" {
				d += ": " + detail
			}
			_ = s.Journal.Record(journal.Event{Type: "pivot", Slot: to, Detail: d, Status: status})
		}})
	if err != nil {
		return err
	}
	s.pivoted = res
	return nil
}

// interruptedPivot reports whether the state dir holds a pivot that did
// not finish (a switch that re-runs must then pivot, whatever its mode).
func (s *Switcher) interruptedPivot() (bool, error) {
	r, err := pivot.LoadRecord(s.pivotPath())
	if err != nil {
		return false, err
	}
	return r.Interrupted(), nil
}
