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

// SlotPackage is what the machine says slot sl holds: "" when its cluster
// does not exist, else the package last deployed into its context
// ("partial:" when that deploy was cut off, "none" when nothing was).
func (g *Ground) SlotPackage(sl string) string {
	if _, ok := g.Containers["airgap-mgmt-"+sl+"-control-plane"]; !ok {
		return ""
	}
	p := "none"
	for _, d := range g.Deploys {
		if d.Context == "kind-airgap-mgmt-"+sl {
			p = d.Package
			if d.Partial {
				p = "partial:" + d.Package
			}
		}
	}
	return p
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
// (kind-airgap-mgmt) names, as the slot it follows ("" when none).
func aliasCluster(kubeconfig []byte) string {
	var kc struct {
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
		if c.Name == "kind-airgap-mgmt" {
			return strings.TrimPrefix(c.Context.Cluster, "kind-airgap-mgmt-")
		}
	}
	return ""
}
