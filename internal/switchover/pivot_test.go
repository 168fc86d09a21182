package switchover

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/pivot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/pivot/mover"
	"github.com/kubectl-bundle/kubectl-bundle/internal/pivot/pivottest"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
	"github.com/kubectl-bundle/kubectl-bundle/internal/runner"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
	"github.com/kubectl-bundle/kubectl-bundle/internal/testenv"
)

// pivotSite is two real API servers holding the Cluster API, kubeadm and
// CAPD CRDs as slots a and b (existing provider, gated), a workload
// cluster's objects on a, and a Switcher (with the mover) switched to a.
func pivotSite(t *testing.T) (a, b *pivottest.Site, s *Switcher, log *strings.Builder) {
	t.Helper()
	a, b = pivottest.StartSite(t, "a", nil), pivottest.StartSite(t, "b", nil)
	a.Graph(t, pivotNS, "airgap-wl-a")
	root := t.TempDir()
	d, err := state.Open(filepath.Join(root, "state"))
	if err != nil {
		t.Fatal(err)
	}
	// The commands printed find this state dir by themselves (no
	// KUBECTL_BUNDLE_STATE_DIR in them).
	t.Setenv(state.EnvStateDir, d.Path)
	kubeconfig := filepath.Join(root, "kubeconfig")
	data, err := testenv.Kubeconfigs(map[string]*rest.Config{"kind-airgap-mgmt-a": a.Config, "kind-airgap-mgmt-b": b.Config})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kubeconfig, data, 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for _, sl := range []string{"a", "b"} {
		rec := &slot.Record{Name: sl, Provider: "existing", Context: "kind-airgap-mgmt-" + sl, State: slot.StateReady,
			Gate: &slot.GateResult{Gate: "default", Passed: true, Time: now}}
		if err := slot.Save(d, rec); err != nil {
			t.Fatal(err)
		}
	}
	log = &strings.Builder{}
	s = &Switcher{Dir: d, Run: runner.Exec{}, Journal: journal.New(d), AliasContext: "kind-airgap-mgmt", Kubeconfig: kubeconfig,
		SoakWindow: time.Hour, MaxGateAge: time.Hour, Log: log, Pivot: mover.Run,
		GateBack: func(context.Context, string) error { return nil }}
	if _, err := s.To(context.Background(), "a", false); err != nil {
		t.Fatal(err)
	}
	return a, b, s, log
}

// pivotNS is the namespace of pivotSite's workload cluster.
const pivotNS = "airgap-workloads"

