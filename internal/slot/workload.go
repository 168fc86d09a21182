package slot

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/runner"
)

// workloadTimeout bounds the read of one workload cluster's kubeconfig.
const workloadTimeout = 30 * time.Second

// WorkloadNamespace is where Cluster API keeps a workload cluster's
// kubeconfig secret (<cluster>-kubeconfig), as the site's Clusters live.
const WorkloadNamespace = "default"

// Workload is how an operator's kubectl reaches one workload cluster of a
// slot: Cluster API's kubeconfig of it, with the server moved to the host
// port Docker published for the cluster's load balancer (<cluster>-lb,
// 6443/tcp; a macOS host has no route to container addresses), under
// entries named kind-<cluster>, and the alias context kind-<alias> that
// keeps its name whichever slot serves (kind-airgap-wl for airgap-wl-b).
type Workload struct {
	Slot    string `json:"slot"`
	Cluster string `json:"cluster"`
	// Alias is the name the cluster has whichever slot runs it: the
	// workload cluster's base name (airgap-wl).
	Alias   string `json:"alias"`
	Context string `json:"context"`
	// AliasContext is kind-<Alias>.
	AliasContext string `json:"aliasContext"`
	Server       string `json:"server"`
	// Published: Server is the load balancer's published port; else it is
	// the address Cluster API wrote (no load balancer container answered).
	Published bool `json:"published"`
	// Config holds the cluster, user and context kind-<Cluster>, and the
	// alias context on the same cluster and user.
	Config *clientcmdapi.Config `json:"-"`
}

// WorkloadAlias is the base name of workload cluster name: the name less
// a slot's suffix (airgap-wl-b is airgap-wl), the name itself when no
// configured base name and slot make it (an adopted site's airgap-wl).
func (c *Config) WorkloadAlias(name string) string {
	for _, base := range c.WorkloadClusters {
		for _, s := range c.Slots {
			if name == base+"-"+s {
				return base
			}
		}
	}
	return name
}

