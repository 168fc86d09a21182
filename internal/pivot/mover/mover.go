// Package mover moves the Cluster API objects of the workload clusters
// from one slot's management cluster to another's with clusterctl's mover
// (S3), recording each phase in internal/pivot's record so that a re-run
// after a crash resumes or undoes the move, and says which. Only the
// switch plugin links it: Cluster API's packages double a plugin
// process's start-up.
package mover

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/cluster"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/config"

	"github.com/kubectl-bundle/kubectl-bundle/internal/pivot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

func proxy(e pivot.Endpoint) cluster.Proxy {
	return cluster.NewProxy(cluster.Kubeconfig{Path: e.Kubeconfig, Context: e.Context})
}

// Run moves the Cluster API objects from o.From to o.To. An interrupted
// pivot in the record is first resumed (its deletes had begun) or undone
// (they had not); then the preflight must pass (exit 3 naming what o.To
// does not serve) and, when o.From would not serve what o.To hands back,
// o.Yes must be set; then the mover runs, each phase recorded.
func Run(ctx context.Context, o pivot.Options) (*pivot.Result, error) {
	res := &pivot.Result{}
	rec, err := pivot.LoadRecord(o.RecordPath)
	if err != nil {
		return nil, err
	}
	if rec.Interrupted() {
		if res.Recovered, res.RecoveredNote, err = pivot.Recover(ctx, &o, rec); err != nil {
			return nil, err
		}
		o.Logf("%s", res.RecoveredNote)
		if res.Recovered == "resumed" && rec.From == o.From && rec.To == o.To {
			res.Moved = len(rec.Objects)
			res.Clusters = pivot.ClusterNames(rec.Clusters)
			res.Plan = &pivot.Plan{Revertible: true}
			return res, nil
		}
	}
	plan, err := pivot.Preflight(ctx, o.From, o.To, o.Namespace)
	if err != nil {
		return nil, err
	}
	res.Plan = plan
	if err := plan.Check(o.Yes); err != nil {
		return nil, err
	}
	o.Logf("%s", plan.Summary())
	n, clusters, err := move(ctx, &o)
	res.Moved, res.Clusters = n, clusters
	return res, err
}

// move runs clusterctl's mover between the two endpoints, recording each
// phase as the mover reaches it (seen from the requests it sends).
func move(ctx context.Context, o *pivot.Options) (int, []string, error) {
	cfg, err := config.New(ctx, "", config.InjectReader(emptyReader{}))
	if err != nil {
		return 0, nil, fmt.Errorf("preparing clusterctl's configuration: %w", err)
	}
	rec := &pivot.Record{From: o.From, To: o.To, Namespace: o.Namespace, Phase: pivot.PhasePausing, Started: time.Now().UTC()}
	w := &watcher{o: o, rec: rec}
	from := cluster.New(cluster.Kubeconfig{Path: o.From.Kubeconfig, Context: o.From.Context}, cfg,
		cluster.InjectProxy(&watchedProxy{Proxy: proxy(o.From), w: w, source: true}))
	to := cluster.New(cluster.Kubeconfig{Path: o.To.Kubeconfig, Context: o.To.Context}, cfg,
		cluster.InjectProxy(&watchedProxy{Proxy: proxy(o.To), w: w}))
	if err := pivot.SaveRecord(o.RecordPath, rec); err != nil {
		return 0, nil, err
	}
	o.Emit(pivot.PhasePausing, "started", fmt.Sprintf("pivot from slot %s to slot %s", o.From.Slot, o.To.Slot))
	if err := from.ObjectMover().Move(ctx, o.Namespace, to, false); err != nil {
		o.Emit(rec.Phase, "failed", err.Error())
		if rec.Phase == pivot.PhasePausing || rec.Phase == pivot.PhaseCopying {
			// Nothing left the source: undo now, so that the failure
			// leaves the source managing its clusters, unpaused, and not
			// only once a re-run (which may fail the same way) undoes it.
			phase := rec.Phase
			copies, uerr := undoNow(ctx, o, rec)
			if uerr != nil {
				return 0, nil, fmt.Errorf("moving the Cluster API objects from slot %s to slot %s (phase %s): %w; undoing it failed too (%v): slot %s's clusters stay paused until a re-run of the same command undoes the move",
					o.From.Slot, o.To.Slot, phase, err, uerr, o.From.Slot)
			}
			return 0, nil, &pivot.UndoneError{From: o.From.Slot, To: o.To.Slot, Phase: phase, Copies: copies, Clusters: len(rec.Clusters), Err: err}
		}
		// From DELETING on the target holds every object: only forward.
		waits := fmt.Sprintf("once slot %s takes the deletes", o.From.Slot)
		if rec.Phase == pivot.PhaseUnpausing {
			waits = fmt.Sprintf("once slot %s takes the unpause", o.To.Slot)
		}
		return len(rec.Objects), pivot.ClusterNames(rec.Clusters), fmt.Errorf("moving the Cluster API objects from slot %s to slot %s (phase %s): %w; slot %s holds every object: re-run the same command, %s, to finish the move",
			o.From.Slot, o.To.Slot, rec.Phase, err, o.To.Slot, waits)
	}
	state.CrashPoint("pivot:before-done")
	if err := w.phase(pivot.PhaseDone); err != nil {
		return len(rec.Objects), pivot.ClusterNames(rec.Clusters), err
	}
	o.Logf("moved %d objects (%d clusters) from slot %s to slot %s; their clusters are unpaused on slot %s",
		len(rec.Objects), len(rec.Clusters), o.From.Slot, o.To.Slot, o.To.Slot)
	return len(rec.Objects), pivot.ClusterNames(rec.Clusters), nil
}

// undoNow undoes the pivot of rec, which failed before any object left
// the source, with clients of its own (the mover's are done).
func undoNow(ctx context.Context, o *pivot.Options, rec *pivot.Record) (int, error) {
	fromC, err := proxy(rec.From).NewClient(ctx)
	if err != nil {
		return 0, fmt.Errorf("reaching slot %s: %w", rec.From.Slot, err)
	}
	toC, err := proxy(rec.To).NewClient(ctx)
	if err != nil {
		return 0, fmt.Errorf("reaching slot %s: %w", rec.To.Slot, err)
	}
	return pivot.Undo(ctx, o, rec, fromC, toC)
}

// emptyReader is clusterctl's configuration with nothing set: the mover
// needs no provider repositories, and an operator's clusterctl.yaml must
// not change what a pivot does.
type emptyReader struct{}

func (emptyReader) Init(context.Context, string) error { return nil }
func (emptyReader) Get(key string) (string, error) {
	return "", fmt.Errorf("clusterctl configuration %q is not set", key)
}
func (emptyReader) Set(string, string)             {}
func (emptyReader) UnmarshalKey(string, any) error { return nil }
