package gate

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/testenv"
)

// Two shared API servers: the management cluster (with the real Flux,
// flux-operator and Cluster API CRDs) and a workload cluster.
var (
	mgmtServer     = &testenv.Shared{CRDDirs: []string{crdDir()}}
	workloadServer = &testenv.Shared{CRDDirs: []string{crdDir()}}
)

func TestMain(m *testing.M) {
	code := m.Run()
	mgmtServer.Stop()
	workloadServer.Stop()
	os.Exit(code)
}

func crdDir() string {
	return filepath.Join(testenv.RepoRoot(), "testdata", "crds")
}

var (
	ociGVR     = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "ocirepositories"}
	ksGVR      = schema.GroupVersionResource{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Resource: "kustomizations"}
	capiGVR    = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "clusters"}
	nsGVR      = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	cmGVR      = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	deployGVR  = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	fluxInsGVR = schema.GroupVersionResource{Group: "fluxcd.controlplane.io", Version: "v1", Resource: "fluxinstances"}
)

// site is a test's view of one API server, in a namespace of its own.
type site struct {
	t   *testing.T
	cfg *rest.Config
	dyn dynamic.Interface
	ns  string
}

var nsCounter atomic.Int64

func newSite(t *testing.T, s *testenv.Shared) *site {
	t.Helper()
	cfg := s.Config(t)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := &site{t: t, cfg: cfg, dyn: dyn, ns: fmt.Sprintf("t%d-%s", nsCounter.Add(1), strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")))}
	if len(st.ns) > 60 {
		st.ns = st.ns[:60]
	}
	st.ns = strings.TrimRight(st.ns, "-_")
	st.ns = strings.ReplaceAll(st.ns, "_", "-")
	st.ensureNS(st.ns)
	return st
}

func (s *site) ensureNS(name string) {
	s.t.Helper()
	u := obj("v1", "Namespace", "", name, nil)
	if _, err := s.dyn.Resource(nsGVR).Create(context.Background(), u, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		s.t.Fatal(err)
	}
}

func obj(apiVersion, kind, ns, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind}}
	for k, v := range fields {
		u.Object[k] = v
	}
	u.SetName(name)
	u.SetNamespace(ns)
	return u
}

func (s *site) create(gvr schema.GroupVersionResource, u *unstructured.Unstructured) *unstructured.Unstructured {
	s.t.Helper()
	out, err := s.dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		s.t.Fatalf("creating %s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return out
}

// setStatus writes the status subresource the way a controller does.
func (s *site) setStatus(gvr schema.GroupVersionResource, ns, name string, status map[string]any) {
	s.t.Helper()
	ri := s.dyn.Resource(gvr).Namespace(ns)
	u, err := ri.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	u.Object["status"] = status
	if _, err := ri.UpdateStatus(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		s.t.Fatalf("writing status of %s/%s: %v", ns, name, err)
	}
}

func condition(typ, status, reason, msg string, gen int64) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339), "observedGeneration": gen}
}

