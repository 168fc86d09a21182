// Package pivot moves the Cluster API objects of the workload clusters
// from one slot's management cluster to another's with clusterctl's mover
// (S3), recording each phase so that a re-run after a crash resumes or
// undoes the move, and says which.
package pivot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/cluster"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/config"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// Phases of a pivot, in the order the mover runs them. A crash before
// Deleting leaves every object on the source: the re-run undoes the copy
// and unpauses the source. From Deleting on, the target holds every
// object: the re-run finishes the deletes and unpauses the target.
const (
	PhasePausing   = "PAUSING"
	PhaseCopying   = "COPYING"
	PhaseDeleting  = "DELETING"
	PhaseUnpausing = "UNPAUSING"
	PhaseDone      = "DONE"
)

// Endpoint is one slot's management cluster.
type Endpoint struct {
	Slot       string `json:"slot"`
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Context    string `json:"context"`
}

func (e Endpoint) proxy() cluster.Proxy {
	return cluster.NewProxy(cluster.Kubeconfig{Path: e.Kubeconfig, Context: e.Context})
}

// ObjectRef names one object the pivot created on the target.
type ObjectRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

func (o ObjectRef) String() string { return fmt.Sprintf("%s %s/%s", o.Kind, o.Namespace, o.Name) }

// Record is the pivot's file in the state dir: the phase reached and what
// a re-run needs to resume or undo it.
type Record struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	From       Endpoint `json:"from"`
	To         Endpoint `json:"to"`
	Namespace  string   `json:"namespace,omitempty"`
	Phase      string   `json:"phase"`
	// Clusters are the source's Clusters the mover paused.
	Clusters []ObjectRef `json:"clusters,omitempty"`
	// Objects are the objects created on the target, in creation order
	// (owners first); each is written here before its create is sent.
	Objects []ObjectRef `json:"objects,omitempty"`
	Started time.Time   `json:"started"`
	Updated time.Time   `json:"updated"`
}

// File is the pivot record's name in the state dir.
const File = "pivot.json"

// Options configure a pivot.
type Options struct {
	From, To Endpoint
	// Namespace limits the move to one namespace ("" : all).
	Namespace string
	// RecordPath is where the pivot record is kept (<state>/pivot.json).
	RecordPath string
	// Yes accepts a pivot that cannot be moved back.
	Yes bool
	// Event is told each phase as it starts and ends (the journal's history).
	Event func(phase, status, detail string) `json:"-"`
	Log   io.Writer                          `json:"-"`
}

// Result says what Run did.
type Result struct {
	// Recovered is what the run did with an interrupted pivot first:
	// "resumed" (finished on the target) or "unpaused" (undone, the source
	// unpaused), "" when there was none.
	Recovered string `json:"recovered,omitempty"`
	// RecoveredNote says it in a sentence.
	RecoveredNote string `json:"recoveredNote,omitempty"`
	Plan          *Plan  `json:"plan"`
	Moved         int    `json:"moved"`
}

