package bluegreen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/kubectl-bundle/kubectl-bundle/internal/fluxart"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
)

// Flux artifacts: a package can carry its workload clusters' configuration
// as a Flux OCI artifact (an images: entry), which Zarf does not template.
// Its Cluster API clusters are names on the shared Docker daemon too, the
// same for every slot.

// Media types of a Flux artifact's manifest.
const (
	fluxConfig  = "application/vnd.cncf.flux.config.v1+json"
	fluxContent = "application/vnd.cncf.flux.content.v1.tar+gzip"
)

// Limits on the OCI blobs kept while the archive streams by: manifests
// (JSON) and the small gzip blobs a Flux artifact's content can be.
const (
	maxManifest  = 1 << 20
	maxJSONKept  = 16 << 20
	maxBlobsKept = 64 << 20
)

// FluxWhere starts the Where of a name found in a Flux artifact.
const FluxWhere = "Flux artifact "

// FluxArtifact is a Flux artifact the package carries, built.
type FluxArtifact struct {
	Ref      string            `json:"ref"`
	Digest   string            `json:"digest"`
	Clusters []fluxart.Cluster `json:"clusters,omitempty"`
}

// keepBlob keeps an images/ member the Flux check may need: the OCI
// index, JSON blobs (manifests) and small gzip blobs, within the limits.
func (p *Package) keepBlob(name string, b []byte) {
	if p.blobs == nil {
		p.blobs = map[string][]byte{}
	}
	if name == "images/index.json" {
		p.blobs[name] = b
		return
	}
	dir, file := path.Split(name)
	if dir != "images/blobs/sha256/" {
		return
	}
	switch {
	case len(b) <= maxManifest && bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) && p.keptJSON+int64(len(b)) <= maxJSONKept:
		p.keptJSON += int64(len(b))
	case bytes.HasPrefix(b, []byte{0x1f, 0x8b}) && p.kept+int64(len(b)) <= maxBlobsKept:
		p.kept += int64(len(b))
	default:
		return // a Flux layer not kept is read again (ReadFile)
	}
	p.blobs["sha256:"+file] = b
}

type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Annotations map[string]string `json:"annotations"`
}

// fluxManifest is a Flux artifact's manifest as the index names it.
type fluxManifest struct {
	ref, digest string
	layers      []string
}

// fluxManifests lists the package's Flux artifacts: the index's manifests
// whose config is Flux's.
func (p *Package) fluxManifests() ([]fluxManifest, error) {
	idx, ok := p.blobs["images/index.json"]
	if !ok {
		return nil, nil
	}
	var index struct {
		Manifests []ociDescriptor `json:"manifests"`
	}
	if err := json.Unmarshal(idx, &index); err != nil {
		return nil, fmt.Errorf("images/index.json: %w", err)
	}
	var out []fluxManifest
	for _, d := range index.Manifests {
		b, ok := p.blobs[d.Digest]
		if !ok {
			continue
		}
		var m struct {
			Config ociDescriptor   `json:"config"`
			Layers []ociDescriptor `json:"layers"`
		}
		if json.Unmarshal(b, &m) != nil || m.Config.MediaType != fluxConfig {
			continue
		}
		fm := fluxManifest{ref: d.Annotations["org.opencontainers.image.ref.name"], digest: d.Digest}
		for _, l := range m.Layers {
			if l.MediaType == fluxContent {
				fm.layers = append(fm.layers, l.Digest)
			}
		}
		out = append(out, fm)
	}
	return out, nil
}

// missingFluxLayers are the Flux artifacts' layers not kept.
func (p *Package) missingFluxLayers() map[string]bool {
	ms, _ := p.fluxManifests()
	miss := map[string]bool{}
	for _, m := range ms {
		for _, l := range m.layers {
			if _, ok := p.blobs[l]; !ok {
				miss[l] = true
			}
		}
	}
	return miss
}

