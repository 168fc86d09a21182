// Package pivottest starts management clusters for pivot tests: real API
// servers with the Cluster API, kubeadm and CAPD CRDs from the module
// cache, and a provisioned workload cluster's object graph.
package pivottest

import (
	"context"
	"fmt"
	"github.com/go-logr/logr"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	capdv1 "sigs.k8s.io/cluster-api/test/infrastructure/docker/api/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-bundle/kubectl-bundle/internal/testenv"
)

// moduleDir is a module's directory in the module cache, as go list
// reports it for the version go.mod requires.
func moduleDir(t testing.TB, mod string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", mod).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", mod, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		t.Fatalf("module %s is not downloaded (go mod download %s)", mod, mod)
	}
	return dir
}

// crdFiles are the CRDs of Cluster API core, kubeadm bootstrap and
// control plane, CAPD, and clusterctl's provider inventory, read from the
// module cache.
func crdFiles(t testing.TB) []string {
	capi := moduleDir(t, "sigs.k8s.io/cluster-api")
	capd := moduleDir(t, "sigs.k8s.io/cluster-api/test")
	var files []string
	for _, dir := range []string{
		filepath.Join(capi, "config", "crd", "bases"),
		filepath.Join(capi, "bootstrap", "kubeadm", "config", "crd", "bases"),
		filepath.Join(capi, "controlplane", "kubeadm", "config", "crd", "bases"),
		filepath.Join(capd, "infrastructure", "docker", "config", "crd", "bases"),
	} {
		m, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil || len(m) == 0 {
			t.Fatalf("no CRDs in %s (%v)", dir, err)
		}
		files = append(files, m...)
	}
	return append(files, filepath.Join(capi, "cmd", "clusterctl", "config", "manifest", "clusterctl-api.yaml"))
}

// installCRDs installs every CRD labelled as clusterctl init labels the
// components it installs; edit may change a CRD first (a provider of
// another version).
func installCRDs(t testing.TB, cfg *rest.Config, edit func(*apiextensionsv1.CustomResourceDefinition)) {
	t.Helper()
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range crdFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		labels := crd.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		if crd.Spec.Group != "clusterctl.cluster.x-k8s.io" {
			labels["clusterctl.cluster.x-k8s.io"] = ""
		}
		crd.SetLabels(labels)
		if edit != nil {
			edit(crd)
		}
		crds = append(crds, crd)
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: crds, MaxTime: 3 * time.Minute}); err != nil {
		t.Fatalf("installing the Cluster API CRDs: %v", err)
	}
}

func newClient(t testing.TB, cfg *rest.Config) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Site is one slot's management cluster under test.
type Site struct {
	Slot       string
	Kubeconfig string // a file holding Context only
	Context    string
	Config     *rest.Config
	Client     client.Client
}

// StartSite starts an API server with the Cluster API CRDs (edited by
// edit) and clusterctl's provider inventory, and writes its kubeconfig.
func StartSite(t testing.TB, slot string, edit func(*apiextensionsv1.CustomResourceDefinition)) *Site {
	t.Helper()
	ctrllog.SetLogger(logr.Discard())
	cfg := testenv.Start(t)
	installCRDs(t, cfg, edit)
	data, err := testenv.Kubeconfig(cfg, "mgmt-"+slot)
	if err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig-"+slot)
	if err := os.WriteFile(kc, data, 0o600); err != nil {
		t.Fatal(err)
	}
	s := &Site{Slot: slot, Kubeconfig: kc, Context: "mgmt-" + slot, Config: cfg, Client: newClient(t, cfg)}
	s.providers(t)
	return s
}

// providers records the four providers in clusterctl's inventory, as
// clusterctl init does.
func (s *Site) providers(t testing.TB) {
	t.Helper()
	for _, p := range []struct{ name, ns, typ string }{
		{"cluster-api", "capi-system", "CoreProvider"},
		{"bootstrap-kubeadm", "capi-kubeadm-bootstrap-system", "BootstrapProvider"},
		{"control-plane-kubeadm", "capi-kubeadm-control-plane-system", "ControlPlaneProvider"},
		{"infrastructure-docker", "capd-system", "InfrastructureProvider"},
	} {
		s.apply(t, fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", p.ns), nil)
		s.apply(t, fmt.Sprintf(`apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3
kind: Provider
metadata:
  name: %s
  namespace: %s
  labels: {clusterctl.cluster.x-k8s.io: "", cluster.x-k8s.io/provider: %s}
providerName: %s
type: %s
version: v1.12.4
`, p.name, p.ns, p.name, strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(p.name, "bootstrap-"), "control-plane-"), "infrastructure-"), p.typ), nil)
	}
}

