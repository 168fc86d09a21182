package slot

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// TestKindEntriesMergedAndRemovedByRename: what kind wrote for a cluster
// is merged into the shared kubeconfig, and removed from it, by replacing
// the file (a new inode: a reader never sees it half written); the alias
// context and every other entry stay.
func TestKindEntriesMergedAndRemovedByRename(t *testing.T) {
	dir := t.TempDir()
	shared, private := filepath.Join(dir, "config"), filepath.Join(dir, "kind")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kind-x-a"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	cfg.AuthInfos["kind-x-a"] = &clientcmdapi.AuthInfo{Token: "a"}
	cfg.Contexts["kind-x-a"] = &clientcmdapi.Context{Cluster: "kind-x-a", AuthInfo: "kind-x-a"}
	cfg.Contexts["kind-x"] = &clientcmdapi.Context{Cluster: "kind-x-a", AuthInfo: "kind-x-a"}
	cfg.CurrentContext = "kind-x"
	if err := clientcmd.WriteToFile(*cfg, shared); err != nil {
		t.Fatal(err)
	}
	kind := clientcmdapi.NewConfig()
	kind.Clusters["kind-x-b"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:2"}
	kind.AuthInfos["kind-x-b"] = &clientcmdapi.AuthInfo{Token: "b"}
	kind.Contexts["kind-x-b"] = &clientcmdapi.Context{Cluster: "kind-x-b", AuthInfo: "kind-x-b"}
	if err := clientcmd.WriteToFile(*kind, private); err != nil {
		t.Fatal(err)
	}
	before := inode(t, shared)
	if err := mergeKindEntries(shared, private, "x-b"); err != nil {
		t.Fatal(err)
	}
	if inode(t, shared) == before {
		t.Error("the shared kubeconfig was written in place, not replaced")
	}
	got, err := clientcmd.LoadFromFile(shared)
	if err != nil {
		t.Fatal(err)
	}
	if got.Clusters["kind-x-b"] == nil || got.AuthInfos["kind-x-b"].Token != "b" || got.Contexts["kind-x"] == nil || got.Contexts["kind-x-a"] == nil || got.CurrentContext != "kind-x-b" {
		t.Fatalf("after the merge: %+v", got)
	}
	before = inode(t, shared)
	if err := removeKindEntries(shared, "x-b"); err != nil {
		t.Fatal(err)
	}
	if inode(t, shared) == before {
		t.Error("the shared kubeconfig was written in place, not replaced")
	}
	got, err = clientcmd.LoadFromFile(shared)
	if err != nil {
		t.Fatal(err)
	}
	if got.Clusters["kind-x-b"] != nil || got.Contexts["kind-x-b"] != nil || got.AuthInfos["kind-x-b"] != nil || got.Contexts["kind-x"] == nil || got.CurrentContext != "" {
		t.Fatalf("after the removal: %+v", got)
	}
	// Removing again, or from a missing file, is not an error.
	if err := removeKindEntries(shared, "x-b"); err != nil {
		t.Error(err)
	}
	if err := removeKindEntries(filepath.Join(dir, "none"), "x-b"); err != nil {
		t.Error(err)
	}
}