// Flux builds every Flux artifact of the package's OCI layout.
func (p *Package) Flux() ([]FluxArtifact, error) {
	ms, err := p.fluxManifests()
	if err != nil {
		return nil, err
	}
	var out []FluxArtifact
	for _, m := range ms {
		a := FluxArtifact{Ref: m.ref, Digest: m.digest}
		for _, l := range m.layers {
			blob, ok := p.blobs[l]
			if !ok {
				return nil, fmt.Errorf("Flux artifact %s: its layer %s is not in the package, or larger than %d MiB", m.ref, l, fluxart.MaxBytes>>20)
			}
			tree, err := fluxart.Read(bytes.NewReader(blob))
			if err != nil {
				return nil, fmt.Errorf("Flux artifact %s: %w", m.ref, err)
			}
			cs, err := tree.Clusters()
			if err != nil {
				return nil, fmt.Errorf("Flux artifact %s: %w", m.ref, err)
			}
			a.Clusters = append(a.Clusters, cs...)
		}
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ref < out[j].Ref })
	return out, nil
}

// fluxNames are the names the package's Flux artifacts put on the shared
// daemon for slot: each workload cluster and its load balancer, named
// where the artifact names it. A name that is a Flux variable is the
// slot's own value when the slot sets it (SlotValue), else the name a
// slot that sets none gets, its default.
func (p *Package) fluxNames(slot string, add func(Name)) error {
	arts, err := p.Flux()
	if err != nil {
		return err
	}
	for _, a := range arts {
		for _, c := range a.Clusters {
			name := c.Name
			where := FluxWhere + a.Ref + ": Flux Kustomization " + c.Kustomization + ": Cluster " + c.Name
			switch {
			case c.Variable != "" && c.Default != "" && c.SlotSets:
				name = SlotValue(c.Default, slot)
				where += ", slot " + slot + "'s value of " + c.Variable + " (ConfigMap " + c.KustomizationNamespace + "/" + fluxart.SlotConfigMap + ")"
			case c.Variable != "" && c.Default != "":
				name = c.Default
				where += ", its variable's default while no slot sets " + c.Variable
			case c.Variable != "":
				where += ", a variable that no slot sets and with no default"
			}
			if len(c.NamedBy) > 0 {
				where += " (named too by " + strings.Join(c.NamedBy, ", ") + ")"
			}
			add(Name{KindWorkload, name, where})
			add(Name{KindLoadBalancer, name + "-lb", where})
		}
	}
	return nil
}

// SlotValue is slot's value of a Flux variable that names a workload
// cluster, whose default is def: the default with the slot's suffix, as
// config.yaml's workloadClusters names a slot's workload clusters
// (local-workload: local-workload-b in slot b).
func SlotValue(def, slot string) string { return def + "-" + slot }

// SlotSetting is a variable a slot sets for a Flux artifact: the data of
// the ConfigMap fluxart.SlotConfigMap in its namespace.
type SlotSetting = record.FluxSetting

// SlotSettings are the variables slot sets for the package's Flux
// artifacts (each Kustomization that substitutes from
// fluxart.SlotConfigMap, for each workload cluster a variable names),
// sorted, each once.
func (p *Package) SlotSettings(slot string) ([]SlotSetting, error) {
	arts, err := p.Flux()
	if err != nil {
		return nil, err
	}
	seen := map[[2]string]bool{}
	var out []SlotSetting
	for _, a := range arts {
		for _, c := range a.Clusters {
			k := [2]string{c.KustomizationNamespace, c.Variable}
			if !c.SlotSets || c.Variable == "" || c.Default == "" || seen[k] {
				continue
			}
			seen[k] = true
			out = append(out, SlotSetting{Namespace: c.KustomizationNamespace, Variable: c.Variable, Value: SlotValue(c.Default, slot), Default: c.Default})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Variable < out[j].Variable
	})
	return out, nil
}