func (s *site) cluster() *Cluster {
	s.t.Helper()
	c, err := NewCluster("", s.cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	c.DefaultNamespace = s.ns
	return c
}

func (s *site) gate(checks ...Check) *Gate {
	g := &Gate{APIVersion: APIVersion, Kind: Kind, Metadata: Metadata{Name: s.ns}, Spec: Spec{Checks: checks}}
	if _, err := g.Validate(); err != nil {
		s.t.Fatal(err)
	}
	return g
}

func (s *site) once(g *Gate) *Report {
	s.t.Helper()
	rep, err := Run(context.Background(), g, s.cluster(), Options{Once: true})
	if err != nil {
		s.t.Fatal(err)
	}
	return rep
}

// expect asserts one row's status and reason.
func expect(t *testing.T, rep *Report, name string, st Status, reason string) Result {
	t.Helper()
	for _, r := range rep.Checks {
		if r.Name == name {
			if r.Status != st || (reason != "" && r.Reason != reason) {
				t.Errorf("%s: %s %s %q, want %s %s", name, r.Status, r.Reason, r.Message, st, reason)
			}
			return r
		}
	}
	t.Fatalf("no row %q in %+v", name, rep.Checks)
	return Result{}
}

func ociRepo(ns, name, url string) *unstructured.Unstructured {
	return obj("source.toolkit.fluxcd.io/v1", "OCIRepository", ns, name, map[string]any{
		"spec": map[string]any{"url": url, "interval": "1m"}})
}

func TestResourceCondition(t *testing.T) {
	s := newSite(t, mgmtServer)
	g := s.gate(Check{Name: "src", Resource: &ResourceCheck{ObjectRef: ObjectRef{APIVersion: "source.toolkit.fluxcd.io/v1", Kind: "OCIRepository", Name: "flux-system"}, Condition: "Ready"}})
	expect(t, s.once(g), "src", Fail, "NotFound")
	s.create(ociGVR, ociRepo(s.ns, "flux-system", "oci://zarf-docker-registry.zarf.svc/x"))
	expect(t, s.once(g), "src", Fail, "ConditionMissing")
	s.setStatus(ociGVR, s.ns, "flux-system", map[string]any{"conditions": []any{condition("Ready", "False", "OCIArtifactPullFailed", "pull failed: connection refused", 1)}})
	r := expect(t, s.once(g), "src", Fail, "OCIArtifactPullFailed")
	if !strings.Contains(r.Message, "connection refused") || r.Object != "OCIRepository "+s.ns+"/flux-system" {
		t.Errorf("row %+v", r)
	}
	// True, but for an older generation than the object's: stale.
	s.setStatus(ociGVR, s.ns, "flux-system", map[string]any{"conditions": []any{condition("Ready", "True", "Succeeded", "stored artifact", 0)}})
	expect(t, s.once(g), "src", Pass, "")
	u, _ := s.dyn.Resource(ociGVR).Namespace(s.ns).Get(context.Background(), "flux-system", metav1.GetOptions{})
	_ = unstructured.SetNestedField(u.Object, "5m", "spec", "interval")
	if _, err := s.dyn.Resource(ociGVR).Namespace(s.ns).Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.setStatus(ociGVR, s.ns, "flux-system", map[string]any{"conditions": []any{condition("Ready", "True", "Succeeded", "stored artifact", 1)}})
	expect(t, s.once(g), "src", Fail, "Stale")
	s.setStatus(ociGVR, s.ns, "flux-system", map[string]any{"conditions": []any{condition("Ready", "True", "Succeeded", "stored artifact", 2)}})
	expect(t, s.once(g), "src", Pass, "")
}

func TestResourceKstatusAndSelector(t *testing.T) {
	s := newSite(t, mgmtServer)
	g := s.gate(
		Check{Name: "cms", Resource: &ResourceCheck{ObjectRef: ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Selector: "app=web"}}},
		Check{Name: "deploy", Resource: &ResourceCheck{ObjectRef: ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}}},
		Check{Name: "wl", Resource: &ResourceCheck{ObjectRef: ObjectRef{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: "wl"}, Condition: "Available"}},
	)
	rep := s.once(g)
	expect(t, rep, "cms", Fail, "NotFound")
	expect(t, rep, "deploy", Fail, "NotFound")
	for _, n := range []string{"a", "b"} {
		s.create(cmGVR, obj("v1", "ConfigMap", s.ns, n, map[string]any{"metadata": map[string]any{"name": n, "namespace": s.ns, "labels": map[string]any{"app": "web"}}}))
	}
	s.create(deployGVR, deployment(s.ns, "web"))
	s.create(capiGVR, obj("cluster.x-k8s.io/v1beta2", "Cluster", s.ns, "wl", map[string]any{"spec": map[string]any{"controlPlaneEndpoint": map[string]any{"host": "127.0.0.1", "port": int64(6443)}}}))
	rep = s.once(g)
	if r := expect(t, rep, "cms", Pass, ""); r.Message != "all 2 objects pass" {
		t.Errorf("message %q", r.Message)
	}
	expect(t, rep, "deploy", Fail, "InProgress")
	expect(t, rep, "wl", Fail, "ConditionMissing")
	s.setDeploymentAvailable("web")
	s.setStatus(capiGVR, s.ns, "wl", map[string]any{"conditions": []any{condition("Available", "True", "Available", "", 1)}})
	rep = s.once(g)
	expect(t, rep, "deploy", Pass, "")
	expect(t, rep, "wl", Pass, "")
	if !rep.Passed {
		t.Errorf("report not passed: %+v", rep.Failed())
	}
}

