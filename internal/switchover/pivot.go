package switchover

import (
	"context"
	"errors"
	"fmt"

	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/pivot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
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
	// Checked here too, with the other preconditions, before the switch
	// writes its intent.
	if err := s.canPivot(previous, target); err != nil {
		return nil, err
	}
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
// could not undo. during is the switch's phase (record.PhaseSwitching for to,
// record.PhaseSwitchingBack for back): a pivot undone after a failure names the
// way on from it.
func (s *Switcher) pivotObjects(ctx context.Context, from, to, during string, yes bool) error {
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
	if err := s.canPivot(from, to); err != nil {
		return err
	}
	res, err := s.Pivot(ctx, pivot.Options{From: fe, To: te, RecordPath: s.pivotPath(), Yes: yes, Log: s.Log,
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
	if undone := (*pivot.UndoneError)(nil); errors.As(err, &undone) {
		// Nothing was switched: the pointer and the aliases are still
		// on from, which manages the workload clusters.
		if during == record.PhaseSwitchingBack {
			undone.Next = fmt.Sprintf("slot %s stays active and keeps the workload clusters; once slot %s takes the objects, switch back again: %s", from, to, s.Dir.Plugin("switch", "back"))
		} else {
			undone.Next = fmt.Sprintf("the switch to slot %s did not happen and slot %s stays active. Once slot %s takes the objects, finish it: %s; or stay on slot %s: %s (during a blue-green update: %s)",
				to, from, to, s.Dir.Plugin("switch", "to", to), from, s.Dir.Plugin("switch", "back"),
				advice.Program(journal.ScriptPath(journal.BlueGreen), "revert").WithEnv(s.Dir.CommandEnv()))
		}
	}
	if err != nil {
		return err
	}
	s.pivoted = res
	// The moved clusters' containers are slot to's now: slot from's
	// destroy (the retire after accept) must leave them running, and slot
	// to's removes them (docs/experiments.md, experiment (d)).
	var h slot.Recorder
	if s.Journal != nil {
		h = s.Journal
	}
	return slot.RecordMove(s.Dir, h, from, to, res.Clusters)
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

// canPivot refuses a pivot in a binary that does not link the mover
// (Switcher.Pivot nil: every plugin but switch).
func (s *Switcher) canPivot(from, to string) error {
	if s.Pivot == nil {
		return &ConflictError{fmt.Sprintf("moving the workload clusters from slot %s to slot %s (switch mode pivot) is done by the switch plugin: run %s", from, to, s.Dir.Plugin("switch", "to", to))}
	}
	return nil
}