func (o *Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

func (o *Options) event(phase, status, detail string) {
	if o.Event != nil {
		o.Event(phase, status, detail)
	}
}

// LoadRecord reads the pivot record (nil when there is none); an
// unreadable one is damage.
func LoadRecord(path string) (*Record, error) {
	data, err := state.ReadSmall(path, 16<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	damage := func(problem string) error {
		return &state.DamageError{Path: path, Problem: problem,
			Fix: "kubectl bundle-switch status   # then compare both slots' Cluster objects (kubectl get clusters -A) before removing " + path}
	}
	if err != nil {
		return nil, damage(err.Error())
	}
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, damage(err.Error())
	}
	switch r.Phase {
	case PhasePausing, PhaseCopying, PhaseDeleting, PhaseUnpausing, PhaseDone:
	default:
		return nil, damage(fmt.Sprintf("unknown phase %q", r.Phase))
	}
	return &r, nil
}

func saveRecord(path string, r *Record) error {
	r.APIVersion, r.Kind, r.Updated = "kubectl-bundle/v1", "Pivot", time.Now().UTC()
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return state.WriteFile(path, append(data, '\n'))
}

// Interrupted reports whether the record is a pivot that did not finish.
func (r *Record) Interrupted() bool { return r != nil && r.Phase != PhaseDone }

// Run moves the Cluster API objects from o.From to o.To. An interrupted
// pivot in the record is first resumed (its deletes had begun) or undone
// (they had not); then the preflight must pass (exit 3 naming what o.To
// does not serve) and, when o.From would not serve what o.To hands back,
// o.Yes must be set; then the mover runs, each phase recorded.
func Run(ctx context.Context, o Options) (*Result, error) {
	res := &Result{}
	rec, err := LoadRecord(o.RecordPath)
	if err != nil {
		return nil, err
	}
	if rec.Interrupted() {
		if res.Recovered, res.RecoveredNote, err = recoverRecord(ctx, &o, rec); err != nil {
			return nil, err
		}
		o.logf("%s", res.RecoveredNote)
		if res.Recovered == "resumed" && rec.From == o.From && rec.To == o.To {
			res.Moved = len(rec.Objects)
			res.Plan = &Plan{Revertible: true}
			return res, nil
		}
	}
	plan, err := Preflight(ctx, o.From, o.To, o.Namespace)
	if err != nil {
		return nil, err
	}
	res.Plan = plan
	if err := plan.Check(o.Yes); err != nil {
		return nil, err
	}
	o.logf("%s", plan.Summary())
	n, err := move(ctx, &o)
	res.Moved = n
	return res, err
}

// move runs clusterctl's mover between the two endpoints, recording each
// phase as the mover reaches it (seen from the requests it sends).
func move(ctx context.Context, o *Options) (int, error) {
	cfg, err := config.New(ctx, "", config.InjectReader(emptyReader{}))
	if err != nil {
		return 0, fmt.Errorf("preparing clusterctl's configuration: %w", err)
	}
	rec := &Record{From: o.From, To: o.To, Namespace: o.Namespace, Phase: PhasePausing, Started: time.Now().UTC()}
	w := &watcher{o: o, rec: rec}
	from := cluster.New(cluster.Kubeconfig{Path: o.From.Kubeconfig, Context: o.From.Context}, cfg,
		cluster.InjectProxy(&watchedProxy{Proxy: o.From.proxy(), w: w, source: true}))
	to := cluster.New(cluster.Kubeconfig{Path: o.To.Kubeconfig, Context: o.To.Context}, cfg,
		cluster.InjectProxy(&watchedProxy{Proxy: o.To.proxy(), w: w}))
	if err := saveRecord(o.RecordPath, rec); err != nil {
		return 0, err
	}
	o.event(PhasePausing, "started", fmt.Sprintf("pivot from slot %s to slot %s", o.From.Slot, o.To.Slot))
	if err := from.ObjectMover().Move(ctx, o.Namespace, to, false); err != nil {
		o.event(rec.Phase, "failed", err.Error())
		return len(rec.Objects), fmt.Errorf("moving the Cluster API objects from slot %s to slot %s (phase %s): %w; re-run the same command: it resumes or undoes the move",
			o.From.Slot, o.To.Slot, rec.Phase, err)
	}
	state.CrashPoint("pivot:before-done")
	if err := w.phase(PhaseDone); err != nil {
		return len(rec.Objects), err
	}
	o.logf("moved %d objects (%d clusters) from slot %s to slot %s; their clusters are unpaused on slot %s",
		len(rec.Objects), len(rec.Clusters), o.From.Slot, o.To.Slot, o.To.Slot)
	return len(rec.Objects), nil
}

// recoverRecord brings an interrupted pivot to a state with every object on
// one side, unpaused: forward when the source's deletes had begun (the
// target holds everything), back otherwise.
func recoverRecord(ctx context.Context, o *Options, rec *Record) (string, string, error) {
	fromC, err := rec.From.proxy().NewClient(ctx)
	if err != nil {
		return "", "", fmt.Errorf("reaching slot %s to recover the interrupted pivot: %w", rec.From.Slot, err)
	}
	toC, err := rec.To.proxy().NewClient(ctx)
	if err != nil {
		return "", "", fmt.Errorf("reaching slot %s to recover the interrupted pivot: %w", rec.To.Slot, err)
	}
	switch rec.Phase {
	case PhaseDeleting, PhaseUnpausing:
		phase := rec.Phase
		o.event(rec.Phase, "resumed", fmt.Sprintf("pivot from slot %s to slot %s", rec.From.Slot, rec.To.Slot))
		n, err := deleteAll(ctx, fromC, rec.Objects)
		if err != nil {
			return "", "", fmt.Errorf("resuming the pivot: deleting the moved objects from slot %s: %w", rec.From.Slot, err)
		}
		if err := setPaused(ctx, toC, rec.Clusters, false); err != nil {
			return "", "", fmt.Errorf("resuming the pivot: unpausing the clusters on slot %s: %w", rec.To.Slot, err)
		}
		rec.Phase = PhaseDone
		if err := saveRecord(o.RecordPath, rec); err != nil {
			return "", "", err
		}
		o.event(PhaseDone, "done", "resumed")
		return "resumed", fmt.Sprintf("resumed the pivot from slot %s to slot %s interrupted in %s: deleted the %d objects left on slot %s and unpaused %d clusters on slot %s",
			rec.From.Slot, rec.To.Slot, phase, n, rec.From.Slot, len(rec.Clusters), rec.To.Slot), nil
	}
	o.event(rec.Phase, "undone", fmt.Sprintf("pivot from slot %s to slot %s", rec.From.Slot, rec.To.Slot))
	n, err := deleteAll(ctx, toC, rec.Objects)
	if err != nil {
		return "", "", fmt.Errorf("undoing the interrupted pivot: deleting the partial copy from slot %s: %w", rec.To.Slot, err)
	}
	if err := setPaused(ctx, fromC, rec.Clusters, false); err != nil {
		return "", "", fmt.Errorf("undoing the interrupted pivot: unpausing the clusters on slot %s: %w", rec.From.Slot, err)
	}
	phase := rec.Phase
	rec.Phase, rec.Objects = PhaseDone, nil
	if err := saveRecord(o.RecordPath, rec); err != nil {
		return "", "", err
	}
	o.event(PhaseDone, "done", "unpaused")
	return "unpaused", fmt.Sprintf("the pivot from slot %s to slot %s was interrupted in %s, before any object left slot %s: removed the %d partial copies from slot %s and unpaused %d clusters on slot %s",
		rec.From.Slot, rec.To.Slot, phase, rec.From.Slot, n, rec.To.Slot, len(rec.Clusters), rec.From.Slot), nil
}

// deleteAll removes objects as clusterctl's mover removes the source's,
// leaves first: annotated delete-for-move (so that the providers keep the
// infrastructure), deleted, finalizers dropped. Cluster-wide objects are
// kept, as the mover keeps them. It returns how many it found.
func deleteAll(ctx context.Context, c client.Client, objs []ObjectRef) (int, error) {
	n := 0
	for i := len(objs) - 1; i >= 0; i-- {
		ref := objs[i]
		if ref.Namespace == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(ref.APIVersion)
		u.SetKind(ref.Kind)
		if err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, u); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return n, fmt.Errorf("reading %s: %w", ref, err)
		}
		n++
		ann := map[string]any{"metadata": map[string]any{"annotations": map[string]any{clusterctlv1.DeleteForMoveAnnotation: ""}}}
		if err := c.Patch(ctx, u, mergePatch(ann)); err != nil && !apierrors.IsNotFound(err) {
			return n, fmt.Errorf("annotating %s: %w", ref, err)
		}
		if err := c.Delete(ctx, u); err != nil && !apierrors.IsNotFound(err) {
			return n, fmt.Errorf("deleting %s: %w", ref, err)
		}
		if len(u.GetFinalizers()) > 0 {
			if err := c.Patch(ctx, u, mergePatch(map[string]any{"metadata": map[string]any{"finalizers": nil}})); err != nil && !apierrors.IsNotFound(err) {
				return n, fmt.Errorf("removing the finalizers of %s: %w", ref, err)
			}
		}
	}
	return n, nil
}

