package switchover

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func writeKubeconfig(t *testing.T, path string, contexts ...string) {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	for _, c := range contexts {
		kc.Clusters[c] = &clientcmdapi.Cluster{Server: "https://" + c + ".example:6443"}
		kc.AuthInfos[c] = &clientcmdapi.AuthInfo{Token: c}
		kc.Contexts[c] = &clientcmdapi.Context{Cluster: c, AuthInfo: c}
	}
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
}

// TestPointAliasHonoursKubeconfigList: with KUBECONFIG a list, the alias is
// written to the file that holds it (else the first), by reference to the
// slot's entries in another file, and nothing else changes.
func TestPointAliasHonoursKubeconfigList(t *testing.T) {
	dir := t.TempDir()
	first, second := filepath.Join(dir, "first"), filepath.Join(dir, "second")
	writeKubeconfig(t, first, "unrelated")
	writeKubeconfig(t, second, "kind-airgap-mgmt-a", "kind-airgap-mgmt-b")
	t.Setenv("KUBECONFIG", first+string(os.PathListSeparator)+second)

	// No alias yet: it goes into the first file.
	if err := pointAlias("", "kind-airgap-mgmt", "kind-airgap-mgmt-a"); err != nil {
		t.Fatal(err)
	}
	f1, _ := clientcmd.LoadFromFile(first)
	if c := f1.Contexts["kind-airgap-mgmt"]; c == nil || c.Cluster != "kind-airgap-mgmt-a" || c.AuthInfo != "kind-airgap-mgmt-a" {
		t.Fatalf("alias in the first file: %+v", f1.Contexts)
	}
	if f1.Contexts["unrelated"] == nil || f1.Clusters["unrelated"] == nil {
		t.Error("the first file lost its own entries")
	}
	got, err := aliasTarget("", "kind-airgap-mgmt", []string{"kind-airgap-mgmt-a", "kind-airgap-mgmt-b"})
	if err != nil || got != "kind-airgap-mgmt-a" {
		t.Errorf("alias target %q %v", got, err)
	}

	// Move the alias into the second file by hand: the next write goes there.
	f2, _ := clientcmd.LoadFromFile(second)
	f2.Contexts["kind-airgap-mgmt"] = f1.Contexts["kind-airgap-mgmt"]
	delete(f1.Contexts, "kind-airgap-mgmt")
	if err := clientcmd.WriteToFile(*f1, first); err != nil {
		t.Fatal(err)
	}
	if err := clientcmd.WriteToFile(*f2, second); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(first)
	if err := pointAlias("", "kind-airgap-mgmt", "kind-airgap-mgmt-b"); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(first)
	if string(before) != string(after) {
		t.Error("the first file changed although the alias lives in the second")
	}
	f2, _ = clientcmd.LoadFromFile(second)
	if c := f2.Contexts["kind-airgap-mgmt"]; c == nil || c.Cluster != "kind-airgap-mgmt-b" {
		t.Errorf("alias in the second file: %+v", f2.Contexts)
	}
	if len(f2.Contexts) != 3 || len(f2.Clusters) != 2 {
		t.Errorf("second file entries: %d contexts, %d clusters", len(f2.Contexts), len(f2.Clusters))
	}
	if err := pointAlias("", "kind-airgap-mgmt", "kind-nope"); err == nil {
		t.Error("pointing at a context that does not exist succeeded")
	}
}

// The switch moves kind-airgap-wl whether it names a suffixed cluster
// (airgap-wl-b) or an adopted site's cluster named as its alias, whose
// entries carry the slot (kind-airgap-wl@a); a cluster's own context is
// no alias.
func TestIsWorkloadAlias(t *testing.T) {
	cfg := clientcmdapi.NewConfig()
	for name, cluster := range map[string]string{
		"kind-airgap-wl":    "kind-airgap-wl@a",
		"kind-airgap-wl@a":  "kind-airgap-wl@a",
		"kind-other":        "kind-other-b",
		"kind-other-b":      "kind-other-b",
		"kind-airgap-wlx":   "kind-airgap-wlx",
		"kind-airgap-mgmt2": "kind-airgap-mgmt",
	} {
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: cluster}
	}
	for name, want := range map[string]bool{"kind-airgap-wl": true, "kind-airgap-wl@a": false, "kind-other": true, "kind-other-b": false, "kind-airgap-wlx": false, "kind-airgap-mgmt2": false, "kind-none": false} {
		if got := isWorkloadAlias(cfg, name); got != want {
			t.Errorf("isWorkloadAlias(%s) = %v, want %v", name, got, want)
		}
	}
}

// A workload alias merged before the entries carried the slot
// (kind-airgap-wl on cluster kind-airgap-wl) is moved when airgap-wl is a
// configured workload cluster, and only then.
func TestIsOldWorkloadAlias(t *testing.T) {
	cfg := clientcmdapi.NewConfig()
	for _, name := range []string{"kind-airgap-wl", "kind-other", "kind-airgap-mgmt-a"} {
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name}
	}
	cfg.Contexts["kind-moved"] = &clientcmdapi.Context{Cluster: "kind-elsewhere"}
	s := &Switcher{WorkloadAliases: []string{"airgap-wl", "moved"}}
	for name, want := range map[string]bool{"kind-airgap-wl": true, "kind-other": false, "kind-airgap-mgmt-a": false, "kind-moved": false, "kind-none": false} {
		if got := s.isOldWorkloadAlias(cfg, name); got != want {
			t.Errorf("isOldWorkloadAlias(%s) = %v, want %v", name, got, want)
		}
	}
	if (&Switcher{}).isOldWorkloadAlias(cfg, "kind-airgap-wl") {
		t.Error("no configured workload clusters: kind-airgap-wl taken for an alias")
	}
}
