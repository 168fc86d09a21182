package slot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
)

// Two slots can be one cluster (issue 32, class 2): with the existing
// provider, config.yaml may give slot b the context of slot a, or swap
// them, and a slot's context may be pointed at another cluster after
// create. A slot's cluster has an identity (ClusterID), recorded at
// create; preflight refuses a slot whose cluster is another slot's, and
// every deploy, switch and destroy checks that the slot still reaches the
// cluster its record names.

// clusterIDTimeout bounds the reads that identify a cluster.
const clusterIDTimeout = 10 * time.Second

// An Identifier answers, in place of the API server cfg names, with the
// identity of the cluster there (an error: no cluster answers): an
// in-process test's fake machine, as gate.WithReader answers a gate.
type Identifier func(ctx context.Context, cfg *rest.Config) (*ClusterID, error)

type identifierKey struct{}

// WithIdentifier returns ctx with id standing for every API server a
// command under it identifies or pings to identify a cluster (the
// existing provider's preflight and create, and the checks of deploy,
// switch and destroy): no server is contacted. Without it (production)
// the API server is read.
func WithIdentifier(ctx context.Context, id Identifier) context.Context {
	return context.WithValue(ctx, identifierKey{}, id)
}

// identifier is the Identifier ctx carries (nil: read the API server).
func identifier(ctx context.Context) Identifier {
	id, _ := ctx.Value(identifierKey{}).(Identifier)
	return id
}

// identify reads the identity of the cluster cfg reaches: its server and
// the UID of its kube-system namespace.
func identify(ctx context.Context, cfg *rest.Config) (*ClusterID, error) {
	if id := identifier(ctx); id != nil {
		return id(ctx, cfg)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = clusterIDTimeout
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, clusterIDTimeout)
	defer cancel()
	ns, err := cs.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the kube-system namespace of %s, which identifies the cluster: %w", cfg.Host, err)
	}
	return &ClusterID{Server: cfg.Host, KubeSystemUID: string(ns.UID)}, nil
}

// identifyContext is the identity of the cluster context reaches in
// kubeconfig ("": kubectl's rules).
func identifyContext(ctx context.Context, kubeconfig, kubeContext string) (*ClusterID, error) {
	cfg, err := restConfig(kubeconfig, kubeContext)
	if err != nil {
		return nil, err
	}
	return identify(ctx, cfg)
}

// reached lists, for rec's slot, each way its plugins reach its cluster
// (what zarf uses: the slot's own kubeconfig; what the gate and the switch
// use: the record's context) with the identity of the cluster it reaches
// now. Only the existing provider is identified this way.
func (m *Manager) reached(ctx context.Context, rec *Record) (map[string]*ClusterID, error) {
	if rec.Provider != ProviderExisting {
		return nil, nil
	}
	out := map[string]*ClusterID{}
	id, err := identifyContext(ctx, rec.Kubeconfig, rec.Context)
	if err != nil {
		return nil, fmt.Errorf("context %s: %w", rec.Context, err)
	}
	out["context "+rec.Context] = id
	own := KubeconfigPath(m.Dir, rec.Name)
	if _, serr := os.Stat(own); serr == nil {
		id, err := identifyContext(ctx, own, "")
		if err != nil {
			return nil, fmt.Errorf("the slot's kubeconfig %s: %w", own, err)
		}
		out["the slot's kubeconfig "+own] = id
	}
	return out, nil
}

// ClusterMovedError is a slot whose context no longer reaches the cluster
// its record names.
type ClusterMovedError struct {
	Slot, Via, What string
	Recorded, Now   *ClusterID
}

func (e *ClusterMovedError) Error() string {
	return fmt.Sprintf("refusing to %s slot %s: its record names the cluster %s, but %s now reaches %s, another cluster; nothing was changed. "+
		"Point the slot's context back at its cluster (kubectl config view --context %s; config.yaml's existing.%s.context), or, if slot %s is to be that other cluster, destroy it and create it again",
		e.What, e.Slot, e.Recorded, e.Via, e.Now, e.Slot, e.Slot, e.Slot)
}

// ErrorKind: the state does not allow the step (a slot preflight blocker's code).
func (e *ClusterMovedError) ErrorKind() errkind.Kind { return errkind.Environment }

