package pivot_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/pivot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/pivot/pivottest"
)

// TestPreflightRefusesAnUnmovedLoadBalancerTemplate: on real CAPD the
// pivot left the ConfigMap that the DockerCluster names as its load
// balancer template (customHAProxyConfigTemplateRef) on slot a, owned by
// nothing (docs/experiments.md, experiment (d)); slot b's CAPD reads it
// for every load balancer update, so no control-plane machine of the
// moved cluster could be created or deleted there. Before, the preflight
// passed; now it refuses (exit 3) naming the ConfigMap, and passes once
// the ConfigMap is owned by the Cluster (the mover takes it) or is on
// slot b.
func TestPreflightRefusesAnUnmovedLoadBalancerTemplate(t *testing.T) {
	ctx := context.Background()
	a, b := pivottest.StartSite(t, "a", nil), pivottest.StartSite(t, "b", nil)
	const ns = "wl"
	a.Graph(t, ns, "airgap-wl-a")
	from := pivot.Endpoint{Slot: "a", Kubeconfig: a.Kubeconfig, Context: a.Context}
	to := pivot.Endpoint{Slot: "b", Kubeconfig: b.Kubeconfig, Context: b.Context}

	dcs := a.Objects(t, ns, "DockerCluster")
	if len(dcs) != 1 {
		t.Fatalf("%d DockerClusters", len(dcs))
	}
	dc := &dcs[0]
	if err := unstructured.SetNestedField(dc.Object, "lb-template", "spec", "loadBalancer", "customHAProxyConfigTemplateRef", "name"); err != nil {
		t.Fatal(err)
	}
	if err := a.Client.Update(ctx, dc); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lb-template"}, Data: map[string]string{"value": "global\n"}}
	if err := a.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}

	plan, err := pivot.Preflight(ctx, from, to, "")
	if err != nil {
		t.Fatal(err)
	}
	err = plan.Check(false)
	var ue *pivot.UnmovedError
	if !errors.As(err, &ue) || errkind.Of(err) != errkind.Environment {
		t.Fatalf("plan %+v: check %v, want an UnmovedError (exit 3)", plan, err)
	}
	for _, want := range []string{"ConfigMap wl/lb-template", "DockerCluster wl/airgap-wl-a", "ownerReference", "nothing was paused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}

	// On slot b too: nothing is left behind that b lacks.
	if err := b.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	onB := cm.DeepCopy()
	onB.ResourceVersion, onB.UID = "", ""
	if err := b.Client.Create(ctx, onB); err != nil {
		t.Fatal(err)
	}
	if plan, err = pivot.Preflight(ctx, from, to, ""); err != nil || plan.Check(false) != nil {
		t.Errorf("template on slot b: %v, %v", err, plan.Check(false))
	}
	if err := b.Client.Delete(ctx, onB); err != nil {
		t.Fatal(err)
	}

	// Owned by the Cluster: the mover moves it with its owner.
	cl := a.Objects(t, ns, "Cluster")[0]
	cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: cl.GetAPIVersion(), Kind: "Cluster", Name: cl.GetName(), UID: cl.GetUID()}}
	if err := a.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if plan, err = pivot.Preflight(ctx, from, to, ""); err != nil || plan.Check(false) != nil {
		t.Errorf("owned template: %v, %v", err, plan.Check(false))
	}
}
