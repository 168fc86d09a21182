package fakes

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
)

// Kind is the in-process kind provider (a slot cluster provider): a
// control-plane container in the fake Docker, and a kind-<name> context in
// the kubeconfig. When $WORK/<name>.kubeconfig exists (an API server
// started for it), the context reaches that real API server; otherwise it
// points at a closed port.
type Kind struct {
	// OnKill, when set, is called in place of killing the process group
	// inside a FAKE_KILL step (an in-process caller: it must not return,
	// e.g. it panics for the test to recover).
	OnKill func(step string)
}

// die ends the caller inside step: OnKill, else SIGKILL of the group.
func (k Kind) die(step string) {
	if k.OnKill != nil {
		k.OnKill(step)
	}
	killGroup()
}

func kubeconfigFile(explicit string) string {
	if explicit != "" {
		return explicit
	}
	if kc := os.Getenv("KUBECONFIG"); kc != "" {
		return filepath.SplitList(kc)[0]
	}
	return filepath.Join(os.Getenv("HOME"), ".kube", "config")
}

// Create creates cluster name: its node container and its context.
func (k Kind) Create(_ context.Context, name string, cfg *v1alpha4.Cluster, kubeconfig string) error {
	e := env(os.Getenv)
	if len(cfg.Nodes) == 0 {
		return fmt.Errorf("fake kind: cluster %s has no nodes", name)
	}
	e.call(fmt.Sprintf("kind create cluster --name %s --image %s", name, cfg.Nodes[0].Image))
	if e.fails("kind-create") {
		return fmt.Errorf("failed to create cluster: node(s) already exist for a cluster with the name %q (FAKE_FAIL)", name)
	}
	if err := withState(e.dir(), func(s *State) error {
		if _, ok := s.Containers[name+"-control-plane"]; ok {
			return fmt.Errorf("node(s) already exist for a cluster with the name %q", name)
		}
		s.Containers[name+"-control-plane"] = &Container{Image: cfg.Nodes[0].Image, Network: "kind", Memory: 1536 << 20,
			Ports:  []string{"127.0.0.1:0->6443/tcp"},
			Labels: map[string]string{"io.x-k8s.kind.cluster": name}}
		return nil
	}); err != nil {
		return err
	}
	if e.kills("kind-create") {
		// The node container exists; the kube context was never written.
		e.killed("kind-create")
		k.die("kind-create")
	}
	path := kubeconfigFile(kubeconfig)
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		kc = clientcmdapi.NewConfig()
	}
	ctx := "kind-" + name
	cluster := &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	user := &clientcmdapi.AuthInfo{Token: "fake"}
	if backend, err := clientcmd.LoadFromFile(filepath.Join(os.Getenv("WORK"), name+".kubeconfig")); err == nil {
		cluster, user = backend.Clusters[name], backend.AuthInfos[name]
	}
	kc.Clusters[ctx], kc.AuthInfos[ctx] = cluster, user
	kc.Contexts[ctx] = &clientcmdapi.Context{Cluster: ctx, AuthInfo: ctx}
	kc.CurrentContext = ctx
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*kc, path)
}

// Delete deletes the cluster and its context; a missing one is not an error.
func (k Kind) Delete(_ context.Context, name, kubeconfig string) error {
	e := env(os.Getenv)
	e.call("kind delete cluster --name " + name)
	if e.fails("kind-delete") {
		return fmt.Errorf("failed to delete cluster %q (FAKE_FAIL)", name)
	}
	if err := withState(e.dir(), func(s *State) error {
		delete(s.Containers, name+"-control-plane")
		return nil
	}); err != nil {
		return err
	}
	if e.kills("kind-delete") {
		// The node container is gone; its kube context is left behind.
		e.killed("kind-delete")
		k.die("kind-delete")
	}
	path := kubeconfigFile(kubeconfig)
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil
	}
	ctx := "kind-" + name
	delete(kc.Contexts, ctx)
	delete(kc.Clusters, ctx)
	delete(kc.AuthInfos, ctx)
	if kc.CurrentContext == ctx {
		kc.CurrentContext = ""
	}
	return clientcmd.WriteToFile(*kc, path)
}

// Exists reports whether the cluster's node container exists.
func (Kind) Exists(_ context.Context, name string) (bool, error) {
	found := false
	err := withState(os.Getenv(EnvDir), func(s *State) error { _, found = s.Containers[name+"-control-plane"]; return nil })
	return found, err
}

// Probe answers a registry's /v2/ when a fake container publishes its port.
func Probe(_ context.Context, u string) error {
	pu, err := url.Parse(u)
	if err != nil {
		return err
	}
	found := false
	err = withState(os.Getenv(EnvDir), func(s *State) error {
		for _, c := range s.Containers {
			if c.Status == StatusCreated {
				continue // never started: nothing listens
			}
			for _, p := range c.Ports {
				if strings.HasPrefix(p, pu.Host+"->") {
					found = true
				}
			}
		}
		return nil
	})
	if err == nil && !found {
		err = fmt.Errorf("dial tcp %s: connect: connection refused", pu.Host)
	}
	return err
}
