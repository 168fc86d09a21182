package bluegreen

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// Kinds of names that live on the host's shared Docker daemon or network.
const (
	KindWorkload     = "workload cluster"
	KindLoadBalancer = "load balancer"
	KindRegistry     = "registry host"
	KindContainer    = "container"
)

// Name is one name the package puts on the shared Docker daemon or network.
type Name struct {
	Kind  string `json:"kind"`
	Name  string `json:"name"`
	Where string `json:"where"`
}

func (n Name) String() string { return fmt.Sprintf("%s %s (%s)", n.Kind, n.Name, n.Where) }

// Alternatives is what an operator can do with a package that is not fit
// for blue/green, as the refusals name it.
const Alternatives = "the alternatives: S1 (repoint the management cluster only: the workload clusters stay with the active slot), " +
	"S3 (pivot the Cluster API objects from the active slot to the candidate), " +
	"in-place (scripts/in-place.sh: deploy into the active slot, restore the previous package on failure) " +
	"or recreate (scripts/recreate.sh: tear the active slot down and rebuild it, with downtime)"

// SharedNames renders the package's manifests and values with SLOT=slot
// and returns every name that lands on the shared daemon or network:
// CAPI Cluster and DockerCluster names (CAPD names the cluster's node
// containers and its load balancer <name>-lb after them), the registry
// hosts of Flux sources and of every oci:// reference, and the --name of
// containers the package's actions run.
func (p *Package) SharedNames(slot string) ([]Name, error) {
	seen := map[[2]string]bool{}
	var out []Name
	add := func(n Name) {
		if k := [2]string{n.Kind, n.Name}; n.Name != "" && !seen[k] {
			seen[k] = true
			out = append(out, n)
		}
	}
	files := make([]string, 0, len(p.Files))
	for f := range p.Files {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		docs, err := splitDocs(render(p.Files[f], Variable, slot))
		if err != nil {
			return nil, fmt.Errorf("%s is not YAML: %w", f, err)
		}
		for _, d := range docs {
			group, _, _ := strings.Cut(d.APIVersion, "/")
			name := d.Metadata.Name
			switch {
			case group == "cluster.x-k8s.io" && d.Kind == "Cluster",
				group == "infrastructure.cluster.x-k8s.io" && d.Kind == "DockerCluster":
				add(Name{KindWorkload, name, f + ": " + d.Kind})
				add(Name{KindLoadBalancer, name + "-lb", f + ": " + d.Kind})
			case group == "source.toolkit.fluxcd.io" && d.Spec.URL != "":
				add(Name{KindRegistry, hostOf(d.Spec.URL), f + ": " + d.Kind + " " + name})
			}
			walkStrings(d.all, func(s string) {
				if strings.HasPrefix(s, "oci://") {
					add(Name{KindRegistry, hostOf(s), f})
				}
			})
		}
	}
	if err := p.fluxNames(slot, add); err != nil {
		return nil, err
	}
	for _, cmd := range p.Actions {
		for _, m := range dockerName.FindAllStringSubmatch(render(cmd, Variable, slot), -1) {
			add(Name{KindContainer, strings.Trim(m[1], `'"`), "zarf.yaml action"})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

var dockerName = regexp.MustCompile(`docker\s+(?:container\s+)?(?:run|create)\b[^\n;|&]*?\s--name[= ](\S+)`)

// hostOf is the host name of a URL (oci://host:5000/repo): what the
// network resolves, whatever the port.
func hostOf(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Hostname()
}

func walkStrings(v any, f func(string)) {
	switch x := v.(type) {
	case string:
		f(x)
	case map[string]any:
		for _, e := range x {
			walkStrings(e, f)
		}
	case []any:
		for _, e := range x {
			walkStrings(e, f)
		}
	}
}

// Result is the S2 contract checked on a package for two slots.
type Result struct {
	// Declared: zarf.yaml declares SLOT.
	Declared bool `json:"declared"`
	// Same are the shared names identical for both slots: the two slots'
	// workloads would collide on the daemon or network.
	Same []Name `json:"same,omitempty"`
	// Candidate are the shared names the package creates in the candidate.
	Candidate []Name `json:"candidate,omitempty"`
}

// Check renders p for both slots (the candidate first) and compares their
// shared names.
func Check(p *Package, candidate, other string) (*Result, error) {
	c, err := p.SharedNames(candidate)
	if err != nil {
		return nil, err
	}
	o, err := p.SharedNames(other)
	if err != nil {
		return nil, err
	}
	res := &Result{Declared: p.Declares(Variable), Candidate: c}
	inOther := map[[2]string]bool{}
	for _, n := range o {
		inOther[[2]string{n.Kind, n.Name}] = true
	}
	for _, n := range c {
		if inOther[[2]string{n.Kind, n.Name}] {
			res.Same = append(res.Same, n)
		}
	}
	return res, nil
}