// Workloads reads how to reach each workload cluster slot slotName runs
// (its names: the configured ones with its suffix, an adopted site's own,
// those a pivot moved in), or only the one named cluster when it is not "".
func (m *Manager) Workloads(ctx context.Context, slotName, cluster string) ([]*Workload, error) {
	rec, err := Load(m.Dir, slotName)
	if err != nil {
		return nil, err
	}
	if err := m.ensureSlotKubeconfig(slotName); err != nil {
		return nil, err
	}
	names, err := m.NamesOf(slotName)
	if err != nil {
		return nil, err
	}
	clusters := names.Workloads
	named := true
	if cluster != "" {
		// A cluster config.yaml does not name (the site's own, one a
		// pivot brought whose record says nothing of it) is the slot's
		// when its management cluster holds Cluster API's kubeconfig of
		// it: read below, refused with what the slot runs when it does not.
		named = slices.Contains(clusters, cluster)
		clusters = []string{cluster}
	}
	if len(clusters) == 0 {
		return nil, errkind.New(errkind.Environment, "slot %s runs no workload cluster (config.yaml's workloadClusters names none)", slotName)
	}
	cfg, err := restConfig(rec.Kubeconfig, rec.Context)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = workloadTimeout
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	var out []*Workload
	for _, name := range clusters {
		w, err := m.workload(ctx, cs, slotName, name)
		if err != nil && cluster == "" && apierrors.IsNotFound(err) {
			// A package that names its workload cluster as its alias
			// (no rename per slot) runs the base name itself.
			if base := m.Config.WorkloadAlias(name); base != name {
				if wb, berr := m.workload(ctx, cs, slotName, base); berr == nil {
					w, err = wb, nil
				}
			}
		}
		if err != nil && !named {
			return nil, errkind.New(errkind.Usage, "slot %s runs no workload cluster %s (config.yaml names: %s; and %w)", slotName, name, listOrNone(names.Workloads), err)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

func (m *Manager) workload(ctx context.Context, cs kubernetes.Interface, slotName, name string) (*Workload, error) {
	ctx, cancel := context.WithTimeout(ctx, workloadTimeout)
	defer cancel()
	secret := name + "-kubeconfig"
	sec, err := cs.CoreV1().Secrets(WorkloadNamespace).Get(ctx, secret, metav1.GetOptions{})
	if err != nil {
		return nil, errkind.New(errkind.Environment, "reading secret %s/%s of workload cluster %s in slot %s: %w (Cluster API writes it once the cluster's control plane is up)", WorkloadNamespace, secret, name, slotName, err)
	}
	capi, err := clientcmd.Load(sec.Data["value"])
	if err != nil || len(sec.Data["value"]) == 0 {
		return nil, errkind.New(errkind.Environment, "secret %s/%s holds no kubeconfig under data.value: %v", WorkloadNamespace, secret, err)
	}
	cur := capi.Contexts[capi.CurrentContext]
	if cur == nil || capi.Clusters[cur.Cluster] == nil || capi.AuthInfos[cur.AuthInfo] == nil {
		return nil, errkind.New(errkind.Environment, "the kubeconfig in secret %s/%s has no current context with its cluster and user", WorkloadNamespace, secret)
	}
	cl := capi.Clusters[cur.Cluster].DeepCopy()
	w := &Workload{Slot: slotName, Cluster: name, Alias: m.Config.WorkloadAlias(name), Context: "kind-" + name, Server: cl.Server}
	w.AliasContext = "kind-" + w.Alias
	if w.Alias == name {
		// A cluster named as its alias (an adopted site's airgap-wl): its
		// own entries carry the slot, so that kind-airgap-wl is an alias
		// the switch moves like any other, and another slot's copy never
		// writes it.
		w.Context = "kind-" + name + "@" + slotName
	}
	if m.Run != nil {
		if port, err := runner.PublishedPort(ctx, m.Run, name+"-lb", "6443/tcp"); err == nil {
			w.Server, w.Published = "https://"+net.JoinHostPort("127.0.0.1", port), true
		}
	}
	cl.Server = w.Server
	out := clientcmdapi.NewConfig()
	out.Clusters[w.Context] = cl
	out.AuthInfos[w.Context] = capi.AuthInfos[cur.AuthInfo].DeepCopy()
	out.Contexts[w.Context] = &clientcmdapi.Context{Cluster: w.Context, AuthInfo: w.Context}
	out.Contexts[w.AliasContext] = &clientcmdapi.Context{Cluster: w.Context, AuthInfo: w.Context}
	out.CurrentContext = w.AliasContext
	w.Config = out
	return w, nil
}

// MergeWorkloads writes each workload's entries into the kubeconfig
// file, keeping every other entry: the alias contexts then name the
// clusters of ws (the switch moves them so).
func MergeWorkloads(file string, ws []*Workload) error {
	cfg, err := LoadKubeconfig(file)
	if err != nil {
		return err
	}
	AddWorkloads(cfg, ws)
	return WriteKubeconfig(file, cfg)
}

// AddWorkloads puts each workload's entries into cfg, replacing those of
// the same names.
func AddWorkloads(cfg *clientcmdapi.Config, ws []*Workload) {
	for _, w := range ws {
		for k, v := range w.Config.Clusters {
			cfg.Clusters[k] = v
		}
		for k, v := range w.Config.AuthInfos {
			cfg.AuthInfos[k] = v
		}
		for k, v := range w.Config.Contexts {
			cfg.Contexts[k] = v
		}
	}
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// String is one line: the cluster, its slot, where it is reached.
func (w *Workload) String() string {
	how := "the load balancer's published port"
	if !w.Published {
		how = "the address Cluster API wrote"
	}
	if w.AliasContext == w.Context {
		return fmt.Sprintf("workload cluster %s of slot %s: context %s at %s (%s)", w.Cluster, w.Slot, w.Context, w.Server, how)
	}
	return fmt.Sprintf("workload cluster %s of slot %s: context %s (and %s) at %s (%s)", w.Cluster, w.Slot, w.AliasContext, w.Context, w.Server, how)
}