// apply creates the object in doc, owned by owners (created before), and
// returns it.
func (s *Site) apply(t testing.TB, doc string, owners []*unstructured.Unstructured, status ...map[string]any) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatalf("%v in\n%s", err, doc)
	}
	var refs []metav1.OwnerReference
	for i, o := range owners {
		refs = append(refs, metav1.OwnerReference{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Name: o.GetName(), UID: o.GetUID(),
			Controller: ptrTo(i == 0), BlockOwnerDeletion: ptrTo(true)})
	}
	u.SetOwnerReferences(refs)
	if err := s.Client.Create(context.Background(), u); err != nil {
		t.Fatalf("creating %s %s on slot %s: %v", u.GetKind(), u.GetName(), s.Slot, err)
	}
	for _, st := range status {
		u.Object["status"] = st
		if err := s.Client.Status().Update(context.Background(), u); err != nil {
			t.Fatalf("setting the status of %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	return u
}

func ptrTo[T any](v T) *T { return &v }

// Graph creates one provisioned workload cluster as CAPI, kubeadm and
// CAPD leave it: a Cluster with its DockerCluster and control plane, one
// control-plane Machine and one worker from a MachineDeployment, each
// with its DockerMachine and KubeadmConfig, the templates, and the
// kubeconfig, CA and bootstrap-data secrets, linked by owner references.
func (s *Site) Graph(t testing.TB, ns, name string) {
	t.Helper()
	s.apply(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}\n", nil)
	r := strings.NewReplacer("NS", ns, "WL", name)
	a := func(doc string, owners []*unstructured.Unstructured, status ...map[string]any) *unstructured.Unstructured {
		return s.apply(t, r.Replace(doc), owners, status...)
	}
	on := func(o ...*unstructured.Unstructured) []*unstructured.Unstructured { return o }
	cl := a(`apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata: {name: WL, namespace: NS}
spec:
  clusterNetwork: {pods: {cidrBlocks: [192.168.0.0/16]}, services: {cidrBlocks: [10.128.0.0/12]}}
  controlPlaneRef: {apiGroup: controlplane.cluster.x-k8s.io, kind: KubeadmControlPlane, name: WL-control-plane}
  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerCluster, name: WL}
`, nil, clusterStatus)
	a(`apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DockerCluster
metadata: {name: WL, namespace: NS, labels: {cluster.x-k8s.io/cluster-name: WL}}
spec: {}
`, on(cl))
	cpTmpl := a(`apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DockerMachineTemplate
metadata: {name: WL-control-plane, namespace: NS}
spec: {template: {spec: {extraMounts: [{containerPath: /var/run/docker.sock, hostPath: /var/run/docker.sock}]}}}
`, on(cl))
	kcp := a(`apiVersion: controlplane.cluster.x-k8s.io/v1beta2
kind: KubeadmControlPlane
metadata: {name: WL-control-plane, namespace: NS, labels: {cluster.x-k8s.io/cluster-name: WL}}
spec:
  replicas: 1
  version: v1.34.0
  machineTemplate: {spec: {infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerMachineTemplate, name: WL-control-plane}}}
  kubeadmConfigSpec: {format: cloud-config}
`, on(cl))
	_ = cpTmpl
	a(`apiVersion: v1
kind: Secret
metadata: {name: WL-ca, namespace: NS, labels: {cluster.x-k8s.io/cluster-name: WL}}
type: cluster.x-k8s.io/secret
stringData: {tls.crt: CERT, tls.key: KEY}
`, on(kcp))
	a(`apiVersion: v1
kind: Secret
metadata: {name: WL-kubeconfig, namespace: NS, labels: {cluster.x-k8s.io/cluster-name: WL}}
type: cluster.x-k8s.io/secret
stringData: {value: KUBECONFIG}
`, on(kcp))
	md := a(`apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineDeployment
metadata: {name: WL-md-0, namespace: NS, labels: {cluster.x-k8s.io/cluster-name: WL}}
spec:
  clusterName: WL
  replicas: 1
  selector: {matchLabels: {cluster.x-k8s.io/deployment-name: WL-md-0}}
  template:
    metadata: {labels: {cluster.x-k8s.io/deployment-name: WL-md-0}}
    spec:
      clusterName: WL
      version: v1.34.0
      bootstrap: {configRef: {apiGroup: bootstrap.cluster.x-k8s.io, kind: KubeadmConfigTemplate, name: WL-md-0}}
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerMachineTemplate, name: WL-md-0}
`, on(cl))
	a(`apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfigTemplate
metadata: {name: WL-md-0, namespace: NS}
spec: {template: {spec: {format: cloud-config}}}
`, on(cl))
	a(`apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DockerMachineTemplate
metadata: {name: WL-md-0, namespace: NS}
spec: {template: {spec: {}}}
`, on(cl))
	ms := a(`apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineSet
metadata: {name: WL-md-0-x7k2p, namespace: NS, labels: {cluster.x-k8s.io/cluster-name: WL, cluster.x-k8s.io/deployment-name: WL-md-0}}
spec:
  clusterName: WL
  replicas: 1
  selector: {matchLabels: {cluster.x-k8s.io/deployment-name: WL-md-0}}
  template:
    metadata: {labels: {cluster.x-k8s.io/deployment-name: WL-md-0}}
    spec:
      clusterName: WL
      version: v1.34.0
      bootstrap: {configRef: {apiGroup: bootstrap.cluster.x-k8s.io, kind: KubeadmConfigTemplate, name: WL-md-0}}
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerMachineTemplate, name: WL-md-0}
`, on(md))
	for _, m := range []struct {
		name  string
		owner *unstructured.Unstructured
	}{{"WL-control-plane-9hq4d", kcp}, {"WL-md-0-x7k2p-lz8wv", ms}} {
		mr := strings.NewReplacer("MACHINE", m.name)
		machine := a(mr.Replace(`apiVersion: cluster.x-k8s.io/v1beta2
kind: Machine
metadata: {name: MACHINE, namespace: NS, labels: {cluster.x-k8s.io/cluster-name: WL}}
spec:
  clusterName: WL
  version: v1.34.0
  bootstrap: {configRef: {apiGroup: bootstrap.cluster.x-k8s.io, kind: KubeadmConfig, name: MACHINE}, dataSecretName: MACHINE}
  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerMachine, name: MACHINE}
`), on(m.owner), machineStatus(r.Replace(m.name)))
		a(mr.Replace(`apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DockerMachine
metadata: {name: MACHINE, namespace: NS, labels: {cluster.x-k8s.io/cluster-name: WL}}
spec: {providerID: docker:////MACHINE}
`), on(machine))
		kc := a(mr.Replace(`apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfig
metadata: {name: MACHINE, namespace: NS, labels: {cluster.x-k8s.io/cluster-name: WL}}
spec: {format: cloud-config}
`), on(machine))
		a(mr.Replace(`apiVersion: v1
kind: Secret
metadata: {name: MACHINE, namespace: NS, labels: {cluster.x-k8s.io/cluster-name: WL}}
type: cluster.x-k8s.io/secret
stringData: {value: BOOTSTRAP, format: cloud-config}
`), on(kc))
	}
}

// clusterStatus is a provisioned Cluster's status, as CAPI's controllers
// write it (the mover moves only provisioned clusters).
var clusterStatus = map[string]any{
	"initialization": map[string]any{"infrastructureProvisioned": true, "controlPlaneInitialized": true},
	"conditions": []any{map[string]any{"type": "ControlPlaneInitialized", "status": "True", "reason": "Initialized", "message": "",
		"lastTransitionTime": "2026-01-01T00:00:00Z"}},
}

func machineStatus(node string) map[string]any {
	return map[string]any{"nodeRef": map[string]any{"name": node}}
}

// Provisioned writes the status of the Clusters and Machines in ns as the
// providers of s rebuild it after a pivot (the mover moves spec, not
// status): without it they could not be moved again.
func (s *Site) Provisioned(t testing.TB, ns string) {
	t.Helper()
	for _, kind := range []string{"Cluster", "Machine"} {
		for _, o := range s.Objects(t, ns, kind) {
			o.Object["status"] = clusterStatus
			if kind == "Machine" {
				o.Object["status"] = machineStatus(o.GetName())
			}
			if err := s.Client.Status().Update(context.Background(), &o); err != nil {
				t.Fatalf("slot %s: writing the status of %s %s: %v", s.Slot, kind, o.GetName(), err)
			}
		}
	}
}

// GraphKinds are the kinds Graph creates and how many of each.
var GraphKinds = map[string]int{
	"Cluster": 1, "DockerCluster": 1, "KubeadmControlPlane": 1, "MachineDeployment": 1, "MachineSet": 1,
	"Machine": 2, "DockerMachine": 2, "KubeadmConfig": 2, "DockerMachineTemplate": 2, "KubeadmConfigTemplate": 1,
	"Secret": 4,
}

var kindVersions = map[string]string{
	"Cluster": "cluster.x-k8s.io/v1beta2", "MachineDeployment": "cluster.x-k8s.io/v1beta2", "MachineSet": "cluster.x-k8s.io/v1beta2",
	"Machine": "cluster.x-k8s.io/v1beta2", "DockerCluster": capdv1.GroupVersion.String(), "DockerMachine": capdv1.GroupVersion.String(),
	"DockerMachineTemplate": capdv1.GroupVersion.String(), "KubeadmControlPlane": "controlplane.cluster.x-k8s.io/v1beta2",
	"KubeadmConfig": "bootstrap.cluster.x-k8s.io/v1beta2", "KubeadmConfigTemplate": "bootstrap.cluster.x-k8s.io/v1beta2", "Secret": "v1",
}

// Objects lists the workload objects of kind in ns on s.
func (s *Site) Objects(t testing.TB, ns, kind string) []unstructured.Unstructured {
	t.Helper()
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion(kindVersions[kind])
	l.SetKind(kind + "List")
	if err := s.Client.List(context.Background(), l, client.InNamespace(ns)); err != nil {
		t.Fatalf("listing %s on slot %s: %v", kind, s.Slot, err)
	}
	return l.Items
}

// RequireWhole fails unless s holds graph's objects in ns exactly once,
// every owner reference naming an object of s by its uid there, and the
// Cluster unpaused; and other holds none of them.
func RequireWhole(t testing.TB, s, other *Site, ns string) {
	t.Helper()
	uids := map[string]string{}
	var all []unstructured.Unstructured
	for kind, want := range GraphKinds {
		objs := s.Objects(t, ns, kind)
		if len(objs) != want {
			t.Errorf("slot %s has %d %s in %s, want %d", s.Slot, len(objs), kind, ns, want)
		}
		for _, o := range objs {
			uids[o.GetKind()+"/"+o.GetName()] = string(o.GetUID())
		}
		all = append(all, objs...)
		if n := len(other.Objects(t, ns, kind)); n != 0 {
			t.Errorf("slot %s still has %d %s in %s, want none", other.Slot, n, kind, ns)
		}
	}
	owned := 0
	for _, o := range all {
		for _, ref := range o.GetOwnerReferences() {
			owned++
			if uid, ok := uids[ref.Kind+"/"+ref.Name]; !ok || uid != string(ref.UID) {
				t.Errorf("slot %s: %s %s is owned by %s %s uid %s, which is not that object's uid there (%q)", s.Slot, o.GetKind(), o.GetName(), ref.Kind, ref.Name, ref.UID, uid)
			}
		}
	}
	if owned != 17 {
		t.Errorf("slot %s: %d owner references, want 17 (every object but the Cluster owned)", s.Slot, owned)
	}
	for _, c := range s.Objects(t, ns, "Cluster") {
		if p, _, _ := unstructured.NestedBool(c.Object, "spec", "paused"); p {
			t.Errorf("slot %s: Cluster %s is still paused", s.Slot, c.GetName())
		}
	}
}