// TestSwitchPivotAndBack switches from slot a to slot b with --mode pivot
// on two real API servers holding the Cluster API, kubeadm and CAPD CRDs:
// the workload cluster's objects move to b and the pointer follows; back
// during the soak moves them to a again; a switch whose target no longer
// serves a moved kind is refused before the pointer or any object moves.
func TestSwitchPivotAndBack(t *testing.T) {
	a, b, s, log := pivotSite(t)
	ctx := context.Background()

	s.Mode = journal.SwitchPivot
	sw, err := s.To(ctx, "b", false)
	if err != nil {
		t.Fatalf("switch to b --mode pivot: %v\n%s", err, log.String())
	}
	if sw.Mode != journal.SwitchPivot || sw.Previous != "a" || s.Pivoted() == nil || s.Pivoted().Moved < 18 {
		t.Errorf("switch record %+v, pivoted %+v: want mode pivot from a with the 18 objects", sw, s.Pivoted())
	}
	pivottest.RequireWhole(t, b, a, pivotNS)
	if act, _ := site.Read(s.Dir).Active(); act != "b" {
		t.Errorf("active = %q after the pivot, want b", act)
	}
	// The moved cluster's containers are slot b's to manage: slot a's
	// retire must leave them (TestDestroyAfterPivotLeavesTheMovedWorkloadCluster).
	requireMoved(t, s, []string{"airgap-wl-a"})
	if !strings.Contains(log.String(), "revertible: slot a serves") {
		t.Errorf("the switch did not say the pivot is revertible before it:\n%s", log.String())
	}
	h, err := journal.ReadHistory(s.Dir.Join(journal.Dir, journal.HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	var phases []string
	for _, ev := range h.Events {
		if ev.Type == "pivot" {
			phases = append(phases, ev.Detail+" "+ev.Status)
		}
	}
	if got := strings.Join(phases, "\n"); !strings.Contains(got, "pivot a -> b: COPYING started") || !strings.Contains(got, "pivot a -> b: UNPAUSING done") {
		t.Errorf("the history does not record the pivot's phases:\n%s", got)
	}

	// A revert during the soak moves the objects back.
	b.Provisioned(t, pivotNS) // slot b's providers rebuild the status
	s.Mode = journal.SwitchS2 // back follows the switch record, not the flag
	if _, err := s.Back(ctx, false); err != nil {
		t.Fatalf("back: %v\n%s", err, log.String())
	}
	pivottest.RequireWhole(t, a, b, pivotNS)
	if act, _ := site.Read(s.Dir).Active(); act != "a" {
		t.Errorf("active = %q after back, want a", act)
	}
	requireMoved(t, s, nil)

	// Slot b loses the DockerMachine kind (a package whose CAPD does not
	// serve it): the next pivot is refused before anything moves.
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "dockermachines.infrastructure.cluster.x-k8s.io"}}
	if err := b.Client.Delete(ctx, crd); err != nil {
		t.Fatal(err)
	}
	if err := waitGone(ctx, b, crd); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(s.Dir.Join(record.SwitchFile))
	s.Mode = journal.SwitchPivot
	_, err = s.To(ctx, "b", false)
	var ue *pivot.UnservedError
	if !errors.As(err, &ue) || errkind.Of(err) != errkind.Environment || !strings.Contains(err.Error(), "infrastructure.cluster.x-k8s.io/v1beta2, Kind=DockerMachine") {
		t.Fatalf("switch to b --mode pivot with b not serving DockerMachine: %v, want exit 3 naming it", err)
	}
	if act, _ := site.Read(s.Dir).Active(); act != "a" {
		t.Errorf("active = %q after the refused pivot, want a", act)
	}
	if after, _ := os.ReadFile(s.Dir.Join(record.SwitchFile)); string(after) != string(before) {
		t.Errorf("the refused pivot rewrote switch.json:\n%s", after)
	}
	if n, m := len(a.Objects(t, pivotNS, "Machine")), len(b.Objects(t, pivotNS, "Cluster")); n != 2 || m != 0 {
		t.Errorf("after the refused pivot slot a has %d Machines (want 2) and slot b %d Clusters (want 0)", n, m)
	}
}

// requireMoved fails unless slot b's record says the pivot moved clusters
// in and slot a's that it moved them out (none: neither says anything).
func requireMoved(t *testing.T, s *Switcher, clusters []string) {
	t.Helper()
	a, errA := slot.Load(s.Dir, "a")
	b, errB := slot.Load(s.Dir, "b")
	if errA != nil || errB != nil {
		t.Fatalf("slot records: %v, %v", errA, errB)
	}
	if !slices.Equal(a.MovedOut, clusters) || !slices.Equal(b.MovedIn, clusters) || len(a.MovedIn)+len(b.MovedOut) != 0 {
		t.Errorf("slot a moved in %v, out %v; slot b moved in %v, out %v; want %v moved from a to b", a.MovedIn, a.MovedOut, b.MovedIn, b.MovedOut, clusters)
	}
}

func waitGone(ctx context.Context, s *pivottest.Site, crd *apiextensionsv1.CustomResourceDefinition) error {
	for range 300 {
		err := s.Client.Get(ctx, client.ObjectKey{Name: crd.Name}, crd)
		if err != nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("the CRD was not removed within 30s")
}
