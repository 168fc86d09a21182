package gate

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kubectl-bundle/kubectl-bundle/internal/testenv"
)

// turnsPassing starts g waiting (fallback poll: an hour, so only watches
// can wake it), checks it is failing, applies fix, and asserts the gate
// returns passed within a second or two.
func turnsPassing(t *testing.T, s *site, g *Gate, opts Options, fix func()) {
	t.Helper()
	opts.Timeout, opts.PollInterval = time.Minute, time.Hour
	first := make(chan []Result, 1)
	opts.OnEvaluate = func(r []Result) {
		select {
		case first <- r:
		default:
		}
	}
	done := make(chan *Report, 1)
	go func() {
		rep, err := Run(context.Background(), g, s.cluster(), opts)
		if err != nil {
			t.Error(err)
		}
		done <- rep
	}()
	select {
	case r := <-first:
		failing := 0
		for _, row := range r {
			if row.Status != Pass {
				failing++
			}
		}
		if failing == 0 {
			t.Fatalf("the gate passes before the fix: %+v", r)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no evaluation")
	}
	fix()
	fixed := time.Now()
	select {
	case rep := <-done:
		if rep == nil || !rep.Passed {
			t.Fatalf("report %+v", rep)
		}
		if took := time.Since(fixed); took > 2*time.Second {
			t.Errorf("returned %s after the fix", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the gate did not notice the fix")
	}
}

func TestEveryCheckTurnsPassingWhileWaiting(t *testing.T) {
	t.Run("resource", func(t *testing.T) {
		s := newSite(t, mgmtServer)
		s.create(capiGVR, obj("cluster.x-k8s.io/v1beta2", "Cluster", s.ns, "wl", map[string]any{"spec": map[string]any{"controlPlaneEndpoint": map[string]any{"host": "127.0.0.1", "port": int64(6443)}}}))
		g := s.gate(Check{Name: "wl", Resource: &ResourceCheck{ObjectRef: ObjectRef{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: "wl"}, Condition: "Available"}})
		turnsPassing(t, s, g, Options{}, func() {
			s.setStatus(capiGVR, s.ns, "wl", map[string]any{"conditions": []any{condition("Available", "True", "Available", "", 1)}})
		})
	})
	t.Run("field", func(t *testing.T) {
		s := newSite(t, mgmtServer)
		s.create(ociGVR, ociRepo(s.ns, "src", "oci://ghcr.io/x"))
		g := s.gate(Check{Name: "url", Field: &FieldCheck{ObjectRef: ObjectRef{APIVersion: "source.toolkit.fluxcd.io/v1", Kind: "OCIRepository", Name: "src"}, Path: "{.spec.url}", Contains: "zarf-docker-registry"}})
		turnsPassing(t, s, g, Options{}, func() {
			u, _ := s.dyn.Resource(ociGVR).Namespace(s.ns).Get(context.Background(), "src", metav1.GetOptions{})
			_ = unstructured.SetNestedField(u.Object, "oci://zarf-docker-registry.zarf.svc/x", "spec", "url")
			if _, err := s.dyn.Resource(ociGVR).Namespace(s.ns).Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
				t.Error(err)
			}
		})
	})
	t.Run("images", func(t *testing.T) {
		s := newSite(t, mgmtServer)
		s.pod("foreign", nil, map[string][]string{"containers": {"ghcr.io/x:1"}})
		g := s.gate(Check{Name: "images", Images: &ImagesCheck{Namespaces: []string{s.ns}, AllowedRegistries: []string{"127.0.0.1:31999"}}})
		turnsPassing(t, s, g, Options{}, func() {
			if err := s.dyn.Resource(podsGVR).Namespace(s.ns).Delete(context.Background(), "foreign", *metav1.NewDeleteOptions(0)); err != nil {
				t.Error(err)
			}
		})
	})
	t.Run("pods", func(t *testing.T) {
		s := newSite(t, mgmtServer)
		s.pod("p", nil, map[string][]string{"containers": {"x"}})
		g := s.gate(Check{Name: "pods", Pods: &PodsCheck{Namespace: s.ns}})
		turnsPassing(t, s, g, Options{}, func() { s.podRunning("p", true) })
	})
	t.Run("nodes", func(t *testing.T) {
		s := newSite(t, mgmtServer)
		name := s.ns + "-node"
		s.create(nodesGVR, obj("v1", "Node", "", name, map[string]any{"metadata": map[string]any{"name": name, "labels": map[string]any{"test": s.ns}}}))
		g := s.gate(Check{Name: "nodes", Nodes: &NodesCheck{Selector: "test=" + s.ns}})
		turnsPassing(t, s, g, Options{}, func() {
			s.setStatus(nodesGVR, "", name, map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}})
		})
	})
	t.Run("workload", func(t *testing.T) {
		s := newSite(t, mgmtServer)
		wl := newSite(t, workloadServer)
		wl.pod("p", nil, map[string][]string{"containers": {"x"}})
		g := s.gate(Check{Name: "wl", Workload: &WorkloadCheck{Cluster: "c", Checks: []Check{{Name: "pods", Pods: &PodsCheck{Namespace: wl.ns}}}}})
		// First the kubeconfig secret appears (a watch on the management
		// cluster), then the pod turns ready (a watch on the workload cluster).
		turnsPassing(t, s, g, Options{}, func() {
			s.create(secretsGVR, kubeconfigSecret(t, wl.cfg, s.ns, "c", ""))
			time.Sleep(500 * time.Millisecond)
			wl.podRunning("p", true)
		})
	})
	t.Run("zarf", func(t *testing.T) {
		s := newSite(t, workloadServer) // the zarf namespace is the mgmt server's TestZarf's
		s.ensureNS("zarf")
		s.create(deployGVR, deployment(s.ns, "app"))
		s.create(secretsGVR, zarfSecret(t, "app", map[string]any{"name": "app",
			"data":               map[string]any{"components": []any{map[string]any{"name": "app", "healthChecks": []any{map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": s.ns, "name": "app"}}}}},
			"deployedComponents": []any{map[string]any{"name": "app", "status": "Succeeded"}}}))
		g := s.gate(Check{Name: "zarf", Zarf: &ZarfCheck{}})
		turnsPassing(t, s, g, Options{}, func() { s.setDeploymentAvailable("app") })
	})
}

// TestWaitForCRD: a kind whose CRD is installed while the gate waits is
// picked up without a restart.
func TestWaitForCRD(t *testing.T) {
	cfg := testenv.Start(t)
	s := &site{t: t, cfg: cfg, ns: "default"}
	var err error
	if s.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	g := s.gate(Check{Name: "cm", Resource: &ResourceCheck{ObjectRef: ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Name: "absent"}}},
		Check{Name: "fi", Resource: &ResourceCheck{ObjectRef: ObjectRef{APIVersion: "fluxcd.controlplane.io/v1", Kind: "FluxInstance", Name: "flux"}, Condition: "Ready"}})
	s.create(cmGVR, obj("v1", "ConfigMap", "default", "absent", nil))
	turnsPassing(t, s, g, Options{}, func() {
		if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{crdDir()}}); err != nil {
			t.Error(err)
			return
		}
		fi := obj("fluxcd.controlplane.io/v1", "FluxInstance", "default", "flux", map[string]any{"spec": map[string]any{
			"distribution": map[string]any{"version": "2.x", "registry": "127.0.0.1:31999/fluxcd"}}})
		s.create(fluxInsGVR, fi)
		s.setStatus(fluxInsGVR, "default", "flux", map[string]any{"conditions": []any{condition("Ready", "True", "ReconciliationSucceeded", "", 1)}})
	})
}
