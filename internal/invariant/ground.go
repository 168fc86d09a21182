package invariant

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/kubectl-bundle/kubectl-bundle/internal/fakes"
	"sigs.k8s.io/yaml"
)

// Ground is the fake machine as read from $FAKES/state.json: the ground
// truth of which clusters exist and what was deployed where.
type Ground struct {
	Containers map[string]*fakes.Container `json:"containers"`
	Deploys    []fakes.Deploy              `json:"deploys"`
}

// Ground reads the fake machine (parsed again only when it changed).
func (f *Files) Ground() (*Ground, error) {
	b, err := f.readFile(filepath.Join(f.Root, "fakes", "state.json"))
	if err != nil {
		return nil, err
	}
	if f.groundRaw != nil && bytes.Equal(b, f.groundRaw) {
		return f.groundLast, nil
	}
	g := &Ground{}
	if err := json.Unmarshal(b, g); err != nil {
		return nil, err
	}
	f.groundRaw, f.groundLast = b, g
	return g, nil
}

// FakeServer is the API server of a fake cluster in the model: nothing
// listens there; the path names the cluster (FakeServer + "airgap-mgmt-a").
const FakeServer = "https://127.0.0.1:1/"

// The labels of a fake cluster the existing provider uses (the model's
// second site): the operator's cluster, which no slot builds or removes,
// and the UID of its kube-system namespace (its identity).
const (
	LabelOperatorCluster = "kubectl-bundle.test/operator-cluster"
	LabelKubeSystemUID   = "kubectl-bundle.test/kube-system-uid"
)

// SlotCluster is the cluster of slot sl on the machine.
func SlotCluster(sl string) string { return "airgap-mgmt-" + sl }

// ServerCluster is the fake cluster a server names ("" when it is not a
// fake cluster's: a real API server).
func ServerCluster(server string) string {
	name, _ := strings.CutPrefix(server, FakeServer)
	if name == server {
		return ""
	}
	return name
}

// deployCluster is the cluster deploy d reached: the one its server
// names, when that is a fake cluster's, else the one its kind context
// names.
func deployCluster(d fakes.Deploy) string {
	if c := ServerCluster(d.Server); c != "" {
		return c
	}
	return strings.TrimPrefix(d.Context, "kind-")
}

// SlotPackage is what the machine says slot sl holds: "" when its cluster
// does not exist, else the package last deployed into that cluster
// ("partial:" when that deploy was cut off, "none" when nothing was).
func (g *Ground) SlotPackage(sl string) string {
	if _, ok := g.Containers[SlotCluster(sl)+"-control-plane"]; !ok {
		return ""
	}
	p := "none"
	for _, d := range g.Deploys {
		if deployCluster(d) == SlotCluster(sl) {
			p = d.Package
			if d.Partial {
				p = "partial:" + d.Package
			}
		}
	}
	return p
}

// OperatorCluster reports whether slot sl's cluster is the operator's
// (the existing provider): a slot's create and destroy neither build nor
// remove it, so only what is deployed there shows on the machine.
func (g *Ground) OperatorCluster(sl string) bool {
	c, ok := g.Containers[SlotCluster(sl)+"-control-plane"]
	return ok && c != nil && c.Labels[LabelOperatorCluster] != ""
}

// Aliases is where the kubeconfig alias context and the registry alias
// point on the machine ("" when nowhere, "both" when the registry alias
// is on both).
func (f *Files) Aliases() (kube, registry string) {
	if b, err := f.readFile(filepath.Join(f.Root, "kubeconfig")); err == nil {
		if f.kubeRaw == nil || !bytes.Equal(b, f.kubeRaw) {
			f.kubeRaw, f.kubeAlias = b, aliasCluster(b)
		}
		kube = f.kubeAlias
	}
	g, err := f.Ground()
	if err != nil {
		return kube, ""
	}
	for _, sl := range Slots {
		c, ok := g.Containers["krops-registry-airgap-"+sl]
		if !ok || c == nil {
			continue
		}
		for _, a := range c.Aliases {
			if a == "krops-registry" && c.Network == "kind" {
				if registry != "" {
					return kube, "both"
				}
				registry = sl
			}
		}
	}
	return kube, registry
}

// aliasCluster is the cluster the kubeconfig's alias context
// (kind-airgap-mgmt) reaches, as the slot it follows ("" when none): the
// fake cluster its cluster entry's server names, else the kind cluster
// the entry is named after.
func aliasCluster(kubeconfig []byte) string {
	var kc struct {
		Clusters []struct {
			Name    string `json:"name"`
			Cluster struct {
				Server string `json:"server"`
			} `json:"cluster"`
		} `json:"clusters"`
		Contexts []struct {
			Name    string `json:"name"`
			Context struct {
				Cluster string `json:"cluster"`
			} `json:"context"`
		} `json:"contexts"`
	}
	if yaml.Unmarshal(kubeconfig, &kc) != nil {
		return ""
	}
	for _, c := range kc.Contexts {
		if c.Name != "kind-airgap-mgmt" {
			continue
		}
		for _, e := range kc.Clusters {
			if e.Name == c.Context.Cluster {
				if name := ServerCluster(e.Cluster.Server); name != "" {
					return strings.TrimPrefix(name, "airgap-mgmt-")
				}
			}
		}
		return strings.TrimPrefix(c.Context.Cluster, "kind-airgap-mgmt-")
	}
	return ""
}
