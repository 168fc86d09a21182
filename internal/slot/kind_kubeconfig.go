package slot

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// kind writes a kubeconfig in place (truncate, then write): a kubectl that
// reads the file meanwhile finds it empty or cut, and a request through the
// alias context, which lives in the same file, fails (measured: 1-2 failed
// requests of a 2/s loop while a blue-green apply created or a revert
// deleted a slot's cluster). So kind is given a private file, and its
// entries are merged into, or removed from, the shared file by an atomic
// rename.

// kindEntry is the name kind gives a cluster's context, cluster and user.
func kindEntry(cluster string) string { return "kind-" + cluster }

// kubeconfigTarget is the file kind would have written: explicit, else the
// first file of $KUBECONFIG, else ~/.kube/config.
func kubeconfigTarget(explicit string) string {
	if explicit != "" {
		return explicit
	}
	return clientcmd.NewDefaultPathOptions().GetDefaultFilename()
}

// LoadKubeconfig loads a kubeconfig file; a missing one is empty.
func LoadKubeconfig(path string) (*clientcmdapi.Config, error) {
	cfg, err := clientcmd.LoadFromFile(path)
	if os.IsNotExist(err) {
		return clientcmdapi.NewConfig(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", path, err)
	}
	return cfg, nil
}

// WriteKubeconfig replaces a kubeconfig file atomically (a reader sees
// the old file or the new one, never a cut one).
func WriteKubeconfig(path string, cfg *clientcmdapi.Config) error {
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return state.WriteFile(path, data)
}

// mergeKindEntries copies cluster's context, cluster and user from the
// private file kind wrote into target, and makes it the current context
// as kind does; every other entry of target is kept.
func mergeKindEntries(target, private, cluster string) error {
	from, err := clientcmd.LoadFromFile(private)
	if err != nil {
		return fmt.Errorf("loading the kubeconfig kind wrote: %w", err)
	}
	to, err := LoadKubeconfig(target)
	if err != nil {
		return err
	}
	e := kindEntry(cluster)
	ctx, ok := from.Contexts[e]
	if !ok {
		return fmt.Errorf("kind wrote no context %s", e)
	}
	to.Contexts[e] = ctx
	if c, ok := from.Clusters[ctx.Cluster]; ok {
		to.Clusters[ctx.Cluster] = c
	}
	if u, ok := from.AuthInfos[ctx.AuthInfo]; ok {
		to.AuthInfos[ctx.AuthInfo] = u
	}
	to.CurrentContext = e
	return WriteKubeconfig(target, to)
}

// removeKindEntries removes cluster's context, cluster and user from
// target, as kind delete cluster does, by an atomic rename; a missing
// file or entry is not an error.
func removeKindEntries(target, cluster string) error {
	to, err := clientcmd.LoadFromFile(target)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("loading %s: %w", target, err)
	}
	e := kindEntry(cluster)
	_, c := to.Clusters[e]
	_, u := to.AuthInfos[e]
	_, x := to.Contexts[e]
	if !c && !u && !x {
		return nil
	}
	delete(to.Clusters, e)
	delete(to.AuthInfos, e)
	delete(to.Contexts, e)
	if to.CurrentContext == e {
		to.CurrentContext = ""
	}
	return WriteKubeconfig(target, to)
}
