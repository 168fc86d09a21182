package bluegreen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/kubectl-bundle/kubectl-bundle/internal/fluxart"
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
	case len(b) <= maxManifest && bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")):
	case bytes.HasPrefix(b, []byte{0x1f, 0x8b}) && p.kept+int64(len(b)) <= maxBlobsKept:
		p.kept += int64(len(b))
	default:
		p.dropped = append(p.dropped, "sha256:"+file)
		return
	}
	p.blobs["sha256:"+file] = b
}

type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Annotations map[string]string `json:"annotations"`
}

// Flux builds every Flux artifact of the package's OCI layout.
func (p *Package) Flux() ([]FluxArtifact, error) {
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
	var out []FluxArtifact
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
		ref := d.Annotations["org.opencontainers.image.ref.name"]
		a := FluxArtifact{Ref: ref, Digest: d.Digest}
		for _, l := range m.Layers {
			if l.MediaType != fluxContent {
				continue
			}
			blob, ok := p.blobs[l.Digest]
			if !ok {
				return nil, fmt.Errorf("Flux artifact %s: its layer %s is larger than this check reads (%d MiB of compressed artifacts in all)", ref, l.Digest, maxBlobsKept>>20)
			}
			tree, err := fluxart.Read(bytes.NewReader(blob))
			if err != nil {
				return nil, fmt.Errorf("Flux artifact %s: %w", ref, err)
			}
			cs, err := tree.Clusters()
			if err != nil {
				return nil, fmt.Errorf("Flux artifact %s: %w", ref, err)
			}
			a.Clusters = append(a.Clusters, cs...)
		}
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ref < out[j].Ref })
	return out, nil
}

// fluxNames are the names the package's Flux artifacts put on the shared
// daemon: each workload cluster and its load balancer, named where the
// artifact names it. A name that is a Flux variable is the name a slot
// that sets none gets, its default.
func (p *Package) fluxNames(add func(Name)) error {
	arts, err := p.Flux()
	if err != nil {
		return err
	}
	for _, a := range arts {
		for _, c := range a.Clusters {
			name := c.Name
			if c.Variable != "" {
				name = c.Default
			}
			where := FluxWhere + a.Ref + ": Flux Kustomization " + c.Kustomization + ": Cluster " + c.Name
			if len(c.NamedBy) > 0 {
				where += " (named too by " + strings.Join(c.NamedBy, ", ") + ")"
			}
			add(Name{KindWorkload, name, where})
			add(Name{KindLoadBalancer, name + "-lb", where})
		}
	}
	return nil
}
