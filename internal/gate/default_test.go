package gate

import (
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/dynamic"

	"github.com/kubectl-bundle/kubectl-bundle/internal/sitesim"
	"github.com/kubectl-bundle/kubectl-bundle/internal/testenv"
)

// TestDefaultGateOnHealthySite runs the built-in gate against two real API
// servers holding what a healthy krops site's controllers write, then
// breaks one thing at a time.
func TestDefaultGateOnHealthySite(t *testing.T) {
	mgmt := testenv.Start(t, crdDir())
	workload := testenv.Start(t, crdDir())
	// The secret names CAPD's address on the kind network, which this host
	// cannot reach; the gate must use Docker's published port instead.
	if err := sitesim.Healthy(context.Background(), mgmt, workload, sitesim.Site{WorkloadServer: "https://172.18.0.3:6443"}); err != nil {
		t.Fatal(err)
	}
	docker := &fakeDocker{port: strings.TrimPrefix(workload.Host, "https://127.0.0.1:")}
	c, err := NewCluster("", mgmt)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), Default(), c, Options{Once: true, Runner: docker})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rep.Checks {
		names = append(names, r.Name)
		if r.Status != Pass {
			t.Errorf("%s: %s %s %s", r.Name, r.Status, r.Reason, r.Message)
		}
	}
	want := "mgmt-images flux-source flux-source-url flux-kustomization workload-cluster workload workload/nodes workload/flux-source workload/podinfo zarf-packages zarf-packages/krops-airgap"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("rows %q\nwant %q", got, want)
	}
	if !rep.Passed || docker.calls.Load() == 0 {
		t.Errorf("passed %v, docker calls %d", rep.Passed, docker.calls.Load())
	}

	// One image from outside the Zarf registry fails only mgmt-images.
	s := &site{t: t, cfg: mgmt, ns: "flux-system"}
	if s.dyn, err = dynamic.NewForConfig(mgmt); err != nil {
		t.Fatal(err)
	}
	s.pod("intruder", nil, map[string][]string{"containers": {"ghcr.io/fluxcd/helm-controller:v1.3.0"}})
	rep, err = Run(context.Background(), Default(), c, Options{Once: true, Runner: docker})
	if err != nil {
		t.Fatal(err)
	}
	if f := rep.Failed(); len(f) != 1 || f[0].Name != "mgmt-images" || !strings.Contains(f[0].Message, "ghcr.io/fluxcd/helm-controller:v1.3.0 (flux-system/intruder)") {
		t.Errorf("failed %+v", f)
	}
}

// TestDefaultForSlot: the default gate checks the workload cluster of the
// slot under gate (airgap-wl-b with --slot b), and the site's fixed name
// without --slot.
func TestDefaultForSlot(t *testing.T) {
	for slot, want := range map[string]string{"b": "airgap-wl-b", "": "airgap-wl"} {
		g := Default().ForSlot(slot)
		var got []string
		for _, c := range g.Spec.Checks {
			if c.Resource != nil && c.Resource.Kind == "Cluster" {
				got = append(got, c.Resource.Name)
			}
			if c.Workload != nil {
				got = append(got, c.Workload.Cluster)
			}
		}
		if len(got) != 2 || got[0] != want || got[1] != want {
			t.Errorf("--slot %q: workload names %v, want %s twice", slot, got, want)
		}
	}
}

// TestManagementOnly: the built-in gate without the workload clusters'
// checks keeps every management check and drops exactly the Cluster API
// and workload ones.
func TestManagementOnly(t *testing.T) {
	g := Default()
	m, dropped := g.ManagementOnly()
	if got := strings.Join(dropped, ","); got != "workload-cluster,workload" {
		t.Errorf("dropped %q, want workload-cluster,workload", got)
	}
	var kept []string
	for _, c := range m.Spec.Checks {
		kept = append(kept, c.Name)
	}
	if got := strings.Join(kept, ","); got != "mgmt-images,flux-source,flux-source-url,flux-kustomization,zarf-packages" {
		t.Errorf("kept %q", got)
	}
	if len(g.Spec.Checks) != len(m.Spec.Checks)+2 {
		t.Errorf("the original gate changed: %d checks", len(g.Spec.Checks))
	}
	if _, err := m.Validate(); err != nil {
		t.Errorf("the management-only gate is not valid: %v", err)
	}
	for _, v := range []struct {
		apiVersion string
		want       bool
	}{{"cluster.x-k8s.io/v1beta2", true}, {"infrastructure.cluster.x-k8s.io/v1beta2", true}, {"controlplane.cluster.x-k8s.io/v1beta2", true},
		{"source.toolkit.fluxcd.io/v1", false}, {"v1", false}, {"notcluster.x-k8s.io/v1", false}} {
		if got := isCAPI(v.apiVersion); got != v.want {
			t.Errorf("isCAPI(%q) = %v, want %v", v.apiVersion, got, v.want)
		}
	}
}