func deployment(ns, name string) *unstructured.Unstructured {
	return obj("apps/v1", "Deployment", ns, name, map[string]any{"spec": map[string]any{
		"replicas": int64(1),
		"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
		"template": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"app": name}},
			"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "127.0.0.1:31999/" + name + ":1"}}},
		}}})
}

// setDeploymentAvailable writes the status the deployment controller
// writes once its one replica is available.
func (s *site) setDeploymentAvailable(name string) {
	s.setStatus(deployGVR, s.ns, name, map[string]any{"observedGeneration": int64(1), "replicas": int64(1), "updatedReplicas": int64(1),
		"readyReplicas": int64(1), "availableReplicas": int64(1), "conditions": []any{
			map[string]any{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
			map[string]any{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}}})
}

func TestField(t *testing.T) {
	s := newSite(t, mgmtServer)
	s.create(ociGVR, ociRepo(s.ns, "src", "oci://zarf-docker-registry.zarf.svc.cluster.local:5000/site/config"))
	eq := "1m"
	g := s.gate(
		Check{Name: "contains", Field: &FieldCheck{ObjectRef: ObjectRef{APIVersion: "source.toolkit.fluxcd.io/v1", Kind: "OCIRepository", Name: "src"}, Path: "{.spec.url}", Contains: "zarf-docker-registry"}},
		Check{Name: "equals", Field: &FieldCheck{ObjectRef: ObjectRef{APIVersion: "source.toolkit.fluxcd.io/v1", Kind: "OCIRepository", Name: "src"}, Path: "{.spec.interval}", Equals: &eq}},
		Check{Name: "matches", Field: &FieldCheck{ObjectRef: ObjectRef{APIVersion: "source.toolkit.fluxcd.io/v1", Kind: "OCIRepository", Name: "src"}, Path: "{.spec.url}", Matches: `^oci://[^/]*:5000/`}},
		Check{Name: "wrong", Field: &FieldCheck{ObjectRef: ObjectRef{APIVersion: "source.toolkit.fluxcd.io/v1", Kind: "OCIRepository", Name: "src"}, Path: "{.spec.url}", Contains: "ghcr.io"}},
		Check{Name: "missing", Field: &FieldCheck{ObjectRef: ObjectRef{APIVersion: "source.toolkit.fluxcd.io/v1", Kind: "OCIRepository", Name: "src"}, Path: "{.spec.ref.tag}", Contains: "v1"}},
	)
	rep := s.once(g)
	expect(t, rep, "contains", Pass, "")
	expect(t, rep, "equals", Pass, "")
	expect(t, rep, "matches", Pass, "")
	if r := expect(t, rep, "wrong", Fail, "Mismatch"); !strings.Contains(r.Message, `want it to contain "ghcr.io"`) {
		t.Errorf("message %q", r.Message)
	}
	expect(t, rep, "missing", Fail, "FieldMissing")
}

func (s *site) pod(name string, labels map[string]any, images map[string][]string) {
	s.t.Helper()
	spec := map[string]any{}
	for _, kind := range []string{"initContainers", "containers"} {
		var cs []any
		for i, img := range images[kind] {
			cs = append(cs, map[string]any{"name": fmt.Sprintf("%s%d", kind[:4], i), "image": img})
		}
		if cs != nil {
			spec[kind] = cs
		}
	}
	md := map[string]any{"name": name, "namespace": s.ns}
	if labels != nil {
		md["labels"] = labels
	}
	s.create(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, obj("v1", "Pod", s.ns, name, map[string]any{"metadata": md, "spec": spec}))
}

func (s *site) podRunning(name string, ready bool) {
	s.t.Helper()
	st := "False"
	if ready {
		st = "True"
	}
	s.setStatus(podsGVR, s.ns, name, map[string]any{"phase": "Running", "conditions": []any{
		map[string]any{"type": "Ready", "status": st, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}})
}

func TestImages(t *testing.T) {
	s := newSite(t, mgmtServer)
	ic := &ImagesCheck{Namespaces: []string{s.ns}, AllowedRegistries: []string{"127.0.0.1:31999"},
		Ignore: []string{"registry.k8s.io/pause*", "docker.io/kindest/*"}}
	g := s.gate(Check{Name: "images", Images: ic})
	s.pod("ok", nil, map[string][]string{"containers": {"127.0.0.1:31999/podinfo:6.7", "registry.k8s.io/pause:3.10"}, "initContainers": {"kindest/kindnetd:v2"}})
	if r := expect(t, s.once(g), "images", Pass, ""); !strings.Contains(r.Message, "3 container images") {
		t.Errorf("message %q", r.Message)
	}
	s.pod("bad", nil, map[string][]string{"containers": {"127.0.0.1:31999/podinfo:6.7"}, "initContainers": {"ghcr.io/fluxcd/source-controller:v1"}})
	r := expect(t, s.once(g), "images", Fail, "ForeignImage")
	if !strings.Contains(r.Message, "ghcr.io/fluxcd/source-controller:v1 ("+s.ns+"/bad)") {
		t.Errorf("message %q", r.Message)
	}
	// An ephemeral container (kubectl debug) counts too.
	s2 := newSite(t, mgmtServer)
	s2.pod("dbg", nil, map[string][]string{"containers": {"127.0.0.1:31999/podinfo:6.7"}})
	u, err := s2.dyn.Resource(podsGVR).Namespace(s2.ns).Get(context.Background(), "dbg", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "debugger", "image": "busybox:1.36"}}, "spec", "ephemeralContainers")
	if _, err := s2.dyn.Resource(podsGVR).Namespace(s2.ns).Update(context.Background(), u, metav1.UpdateOptions{}, "ephemeralcontainers"); err != nil {
		t.Fatal(err)
	}
	ic2 := *ic
	ic2.Namespaces = []string{s2.ns}
	r = expect(t, s2.once(s2.gate(Check{Name: "images", Images: &ic2})), "images", Fail, "ForeignImage")
	if !strings.Contains(r.Message, "busybox:1.36") {
		t.Errorf("message %q", r.Message)
	}
}

