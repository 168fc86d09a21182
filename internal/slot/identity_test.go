package slot_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
)

// adoptedSite is the identity adopt records for offline-run.sh's site.
var adoptedSite = journal.SlotIdentity{Provider: slot.ProviderKind, Cluster: "airgap-mgmt", Context: "kind-airgap-mgmt-a",
	Registry: "krops-registry-airgap", RegistryPort: 5002, Inputs: "adopted", Adopted: true, Workloads: []string{"airgap-wl"}}

func history(t *testing.T, m *slot.Manager, evs ...journal.Event) {
	t.Helper()
	for _, ev := range evs {
		if err := m.Journal.Record(ev); err != nil {
			t.Fatal(err)
		}
	}
}

func slotEvent(detail, status string, id *journal.SlotIdentity) journal.Event {
	return journal.Event{Type: "slot", Slot: "a", Detail: detail, Status: status, Identity: id}
}

func run(t *testing.T, m *slot.Manager, args ...string) {
	t.Helper()
	if _, err := m.Run.Run(context.Background(), "docker", args...); err != nil {
		t.Fatal(err)
	}
}

// TestRepairRebuildsTheAdoptedSitesNames: the record of an adopted slot,
// lost or damaged, is rebuilt with the site's own names (cluster,
// registry, port, unsuffixed workload clusters) from the history's adopt,
// never with names derived from the slot's; with its package, which the
// adopt recorded. An adopt recorded before identities takes the site's
// default names.
func TestRepairRebuildsTheAdoptedSitesNames(t *testing.T) {
	for _, tc := range []struct {
		name  string
		id    *journal.SlotIdentity
		lost  bool
		check func(*slot.Record) bool
	}{
		{"damaged", &adoptedSite, false, func(r *slot.Record) bool { return r.RegistryPort == 5002 }},
		{"lost", &adoptedSite, true, func(r *slot.Record) bool { return r.RegistryPort == 5002 }},
		{"damaged, old history", nil, false, func(r *slot.Record) bool { return r.Inputs == "adopted" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newManager(t)
			m.Journal = journal.New(m.Dir)
			digest := stagePackage(t, m.Dir, "site package", true)
			ev := slotEvent("adopt", journal.StatusDone, tc.id)
			ev.Package = digest
			history(t, m, slotEvent("adopt", "started", nil), ev)
			run(t, m, "run", "-d", "--name", "airgap-mgmt-control-plane", "kindest/node")
			p := m.Dir.Join("slots", "a.json")
			if !tc.lost {
				if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte("{not json"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if !site.Read(m.Dir).Exists("a") {
				t.Fatal("an adopted slot does not exist per the history")
			}
			n, err := m.NamesOf("a")
			if err != nil || n.Cluster != "airgap-mgmt" || n.Registry != "krops-registry-airgap" || !n.Adopted {
				t.Fatalf("names of the adopted slot without its record: %+v, %v", n, err)
			}
			rep, err := m.RepairRecord(context.Background(), "a")
			if err != nil {
				t.Fatal(err)
			}
			r, err := slot.Load(m.Dir, "a")
			if err != nil {
				t.Fatal(err)
			}
			if r.Cluster != "airgap-mgmt" || r.Registry != "krops-registry-airgap" || !r.Adopted || r.Context != "kind-airgap-mgmt-a" ||
				!slices.Equal(r.Workloads, []string{"airgap-wl"}) || !tc.check(r) || !rep.FromHistory {
				t.Errorf("rebuilt record: %+v", r)
			}
			if r.Package == nil || r.Package.Digest != digest || r.Package.Name != "demo" {
				t.Errorf("rebuilt package: %+v, want the adopted %s", r.Package, digest)
			}
		})
	}
}

// TestRepairKeepsTheExistingProvider: an existing-provider slot created
// with --context, whose record is lost, is rebuilt against that context
// (the history's create says so), with the cluster identity its create
// recorded (not the one its context reaches by then), not looked for with
// the site's default provider and recorded as gone.
func TestRepairKeepsTheExistingProvider(t *testing.T) {
	m, _ := newManager(t)
	m.Journal = journal.New(m.Dir)
	kc := filepath.Join(t.TempDir(), "a.kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: a, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: a, user: {token: x}}]
contexts: [{name: ctx-a, context: {cluster: a, user: a}}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	id := &journal.SlotIdentity{Provider: slot.ProviderExisting, Context: "ctx-a", Kubeconfig: kc, Inputs: "x1",
		ClusterID: &journal.SlotClusterID{Server: "https://127.0.0.1:1", KubeSystemUID: "uid-a"}}
	history(t, m, slotEvent("create", "started", id), slotEvent("create", journal.StatusDone, id))
	rep, err := m.RepairRecord(context.Background(), "a")
	if err != nil {
		t.Fatalf("repair of a lost existing-provider record: %v", err)
	}
	r, _ := slot.Load(m.Dir, "a")
	if r == nil || r.Provider != slot.ProviderExisting || r.Context != "ctx-a" || r.Kubeconfig != kc || r.Inputs != "x1" ||
		r.ClusterID == nil || r.ClusterID.KubeSystemUID != "uid-a" || !slices.Contains(rep.Running, "kube context ctx-a") {
		t.Errorf("rebuilt record %+v, running %v", r, rep.Running)
	}
	// A history before identities: the settings decide (kind, nothing
	// runs): the slot is gone, as before.
	m2, _ := newManager(t)
	m2.Journal = journal.New(m2.Dir)
	history(t, m2, slotEvent("create", journal.StatusDone, nil))
	if _, err := m2.RepairRecord(context.Background(), "a"); !errors.As(err, new(*slot.GoneError)) {
		t.Errorf("old history, nothing running: %v, want *GoneError", err)
	}
}

// TestOwnershipOutlivesTheRecord: an S1 owner's workload clusters, kept
// in the history, still make it an owner when its record is removed or
// damaged; its readable record decides otherwise; destroy ends it.
func TestOwnershipOutlivesTheRecord(t *testing.T) {
	m, _ := newManager(t)
	m.Journal = journal.New(m.Dir)
	rec, err := m.Create(context.Background(), "a", slot.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec.OwnsWorkloads = []string{"airgap-wl-a"}
	if err := slot.Save(m.Dir, rec); err != nil {
		t.Fatal(err)
	}
	history(t, m, slot.IdentityEvent(rec, record.DetailOwns, journal.StatusDone))
	owners := func() string { return strings.Join(site.Read(m.Dir).WorkloadOwners()["a"], ",") }
	if got := owners(); got != "airgap-wl-a" {
		t.Errorf("with the record: %q", got)
	}
	p := m.Dir.Join("slots", "a.json")
	if err := os.WriteFile(p, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := owners(); got != "airgap-wl-a" {
		t.Errorf("record damaged: %q", got)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if got := owners(); got != "airgap-wl-a" {
		t.Errorf("record removed: %q", got)
	}
	if _, err := m.RepairRecord(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if r, err := slot.Load(m.Dir, "a"); err != nil || !slices.Equal(r.OwnsWorkloads, []string{"airgap-wl-a"}) {
		t.Errorf("repaired record: %+v, %v", r, err)
	}
	if err := m.Destroy(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if got := owners(); got != "" || site.Read(m.Dir).Exists("a") {
		t.Errorf("after destroy: owners %q, exists %v", got, site.Read(m.Dir).Exists("a"))
	}
}

// TestFailedAdoptCreatesNothing: only a completed adopt makes the slot
// exist per the history.
func TestFailedAdoptCreatesNothing(t *testing.T) {
	m, _ := newManager(t)
	m.Journal = journal.New(m.Dir)
	history(t, m, slotEvent("adopt", "started", nil), slotEvent("adopt", "failed", nil))
	if site.Read(m.Dir).Exists("a") {
		t.Error("a failed adopt made slot a exist")
	}
}
