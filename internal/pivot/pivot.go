// Package pivot is what a pivot (S3) records and checks: the record of
// each phase, so that a re-run after a crash resumes or undoes the move and
// says which, the preflight, and the recovery. The move itself, with
// clusterctl's mover, is internal/pivot/mover: only the switch plugin links
// it, because Cluster API's packages cost every plugin process that links
// them about half of its start-up (their package initialisation).
package pivot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"io"
	"io/fs"
	"path/filepath"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
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

// RequestTimeout limits each request to a management cluster, as
// clusterctl's proxy does (30 s). The tests raise it: their API servers
// share two cores with the whole suite, and one stalled past 30 s at a
// load average of 40.
var RequestTimeout = 30 * time.Second

// Client reaches the endpoint's API server as clusterctl's proxy does (the
// kubeconfig's context, RequestTimeout, QPS 20, burst 100), with a scheme that
// holds what the preflight and a recovery read typed (CRDs, clusterctl's
// inventory); every other object is read unstructured.
func (e Endpoint) Client(ctx context.Context) (client.Client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = e.Kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: e.Context, Timeout: RequestTimeout.String()}).ClientConfig()
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 20, 100
	return client.New(cfg, client.Options{Scheme: scheme()})
}

// scheme is built on first use, not at start-up: every plugin links this
// package, and only a pivot needs it (half a megabyte of allocations).
var scheme = sync.OnceValue(func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(clusterctlv1.AddToScheme(s))
	return s
})

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
	// Clusters are the names of the Clusters moved (their workload
	// clusters' containers are the target's to manage from now on).
	Clusters []string `json:"clusters,omitempty"`
}

// ClusterNames are the names of the Clusters in refs.
func ClusterNames(refs []ObjectRef) []string {
	var out []string
	for _, r := range refs {
		out = append(out, r.Name)
	}
	return out
}

// Logf writes a line to the pivot's log.
func (o *Options) Logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

// Emit tells the Event hook a phase's status.
func (o *Options) Emit(phase, status, detail string) {
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
			Fix: advice.Do(advice.Plugin("switch", "status").WithEnv(state.CommandEnvOf(filepath.Dir(path)))).
				Because("then compare both slots' Cluster objects (kubectl get clusters -A) before removing " + path)}
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

// SaveRecord writes the pivot record (atomically, as every state file).
func SaveRecord(path string, r *Record) error {
	r.APIVersion, r.Kind, r.Updated = "kubectl-bundle/v1", "Pivot", time.Now().UTC()
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return state.WriteFile(path, append(data, '\n'))
}

// Interrupted reports whether the record is a pivot that did not finish.
func (r *Record) Interrupted() bool { return r != nil && r.Phase != PhaseDone }

// Recover brings an interrupted pivot to a state with every object on
// one side, unpaused: forward when the source's deletes had begun (the
// target holds everything), back otherwise.
func Recover(ctx context.Context, o *Options, rec *Record) (string, string, error) {
	fromC, err := rec.From.Client(ctx)
	if err != nil {
		return "", "", fmt.Errorf("reaching slot %s to recover the interrupted pivot: %w", rec.From.Slot, err)
	}
	toC, err := rec.To.Client(ctx)
	if err != nil {
		return "", "", fmt.Errorf("reaching slot %s to recover the interrupted pivot: %w", rec.To.Slot, err)
	}
	switch rec.Phase {
	case PhaseDeleting, PhaseUnpausing:
		phase := rec.Phase
		o.Emit(rec.Phase, "resumed", fmt.Sprintf("pivot from slot %s to slot %s", rec.From.Slot, rec.To.Slot))
		n, err := deleteAll(ctx, fromC, rec.Objects)
		if err != nil {
			return "", "", fmt.Errorf("resuming the pivot interrupted in %s: deleting the moved objects from slot %s: %w; slot %s holds every object (its clusters paused until the move finishes): once slot %s takes the deletes, re-run the same command",
				phase, rec.From.Slot, err, rec.To.Slot, rec.From.Slot)
		}
		if err := setPaused(ctx, toC, rec.Clusters, false); err != nil {
			return "", "", fmt.Errorf("resuming the pivot interrupted in %s: unpausing the clusters on slot %s: %w; once slot %s takes the patch, re-run the same command",
				phase, rec.To.Slot, err, rec.To.Slot)
		}
		rec.Phase = PhaseDone
		if err := SaveRecord(o.RecordPath, rec); err != nil {
			return "", "", err
		}
		o.Emit(PhaseDone, "done", "resumed")
		return "resumed", fmt.Sprintf("resumed the pivot from slot %s to slot %s interrupted in %s: deleted the %d objects left on slot %s and unpaused %d clusters on slot %s",
			rec.From.Slot, rec.To.Slot, phase, n, rec.From.Slot, len(rec.Clusters), rec.To.Slot), nil
	}
	phase := rec.Phase
	n, err := Undo(ctx, o, rec, fromC, toC)
	if err != nil {
		return "", "", err
	}
	return "unpaused", fmt.Sprintf("the pivot from slot %s to slot %s was interrupted in %s, before any object left slot %s: removed the %d partial copies from slot %s and unpaused %d clusters on slot %s",
		rec.From.Slot, rec.To.Slot, phase, rec.From.Slot, n, rec.To.Slot, len(rec.Clusters), rec.From.Slot), nil
}