func TestPodsAndNodes(t *testing.T) {
	s := newSite(t, mgmtServer)
	label := s.ns
	g := s.gate(
		Check{Name: "pods", Pods: &PodsCheck{Namespace: s.ns, Selector: "app=podinfo", Min: 2}},
		Check{Name: "nodes", Nodes: &NodesCheck{Selector: "test=" + label, Min: 2}},
	)
	rep := s.once(g)
	if r := expect(t, rep, "pods", Fail, "TooFewReady"); r.Message != "0 of 0 pods Running and Ready, want at least 2" {
		t.Errorf("message %q", r.Message)
	}
	expect(t, rep, "nodes", Fail, "TooFewReady")
	for _, n := range []string{"p1", "p2", "p3"} {
		s.pod(n, map[string]any{"app": "podinfo"}, map[string][]string{"containers": {"127.0.0.1:31999/podinfo:6.7"}})
	}
	s.pod("other", map[string]any{"app": "other"}, map[string][]string{"containers": {"x"}})
	s.podRunning("p1", true)
	s.podRunning("p2", false)
	s.podRunning("other", true)
	if r := expect(t, s.once(g), "pods", Fail, "TooFewReady"); !strings.Contains(r.Message, "1 of 3 pods") || !strings.Contains(r.Message, "p2 Running") {
		t.Errorf("message %q", r.Message)
	}
	s.podRunning("p2", true)
	expect(t, s.once(g), "pods", Pass, "")
	for i := range 2 {
		name := fmt.Sprintf("%s-n%d", label, i)
		s.create(nodesGVR, obj("v1", "Node", "", name, map[string]any{"metadata": map[string]any{"name": name, "labels": map[string]any{"test": label}}}))
		s.setStatus(nodesGVR, "", name, map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "KubeletReady"}}})
	}
	rep = s.once(g)
	if r := expect(t, rep, "nodes", Pass, ""); r.Message != "2 of 2 nodes Ready" {
		t.Errorf("message %q", r.Message)
	}
}

