package slot_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
)

// existingKubeconfig writes a kubeconfig with the contexts east and west,
// each naming the cluster of the server given for it.
func existingKubeconfig(t *testing.T, path, eastServer, westServer string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Config\nclusters:\n")
	for _, c := range [][2]string{{"east", eastServer}, {"west", westServer}} {
		fmt.Fprintf(&b, "- name: %s\n  cluster: {server: %q}\n", c[0], c[1])
	}
	b.WriteString("users:\n- name: op\n  user: {token: fake}\ncontexts:\n")
	for _, c := range []string{"east", "west"} {
		fmt.Fprintf(&b, "- name: %s\n  context: {cluster: %s, user: op}\n", c, c)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestIdentifierStandsForTheAPIServer: with an Identifier in the context
// (slot.WithIdentifier, what the in-process model uses), the existing
// provider's preflight, create and checks identify each cluster through
// it and contact no API server: a context copied from slot a's is refused
// by slot b's preflight, and slot a, its context pointed at another
// cluster after create, is refused before a deploy.
func TestIdentifierStandsForTheAPIServer(t *testing.T) {
	m, _ := newManager(t)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	existingKubeconfig(t, kc, "https://east.invalid", "https://west.invalid")
	m.Config.Provider = slot.ProviderExisting
	m.Config.Existing = map[string]slot.ExistingSlot{"a": {Context: "east", Kubeconfig: kc}, "b": {Context: "west", Kubeconfig: kc}}
	uids := map[string]string{"https://east.invalid": "uid-east", "https://west.invalid": "uid-west"}
	asked := 0
	ctx := slot.WithIdentifier(context.Background(), func(_ context.Context, cfg *rest.Config) (*slot.ClusterID, error) {
		asked++
		uid, ok := uids[cfg.Host]
		if !ok {
			return nil, fmt.Errorf("no cluster at %s", cfg.Host)
		}
		return &slot.ClusterID{Server: cfg.Host, KubeSystemUID: uid}, nil
	})
	rec, err := m.Create(ctx, "a", slot.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rec.ClusterID == nil || rec.ClusterID.KubeSystemUID != "uid-east" {
		t.Fatalf("slot a's recorded cluster = %v, want the identifier's uid-east", rec.ClusterID)
	}
	// A copy-paste: slot b is given slot a's context.
	m.Config.Existing["b"] = slot.ExistingSlot{Context: "east", Kubeconfig: kc}
	rep, err := m.Preflight(ctx, "b", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Blocked || !strings.Contains(fmt.Sprint(rep.Findings), "slots a and b would be one cluster") {
		t.Errorf("preflight of b with a's context: blocked=%v %v, want refused as one cluster", rep.Blocked, rep.Findings)
	}
	m.Config.Existing["b"] = slot.ExistingSlot{Context: "west", Kubeconfig: kc}
	if rep, err = m.Preflight(ctx, "b", 0); err != nil || rep.Blocked {
		t.Errorf("preflight of b with its own context: %v %v, want it to pass", err, rep.Findings)
	}
	// Slot a's context now names the other cluster.
	existingKubeconfig(t, kc, "https://west.invalid", "https://west.invalid")
	var moved *slot.ClusterMovedError
	if err := m.CheckCluster(ctx, rec, "deploy into"); !errors.As(err, &moved) {
		t.Errorf("check of slot a, its context moved: %v, want a ClusterMovedError", err)
	}
	if asked == 0 {
		t.Error("the identifier was never asked")
	}
}

// TestPreflightMeetsADamagedRecordFirst (found by TestModel): slot b's
// record damaged, preflight took b for a slot without a record and
// refused its containers as leftovers no record claims, naming no repair
// of the record. It returns the record's damage, whose repair is slot
// repair b.
func TestPreflightMeetsADamagedRecordFirst(t *testing.T) {
	m, _ := newManager(t)
	if err := os.MkdirAll(filepath.Dir(m.Dir.Join("slots", "b.json")), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m.Dir.Join("slots", "b.json"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := m.Preflight(context.Background(), "b", 0)
	var dmg *slot.DamagedError
	if !errors.As(err, &dmg) || !strings.Contains(err.Error(), "kubectl bundle-slot ") {
		t.Fatalf("preflight of b with its record damaged: %v, %v; want the record's damage naming its repair", rep, err)
	}
}

// TestRecreateRebuildsOnItsOwnCluster (found by TestModel): config.yaml's
// contexts swapped after a recreate began; the recreate tore slot a down
// on its cluster and built it on the other one. Before the teardown the
// rebuild check refuses a config that names another context than the
// record's; after it, create refuses a context that reaches another
// cluster than the one torn down, and builds once it is put back.
func TestRecreateRebuildsOnItsOwnCluster(t *testing.T) {
	m, _ := newManager(t)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	existingKubeconfig(t, kc, "https://east.invalid", "https://west.invalid")
	m.Config.Provider = slot.ProviderExisting
	own := map[string]slot.ExistingSlot{"a": {Context: "east", Kubeconfig: kc}, "b": {Context: "west", Kubeconfig: kc}}
	swapped := map[string]slot.ExistingSlot{"a": {Context: "west", Kubeconfig: kc}, "b": {Context: "east", Kubeconfig: kc}}
	m.Config.Existing = own
	m.Journal = journal.New(m.Dir) // the identities go into the history
	uids := map[string]string{"https://east.invalid": "uid-east", "https://west.invalid": "uid-west"}
	ctx := slot.WithIdentifier(context.Background(), func(_ context.Context, cfg *rest.Config) (*slot.ClusterID, error) {
		return &slot.ClusterID{Server: cfg.Host, KubeSystemUID: uids[cfg.Host]}, nil
	})
	if _, err := m.Create(ctx, "a", slot.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Recreatable("a"); err != nil {
		t.Fatalf("Recreatable(a) with its own context: %v", err)
	}
	m.Config.Existing = swapped
	if err := m.Recreatable("a"); err == nil || !strings.Contains(err.Error(), "another cluster than its own") {
		t.Errorf("Recreatable(a), config swapped: %v; want a refusal", err)
	}
	m.Config.Existing = own
	if _, err := journal.New(m.Dir).Begin(journal.BeginOptions{Strategy: journal.Recreate, Target: strings.Repeat("1", 64), Slots: journal.Slots{Active: "a"}}); err != nil {
		t.Fatal(err)
	}
	if err := m.Destroy(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	m.Config.Existing = swapped
	if _, err := m.Create(ctx, "a", slot.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "tore it down on") {
		t.Fatalf("create of a on the other cluster during its recreate: %v; want a refusal", err)
	}
	m.Config.Existing = own
	rec, err := m.Create(ctx, "a", slot.CreateOptions{})
	if err != nil || rec.ClusterID == nil || rec.ClusterID.KubeSystemUID != "uid-east" {
		t.Fatalf("create of a on its own cluster: %+v, %v", rec, err)
	}
}