// setPaused sets or clears spec.paused on clusters, as the mover does.
func setPaused(ctx context.Context, c client.Client, clusters []ObjectRef, paused bool) error {
	var v any
	if paused {
		v = true
	}
	for _, ref := range clusters {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(ref.APIVersion)
		u.SetKind(ref.Kind)
		u.SetNamespace(ref.Namespace)
		u.SetName(ref.Name)
		if err := c.Patch(ctx, u, mergePatch(map[string]any{"spec": map[string]any{"paused": v}})); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("setting spec.paused=%t on %s: %w", paused, ref, err)
		}
	}
	return nil
}

func mergePatch(v any) client.Patch {
	data, _ := json.Marshal(v)
	return client.RawPatch(types.MergePatchType, data)
}

// NotRevertibleError is a pivot that could not be moved back, asked
// without --yes.
type NotRevertibleError struct{ Plan *Plan }

func (e *NotRevertibleError) Error() string {
	return fmt.Sprintf("the pivot from slot %s to slot %s could not be reverted: slot %s does not serve %s, which slot %s would hand back; pass --yes to pivot anyway (a revert during the soak would then be refused)",
		e.Plan.From, e.Plan.To, e.Plan.From, joinTypes(e.Plan.MissingOnSource), e.Plan.To)
}

// ErrorKind: usage (the operator must say --yes).
func (e *NotRevertibleError) ErrorKind() errkind.Kind { return errkind.Usage }

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
