package gate

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
)

// Cluster is one API server the gate reads: the target cluster, or a
// workload cluster reached through a kubeconfig secret.
type Cluster struct {
	// Name labels the cluster in reports ("" for the target cluster).
	Name string
	// DefaultNamespace is used by checks that name no namespace
	// (kubectl's -n, else the context's namespace, else "default").
	DefaultNamespace string
	config           *rest.Config
	dyn              dynamic.Interface
	discovery        discovery.DiscoveryInterface
	mapper           meta.ResettableRESTMapper
}

// UnreachableError is a cluster the gate could not talk to at all.
type UnreachableError struct {
	Host string
	Err  error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cluster at %s is unreachable: %v (check --context / --kubeconfig, or that the slot's cluster is running)", e.Host, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// ErrorKind: an unreachable cluster is an environment failure.
func (e *UnreachableError) ErrorKind() errkind.Kind { return errkind.Environment }

// NewCluster builds the clients for cfg. It does not contact the server.
func NewCluster(name string, cfg *rest.Config) (*Cluster, error) {
	cfg = rest.CopyConfig(cfg)
	// Deprecation warnings from the server are not the operator's concern here.
	cfg.WarningHandler = rest.NoWarnings{}
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building a client for %s: %w", cfg.Host, err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building a discovery client for %s: %w", cfg.Host, err)
	}
	cached := memory.NewMemCacheClient(dc)
	return &Cluster{Name: name, config: cfg, dyn: dyn, discovery: dc,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(cached)}, nil
}

// Namespace is the namespace for checks that name none.
func (c *Cluster) Namespace() string {
	if c.DefaultNamespace == "" {
		return "default"
	}
	return c.DefaultNamespace
}

// Host is the API server's address.
func (c *Cluster) Host() string { return c.config.Host }

// Ping checks that the API server answers, within timeout.
func (c *Cluster) Ping(ctx context.Context, timeout time.Duration) error {
	cfg := rest.CopyConfig(c.config)
	cfg.Timeout = timeout
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return &UnreachableError{Host: c.config.Host, Err: err}
	}
	done := make(chan error, 1)
	go func() { _, err := dc.ServerVersion(); done <- err }()
	select {
	case err = <-done:
	case <-time.After(timeout):
		err = fmt.Errorf("no answer within %s", timeout)
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		return &UnreachableError{Host: c.config.Host, Err: err}
	}
	return nil
}

// kindNotFound is an apiVersion/kind the server does not serve (yet: a CRD
// may be installed while the gate waits).
type kindNotFound struct{ apiVersion, kind string }

func (e *kindNotFound) Error() string {
	return fmt.Sprintf("the server has no kind %s in %s (is its CRD installed?)", e.kind, e.apiVersion)
}

// resolve maps apiVersion/kind to its resource.
func (c *Cluster) resolve(apiVersion, kind string) (schema.GroupVersionResource, bool, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return schema.GroupVersionResource{}, false, err
	}
	m, err := c.mapper.RESTMapping(gv.WithKind(kind).GroupKind(), gv.Version)
	if meta.IsNoMatchError(err) {
		return schema.GroupVersionResource{}, false, &kindNotFound{apiVersion, kind}
	}
	if err != nil {
		return schema.GroupVersionResource{}, false, err
	}
	return m.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// watcher starts at most one watch per (cluster, resource, namespace) and
// turns every event into a wake-up of the evaluation loop.
type watcher struct {
	ctx     context.Context
	wake    chan struct{}
	mu      sync.Mutex
	started map[string]bool
	wg      sync.WaitGroup
}

func newWatcher(ctx context.Context) *watcher {
	return &watcher{ctx: ctx, wake: make(chan struct{}, 1), started: map[string]bool{}}
}

func (w *watcher) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// ensure watches gvr in ns ("" = all namespaces) on c. A new watch begins
// with synthetic ADDED events for what exists, so whatever changed between
// the read that asked for the watch and the watch's start wakes the loop.
func (w *watcher) ensure(c *Cluster, gvr schema.GroupVersionResource, ns string) {
	key := fmt.Sprintf("%p/%s/%s", c, gvr, ns)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started[key] {
		return
	}
	w.started[key] = true
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		backoff := 100 * time.Millisecond
		for w.ctx.Err() == nil {
			wi, err := c.dyn.Resource(gvr).Namespace(ns).Watch(w.ctx, metav1.ListOptions{})
			if err != nil {
				select {
				case <-w.ctx.Done():
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, 5*time.Second)
				continue
			}
			backoff = 100 * time.Millisecond
			for range wi.ResultChan() {
				w.poke()
			}
			wi.Stop()
			// The server closed the watch (timeout, restart): look again.
			w.poke()
		}
	}()
}

// wait stops all watches; call after cancelling the watcher's context.
func (w *watcher) wait() { w.wg.Wait() }