// fakeDocker answers `docker port` with a fixed host port.
type fakeDocker struct {
	port  string
	calls atomic.Int64
}

func (f *fakeDocker) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	f.calls.Add(1)
	if name != "docker" || len(args) != 3 || args[0] != "port" || args[2] != "6443/tcp" {
		return nil, fmt.Errorf("unexpected %s %v", name, args)
	}
	if f.port == "" {
		return nil, fmt.Errorf("Error: No such container: %s", args[1])
	}
	return []byte("0.0.0.0:" + f.port + "\n[::]:" + f.port + "\n"), nil
}

func kubeconfigSecret(t *testing.T, cfg *rest.Config, ns, cluster string, server string) *unstructured.Unstructured {
	t.Helper()
	c := rest.CopyConfig(cfg)
	if server != "" {
		c.Host = server
	}
	kc, err := testenv.Kubeconfig(c, cluster)
	if err != nil {
		t.Fatal(err)
	}
	return obj("v1", "Secret", ns, cluster+"-kubeconfig", map[string]any{"data": map[string]any{"value": base64.StdEncoding.EncodeToString(kc)}})
}

func TestWorkload(t *testing.T) {
	s := newSite(t, mgmtServer)
	wl := newSite(t, workloadServer)
	g := s.gate(Check{Name: "wl", Workload: &WorkloadCheck{Cluster: "wlc", UseDockerPort: true, Checks: []Check{
		{Name: "cm", Resource: &ResourceCheck{ObjectRef: ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: wl.ns, Name: "marker"}}},
		{Name: "pods", Pods: &PodsCheck{Namespace: wl.ns, Min: 1}},
	}}})
	docker := &fakeDocker{}
	run := func() *Report {
		rep, err := Run(context.Background(), g, s.cluster(), Options{Once: true, Runner: docker})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	rep := run()
	expect(t, rep, "wl", Fail, "KubeconfigMissing")
	expect(t, rep, "wl/pods", Fail, "NotEvaluated")
	// The secret points at CAPD's address on the kind network (here: a
	// port nobody listens on); Docker's published port is the real one.
	s.create(secretsGVR, kubeconfigSecret(t, wl.cfg, s.ns, "wlc", "https://172.18.0.3:1"))
	if r := expect(t, run(), "wl", Fail, "LoadBalancerPortUnknown"); !strings.Contains(r.Message, "No such container: wlc-lb") {
		t.Errorf("message %q", r.Message)
	}
	docker.port = strings.TrimPrefix(wl.cfg.Host, "https://127.0.0.1:")
	rep = run()
	expect(t, rep, "wl", Fail, "ChecksFailing")
	if r := expect(t, rep, "wl/cm", Fail, "NotFound"); r.Cluster != "wlc" {
		t.Errorf("row %+v", r)
	}
	wl.create(cmGVR, obj("v1", "ConfigMap", wl.ns, "marker", nil))
	wl.pod("podinfo", nil, map[string][]string{"containers": {"x"}})
	wl.podRunning("podinfo", true)
	rep = run()
	if r := expect(t, rep, "wl", Pass, ""); !strings.Contains(r.Message, "all 2 checks pass in wlc") {
		t.Errorf("message %q", r.Message)
	}
	expect(t, rep, "wl/pods", Pass, "")
}

