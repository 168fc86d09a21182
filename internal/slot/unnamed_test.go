package slot_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/pivot/pivottest"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
)

// TestLossesRefuseUnnamedWorkloadClusters: slot a's management cluster
// (a real API server with the Cluster API CRDs) holds Cluster airgap-wl-a,
// which config.yaml's workloadClusters names, and airgap-extra, which it
// does not. Destroying the slot removes only the named cluster's
// containers; on real CAPD the other one's kept running, owned by nothing,
// and the rebuilt management cluster applying it again started a second
// control plane beside it (docs/experiments.md, experiments (a), (e)).
// Before, slot losses listed nothing of airgap-extra and recreate's
// teardown went on; now losses names it and refuses (exit 3, --yes does
// not pass), and the refusal says what to do.
func TestLossesRefuseUnnamedWorkloadClusters(t *testing.T) {
	m, _ := newManager(t)
	ctx := context.Background()
	if _, err := m.Create(ctx, "a", slot.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	site := pivottest.StartSite(t, "a", nil)
	rec, err := slot.Load(m.Dir, "a")
	if err != nil {
		t.Fatal(err)
	}
	rec.Kubeconfig, rec.Context = site.Kubeconfig, site.Context
	if err := slot.Save(m.Dir, rec); err != nil {
		t.Fatal(err)
	}

	l, err := m.Losses(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Unnamed) != 0 || l.Refusal() != nil {
		t.Fatalf("no Clusters yet: unnamed %v, refusal %v", l.Unnamed, l.Refusal())
	}

	site.Graph(t, "site", "airgap-wl-a")
	site.Graph(t, "team", "airgap-extra-a")
	if l, err = m.Losses(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l.Unnamed, []string{"airgap-extra-a"}) || l.Empty() {
		t.Fatalf("unnamed %v (unknown: %q), want [airgap-extra-a]", l.Unnamed, l.WorkloadsUnknown)
	}
	if !strings.Contains(l.Summary(), "airgap-extra-a (not named by workloadClusters: left running)") {
		t.Errorf("summary: %s", l.Summary())
	}
	err = l.Refusal()
	var ue *slot.UnnamedError
	if !errors.As(err, &ue) || errkind.Of(err) != errkind.Environment {
		t.Fatalf("refusal %v, want an UnnamedError (exit 3)", err)
	}
	for _, want := range []string{"airgap-extra-a", "workloadClusters", "second control plane", "kubectl delete cluster.cluster.x-k8s.io"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}

	// Once workloadClusters names it (base name airgap-extra, which slot
	// a suffixes), it is one of the slot's workload clusters: listed as
	// a loss, not refused.
	m.Config.WorkloadClusters = append(m.Config.WorkloadClusters, "airgap-extra")
	if l, err = m.Losses(ctx, "a"); err != nil || l.Refusal() != nil {
		t.Errorf("named: refusal %v (%v)", l.Refusal(), err)
	}
}
