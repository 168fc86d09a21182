package slot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// loadingRules are kubectl's: the explicit file, else $KUBECONFIG (a
// list), else ~/.kube/config.
func loadingRules(kubeconfig string) *clientcmd.ClientConfigLoadingRules {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	return rules
}

// KubeconfigPath is slots/<slot>.kubeconfig: the slot's one context,
// flattened, as the current context. zarf, which takes no context flag, is
// run with KUBECONFIG set to it, so the operator's current context is
// never changed.
func KubeconfigPath(d *state.Dir, slotName string) string {
	return d.Join("slots", slotName+".kubeconfig")
}

// writeSlotKubeconfig extracts context from the operator's kubeconfig.
func writeSlotKubeconfig(d *state.Dir, slotName, kubeconfig, context string) error {
	raw, err := loadingRules(kubeconfig).Load()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	if _, ok := raw.Contexts[context]; !ok {
		return fmt.Errorf("kube context %q does not exist in the kubeconfig (kubectl config get-contexts lists them)", context)
	}
	raw.CurrentContext = context
	if err := clientcmdapi.MinifyConfig(raw); err != nil {
		return fmt.Errorf("extracting context %s: %w", context, err)
	}
	if err := clientcmdapi.FlattenConfig(raw); err != nil {
		return fmt.Errorf("flattening context %s: %w", context, err)
	}
	data, err := clientcmd.Write(*raw)
	if err != nil {
		return err
	}
	if _, err := d.MkdirAll("slots"); err != nil {
		return err
	}
	return state.WriteFile(KubeconfigPath(d, slotName), data)
}

// ensureSlotKubeconfig writes slots/<slot>.kubeconfig again from the
// slot's record (the kubeconfig and context it was built with) when it is
// missing or does not reach the record's context: a record rebuilt by slot
// repair after the slots directory was lost, the file removed by hand, or
// left empty or cut short (a full disk, a hurried "> file"). Without it
// zarf would run with no cluster, or KUBECONFIG's default's current
// context: another cluster.
func (m *Manager) ensureSlotKubeconfig(slotName string) error {
	p := KubeconfigPath(m.Dir, slotName)
	fi, err := os.Lstat(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	what := "is missing"
	rec, rerr := Load(m.Dir, slotName)
	if err == nil {
		if rerr != nil || rec.Context == "" {
			return nil // nothing to check it against: the record's own checks say so
		}
		if fi.Mode().IsRegular() {
			if cfg, lerr := clientcmd.LoadFromFile(p); lerr == nil && cfg.CurrentContext == rec.Context && cfg.Contexts[rec.Context] != nil {
				return nil
			}
		}
		what = "does not reach the record's context " + rec.Context + " (empty, cut short or replaced)"
		m.logf("slot %s: its kubeconfig %s %s: writing it again from the record", slotName, p, what)
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	if rerr != nil {
		return fmt.Errorf("the slot's kubeconfig %s %s and its record cannot say which cluster it reaches: %w", p, what, rerr)
	}
	if rec.Context == "" {
		return fmt.Errorf("the slot's kubeconfig %s %s and slot %s's record names no context (%s)", p, what, slotName, m.Dir.Plugin("slot", "describe", slotName))
	}
	if err := writeSlotKubeconfig(m.Dir, slotName, rec.Kubeconfig, rec.Context); err != nil {
		return fmt.Errorf("the slot's kubeconfig %s %s; writing it again from context %s: %w", p, what, rec.Context, err)
	}
	return nil
}

// restConfig builds a client config for context in kubeconfig.
// clientset is a client of kubeconfig's context whose requests give up
// after timeout.
func clientset(kubeconfig, context string, timeout time.Duration) (kubernetes.Interface, error) {
	cfg, err := restConfig(kubeconfig, context)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = timeout
	return kubernetes.NewForConfig(cfg)
}

func restConfig(kubeconfig, context string) (*rest.Config, error) {
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loadingRules(kubeconfig),
		&clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
}

// ping checks that the API server behind cfg answers within timeout
// (the Identifier ctx carries answers for it: WithIdentifier).
func ping(ctx context.Context, cfg *rest.Config, timeout time.Duration) error {
	if id := identifier(ctx); id != nil {
		_, err := id(ctx, cfg)
		return err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = timeout
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { _, err := dc.ServerVersion(); done <- err }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// removeSlotKubeconfig deletes slots/<slot>.kubeconfig.
func removeSlotKubeconfig(d *state.Dir, slotName string) error {
	if err := os.Remove(KubeconfigPath(d, slotName)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}
