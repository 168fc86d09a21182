package mover

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/cluster"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/kubectl-bundle/kubectl-bundle/internal/pivot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// watcher records the mover's phases from the requests it sends: the
// mover is one call, and its phases show only in what it asks of each
// cluster (a Cluster's spec.paused patched, a create on the target, a
// delete on the source). Each is recorded before the request is sent.
type watcher struct {
	mu      sync.Mutex
	o       *pivot.Options
	rec     *pivot.Record
	creates int
	deletes int
}

func (w *watcher) phase(p string) error {
	if w.rec.Phase == p {
		return nil
	}
	prev := w.rec.Phase
	w.rec.Phase = p
	if err := pivot.SaveRecord(w.o.RecordPath, w.rec); err != nil {
		return err
	}
	w.o.Emit(prev, "done", "")
	if p != pivot.PhaseDone {
		w.o.Emit(p, "started", "")
	}
	return nil
}

func refOf(c client.Client, obj client.Object) (pivot.ObjectRef, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Empty() {
		var err error
		if gvk, err = apiutil.GVKForObject(obj, c.Scheme()); err != nil {
			return pivot.ObjectRef{}, err
		}
	}
	return pivot.ObjectRef{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}, nil
}

var clusterGK = schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "Cluster"}

func isCluster(ref pivot.ObjectRef) bool {
	gv, _ := schema.ParseGroupVersion(ref.APIVersion)
	return gv.Group == clusterGK.Group && ref.Kind == clusterGK.Kind
}

// watchedProxy hands the mover clients that report to the watcher.
type watchedProxy struct {
	cluster.Proxy
	w      *watcher
	source bool
}

func (p *watchedProxy) NewClient(ctx context.Context) (client.Client, error) {
	c, err := p.Proxy.NewClient(ctx)
	if err != nil {
		return nil, err
	}
	return &watchedClient{Client: c, w: p.w, source: p.source}, nil
}

type watchedClient struct {
	client.Client
	w      *watcher
	source bool
}

func (c *watchedClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	ref, err := refOf(c.Client, obj)
	if err != nil {
		return err
	}
	if isCluster(ref) {
		data, _ := patch.Data(obj)
		if err := c.w.clusterPatch(ref, c.source, string(data)); err != nil {
			return err
		}
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *watchedClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if c.source {
		return c.Client.Create(ctx, obj, opts...)
	}
	ref, err := refOf(c.Client, obj)
	if err != nil {
		return err
	}
	if err := c.w.create(ref); err != nil {
		return err
	}
	return c.Client.Create(ctx, obj, opts...)
}

func (c *watchedClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if !c.source {
		return c.Client.Delete(ctx, obj, opts...)
	}
	if err := c.w.delete(); err != nil {
		return err
	}
	return c.Client.Delete(ctx, obj, opts...)
}

// clusterPatch sees the mover pause a Cluster on the source or unpause it
// on the target.
func (w *watcher) clusterPatch(ref pivot.ObjectRef, source bool, data string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case source && data == `{"spec":{"paused":true}}`:
		w.rec.Clusters = append(w.rec.Clusters, ref)
		if err := pivot.SaveRecord(w.o.RecordPath, w.rec); err != nil {
			return err
		}
		state.CrashPoint(fmt.Sprintf("pivot:pause:%d", len(w.rec.Clusters)))
	case !source && data == `{"spec":{"paused":null}}`:
		if err := w.phase(pivot.PhaseUnpausing); err != nil {
			return err
		}
		state.CrashPoint("pivot:unpause")
	}
	return nil
}

func (w *watcher) create(ref pivot.ObjectRef) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rec.Phase == pivot.PhaseDeleting || w.rec.Phase == pivot.PhaseUnpausing {
		return errors.New("the mover created an object on the target after it began deleting on the source")
	}
	w.rec.Phase = pivot.PhaseCopying
	if slices.Contains(w.rec.Objects, ref) {
		return nil // the mover retrying a create
	}
	w.rec.Objects = append(w.rec.Objects, ref)
	if w.creates == 0 {
		w.o.Emit(pivot.PhasePausing, "done", "")
		w.o.Emit(pivot.PhaseCopying, "started", "")
	}
	if err := pivot.SaveRecord(w.o.RecordPath, w.rec); err != nil {
		return err
	}
	w.creates++
	state.CrashPoint(fmt.Sprintf("pivot:copy:%d", w.creates))
	return nil
}

func (w *watcher) delete() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.phase(pivot.PhaseDeleting); err != nil {
		return err
	}
	w.deletes++
	state.CrashPoint(fmt.Sprintf("pivot:delete:%d", w.deletes))
	return nil
}