// CheckCluster checks, before what (deploy into, switch to, destroy)
// changes slot rec, that the slot still reaches the cluster its record
// names. A record written before identities has none: the identity it
// reaches now is recorded, and said (the first check trusts the slot's
// context as create did). Only the existing provider's slots are checked.
func (m *Manager) CheckCluster(ctx context.Context, rec *Record, what string) error {
	now, err := m.reached(ctx, rec)
	if err != nil {
		return errkind.New(errkind.Environment, "refusing to %s slot %s: its cluster cannot be identified: %w; nothing was changed", what, rec.Name, err)
	}
	if len(now) == 0 {
		return nil
	}
	vias := make([]string, 0, len(now))
	for v := range now {
		vias = append(vias, v)
	}
	slices.Sort(vias)
	if rec.ClusterID == nil {
		first := now[vias[0]]
		for _, v := range vias[1:] {
			if !now[v].Same(first) {
				return &ClusterMovedError{Slot: rec.Name, Via: v, What: what, Recorded: first, Now: now[v]}
			}
		}
		if err := m.otherSlotIs(rec.Name, first, what); err != nil {
			return err
		}
		rec.ClusterID = first
		if err := Save(m.Dir, rec); err != nil {
			return err
		}
		m.logf("slot %s: its record named no cluster identity (written before kubectl-bundle recorded them): recorded the cluster it reaches now, %s; from now on every deploy, switch and destroy checks it", rec.Name, first)
		return nil
	}
	for _, v := range vias {
		if !now[v].Same(rec.ClusterID) {
			return &ClusterMovedError{Slot: rec.Name, Via: v, What: what, Recorded: rec.ClusterID, Now: now[v]}
		}
	}
	return nil
}

// SameClusterError is two slots that reach one cluster.
type SameClusterError struct {
	Slot, Other, What string
	ID                *ClusterID
}

func (e *SameClusterError) Error() string {
	return fmt.Sprintf("refusing to %s slot %s: it reaches %s, which is slot %s's cluster: two slots cannot be one cluster; nothing was changed. "+
		"Give slot %s a context of a cluster of its own in config.yaml (existing.%s.context)", e.What, e.Slot, e.ID, e.Other, e.Slot, e.Slot)
}

// ErrorKind: the state does not allow the step.
func (e *SameClusterError) ErrorKind() errkind.Kind { return errkind.Environment }

// otherSlotIs refuses when another slot's record names id as its cluster.
func (m *Manager) otherSlotIs(name string, id *ClusterID, what string) error {
	names, err := List(m.Dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if n == name {
			continue
		}
		o, err := Load(m.Dir, n)
		if err != nil || o.ClusterID == nil {
			continue
		}
		if o.ClusterID.Same(id) {
			return &SameClusterError{Slot: name, Other: n, What: what, ID: id}
		}
	}
	return nil
}

// otherClusters is, for preflight, the identity of every other slot's
// cluster: recorded in its record, else read through its record's
// context, whatever its provider (a record written before identities,
// or a kind slot, whose record names none: an existing slot given the
// context of a kind slot, or the alias that reaches it, is that
// cluster), else, for a slot config.yaml names that has no record yet,
// through its configured context. Slots that cannot be identified are
// left out.
func (m *Manager) otherClusters(ctx context.Context, name string) map[string]*ClusterID {
	out := map[string]*ClusterID{}
	names, _ := List(m.Dir)
	for _, n := range names {
		if n == name {
			continue
		}
		rec, err := Load(m.Dir, n)
		switch {
		case err != nil:
		case rec.ClusterID != nil:
			out[n] = rec.ClusterID
		case rec.Context != "":
			if id, err := identifyContext(ctx, rec.Kubeconfig, rec.Context); err == nil {
				out[n] = id
			}
		}
	}
	for n, es := range m.Config.Existing {
		if _, ok := out[n]; ok || n == name || es.Context == "" {
			continue
		}
		if _, err := Load(m.Dir, n); !errors.As(err, new(*NotFoundError)) {
			continue
		}
		if id, err := identifyContext(ctx, es.Kubeconfig, es.Context); err == nil {
			out[n] = id
		}
	}
	return out
}