func zarfSecret(t *testing.T, name string, pkg map[string]any) *unstructured.Unstructured {
	raw, err := json.Marshal(pkg)
	if err != nil {
		t.Fatal(err)
	}
	return obj("v1", "Secret", "zarf", "zarf-package-"+name, map[string]any{
		"metadata": map[string]any{"name": "zarf-package-" + name, "namespace": "zarf", "labels": map[string]any{"package-deploy-info": name, "app.kubernetes.io/managed-by": "zarf"}},
		"data":     map[string]any{"data": base64.StdEncoding.EncodeToString(raw)}})
}

func TestZarf(t *testing.T) {
	s := newSite(t, mgmtServer)
	s.ensureNS("zarf")
	g := s.gate(Check{Name: "zarf", Zarf: &ZarfCheck{Packages: []string{"site"}}})
	expect(t, s.once(g), "zarf", Fail, "PackageMissing")
	s.create(deployGVR, deployment(s.ns, "podinfo"))
	s.create(secretsGVR, zarfSecret(t, "site", map[string]any{
		"name": "site",
		"data": map[string]any{"kind": "ZarfPackageConfig", "components": []any{
			map[string]any{"name": "podinfo", "healthChecks": []any{map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": s.ns, "name": "podinfo"}}},
			map[string]any{"name": "optional", "healthChecks": []any{map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": s.ns, "name": "never-deployed"}}},
		}},
		"deployedComponents": []any{map[string]any{"name": "podinfo", "status": "Succeeded"}},
	}))
	rep := s.once(g)
	expect(t, rep, "zarf", Fail, "Unhealthy")
	if r := expect(t, rep, "zarf/site", Fail, "InProgress"); !strings.Contains(r.Message, "component podinfo: Deployment "+s.ns+"/podinfo") {
		t.Errorf("message %q", r.Message)
	}
	s.setDeploymentAvailable("podinfo")
	rep = s.once(g)
	expect(t, rep, "zarf", Pass, "")
	if r := expect(t, rep, "zarf/site", Pass, ""); r.Message != "1 component(s), 1 healthCheck(s) Current" {
		t.Errorf("message %q", r.Message)
	}
}

// TestWaitWakesOnWatch: with a fallback poll of an hour, the gate still
// returns within a second of the condition turning True.
func TestWaitWakesOnWatch(t *testing.T) {
	s := newSite(t, mgmtServer)
	s.create(ociGVR, ociRepo(s.ns, "src", "oci://x"))
	g := s.gate(Check{Name: "src", Resource: &ResourceCheck{ObjectRef: ObjectRef{APIVersion: "source.toolkit.fluxcd.io/v1", Kind: "OCIRepository", Name: "src"}, Condition: "Ready"}})
	var evaluations atomic.Int64
	done := make(chan *Report, 1)
	go func() {
		rep, err := Run(context.Background(), g, s.cluster(), Options{Timeout: time.Minute, PollInterval: time.Hour,
			OnEvaluate: func([]Result) { evaluations.Add(1) }})
		if err != nil {
			t.Error(err)
		}
		done <- rep
	}()
	deadline := time.Now().Add(10 * time.Second)
	for evaluations.Load() < 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	select {
	case rep := <-done:
		t.Fatalf("returned before the condition was set: %+v", rep)
	default:
	}
	s.setStatus(ociGVR, s.ns, "src", map[string]any{"conditions": []any{condition("Ready", "True", "Succeeded", "ok", 1)}})
	set := time.Now()
	select {
	case rep := <-done:
		took := time.Since(set)
		t.Logf("returned %s after the condition turned True (%d evaluations)", took.Round(time.Millisecond), rep.Evaluations)
		if took > time.Second || !rep.Passed || rep.TimedOut {
			t.Errorf("took %s, passed %v", took, rep.Passed)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the gate did not wake on the watch event")
	}
}

// TestTimeoutReportsLastState: at the timeout each failing check keeps its last observed state.
func TestTimeoutReportsLastState(t *testing.T) {
	s := newSite(t, mgmtServer)
	s.create(ksGVR, obj("kustomize.toolkit.fluxcd.io/v1", "Kustomization", s.ns, "flux-system", map[string]any{
		"spec": map[string]any{"interval": "10m", "prune": true, "sourceRef": map[string]any{"kind": "OCIRepository", "name": "flux-system"}}}))
	s.setStatus(ksGVR, s.ns, "flux-system", map[string]any{"conditions": []any{condition("Ready", "False", "BuildFailed", "kustomize build failed: missing resource", 1)}})
	g := s.gate(
		Check{Name: "ks", Resource: &ResourceCheck{ObjectRef: ObjectRef{APIVersion: "kustomize.toolkit.fluxcd.io/v1", Kind: "Kustomization", Name: "flux-system"}, Condition: "Ready"}},
		Check{Name: "fi", Resource: &ResourceCheck{ObjectRef: ObjectRef{APIVersion: "fluxcd.controlplane.io/v1", Kind: "FluxInstance", Name: "flux"}, Condition: "Ready"}},
		Check{Name: "nokind", Resource: &ResourceCheck{ObjectRef: ObjectRef{APIVersion: "example.com/v1", Kind: "Widget", Name: "w"}}},
	)
	start := time.Now()
	rep, err := Run(context.Background(), g, s.cluster(), Options{Timeout: 1500 * time.Millisecond, PollInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 1500*time.Millisecond || el > 5*time.Second {
		t.Errorf("returned after %s", el)
	}
	if !rep.TimedOut || rep.Passed || rep.Evaluations < 2 {
		t.Errorf("report %+v", rep)
	}
	if r := expect(t, rep, "ks", Fail, "BuildFailed"); !strings.Contains(r.Message, "missing resource") {
		t.Errorf("message %q", r.Message)
	}
	expect(t, rep, "fi", Fail, "NotFound")
	expect(t, rep, "nokind", Fail, "KindNotFound")
}

func TestUnreachable(t *testing.T) {
	c, err := NewCluster("", &rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	g := Default()
	_, err = Run(context.Background(), g, c, Options{Once: true})
	var ue *UnreachableError
	if err == nil || !errors.As(err, &ue) || ue.ErrorKind() != errkind.Environment {
		t.Fatalf("want *UnreachableError, got %v", err)
	}
}

// TestImagesOfTheSlot: "@slot" allows zarf's in-cluster registry and the
// registry of the slot under gate, and no other slot's.
func TestImagesOfTheSlot(t *testing.T) {
	s := newSite(t, mgmtServer)
	g := s.gate(Check{Name: "images", Images: &ImagesCheck{Namespaces: []string{s.ns}, AllowedRegistries: []string{SlotRegistry}}})
	s.pod("a", nil, map[string][]string{"containers": {"127.0.0.1:5902/workload:1", "127.0.0.1:31999/podinfo:6.7"}})
	run := func(slotRegistries ...string) *Report {
		t.Helper()
		rep, err := Run(context.Background(), g, s.cluster(), Options{Once: true, SlotRegistries: slotRegistries})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if r := expect(t, run("127.0.0.1:5902"), "images", Pass, ""); !strings.Contains(r.Message, "all from 127.0.0.1:31999, 127.0.0.1:5902") {
		t.Errorf("message %q", r.Message)
	}
	r := expect(t, run("127.0.0.1:5903"), "images", Fail, "ForeignImage")
	if !strings.Contains(r.Message, "127.0.0.1:5902/workload:1 ("+s.ns+"/a)") {
		t.Errorf("message %q", r.Message)
	}
	// Without a slot, only zarf's registry.
	expect(t, run(), "images", Fail, "ForeignImage")
}