// Undo takes back a pivot that no object had left the source of yet: the
// partial copy is removed from the target, then the source's clusters
// are unpaused, and the record says DONE. It returns how many copies it
// removed.
func Undo(ctx context.Context, o *Options, rec *Record, fromC, toC client.Client) (int, error) {
	o.Emit(rec.Phase, "undone", fmt.Sprintf("pivot from slot %s to slot %s", rec.From.Slot, rec.To.Slot))
	n, err := deleteAll(ctx, toC, rec.Objects)
	if err != nil {
		return n, fmt.Errorf("undoing the pivot: deleting the partial copy from slot %s: %w", rec.To.Slot, err)
	}
	if err := setPaused(ctx, fromC, rec.Clusters, false); err != nil {
		return n, fmt.Errorf("undoing the pivot: unpausing the clusters on slot %s: %w", rec.From.Slot, err)
	}
	rec.Phase, rec.Objects = PhaseDone, nil
	if err := SaveRecord(o.RecordPath, rec); err != nil {
		return n, err
	}
	o.Emit(PhaseDone, "done", "unpaused")
	return n, nil
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

// UndoneError is a pivot whose move failed before any object left the
// source, undone at once: the partial copy removed from the target and
// the source's clusters unpaused. The switch it was part of did not
// happen.
type UndoneError struct {
	From, To, Phase  string
	Copies, Clusters int
	Err              error
	// Next is what to do now, said by the command the pivot was part of
	// ("" : re-run it once the target takes the objects).
	Next string
}

func (e *UndoneError) Error() string {
	next := e.Next
	if next == "" {
		next = fmt.Sprintf("once slot %s takes the objects, re-run the same command", e.To)
	}
	return fmt.Sprintf("moving the Cluster API objects from slot %s to slot %s failed in %s: %v. The pivot was undone: no object left slot %s, which still manages the workload clusters (%d unpaused), and the partial copy (%d objects) was removed from slot %s: %s",
		e.From, e.To, e.Phase, e.Err, e.From, e.Clusters, e.Copies, e.To, next)
}

func (e *UndoneError) Unwrap() error { return e.Err }

// ErrorKind: the target (or the source) refused what the move needs.
func (e *UndoneError) ErrorKind() errkind.Kind { return errkind.Environment }

// NotRevertibleError is a pivot that could not be moved back, asked
// without --yes.
type NotRevertibleError struct{ Plan *Plan }

func (e *NotRevertibleError) Error() string {
	return fmt.Sprintf("the pivot from slot %s to slot %s could not be reverted: slot %s does not serve %s, which slot %s would hand back; pass --yes to pivot anyway (a revert during the soak would then be refused)",
		e.Plan.From, e.Plan.To, e.Plan.From, joinTypes(e.Plan.MissingOnSource), e.Plan.To)
}

// ErrorKind: usage (the operator must say --yes).
func (e *NotRevertibleError) ErrorKind() errkind.Kind { return errkind.Usage }
