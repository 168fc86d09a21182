package verify

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxZarfYAMLSize caps zarf.yaml: it is read whole into memory before it is trusted.
const MaxZarfYAMLSize = 4 << 20

// Zarf package API versions this verifier reads.
const (
	APIVersionV1Alpha1 = "zarf.dev/v1alpha1"
	APIVersionV1Beta1  = "zarf.dev/v1beta1"
)

// ZarfPackage is the part of a zarf.yaml the verifier needs, from either
// API version.
type ZarfPackage struct {
	APIVersion        string
	Kind              string
	Name              string
	Version           string
	Architecture      string
	Flavor            string
	AggregateChecksum string
	Signed            *bool
	ProvenanceFiles   []string
	// Images lists every image reference named by any component.
	Images []string
	// ImageUses says where each image is named: its component and key.
	ImageUses []ImageUse
	// FileComponents lists components with files or data injections: zarf
	// writes a component SBOM for each.
	FileComponents []string
	// SBOMAble is true when the package has images, files or data injections.
	SBOMAble bool
	// DeployActions are the commands its components run at deploy
	// (actions.onDeploy): what they change, Zarf does not record, so that
	// removing or redeploying another package over it leaves it.
	DeployActions []DeployAction
}

// DeployAction is one command a component runs at deploy.
type DeployAction struct {
	Component string `json:"component"`
	// When is before, after, onSuccess or onFailure.
	When string `json:"when"`
	Cmd  string `json:"cmd"`
}

// maxDeployActions bounds the actions kept from an untrusted zarf.yaml.
const maxDeployActions = 256

type rawActions struct {
	Before    []rawAction `yaml:"before"`
	After     []rawAction `yaml:"after"`
	OnSuccess []rawAction `yaml:"onSuccess"`
	OnFailure []rawAction `yaml:"onFailure"`
}

type rawAction struct {
	Cmd string `yaml:"cmd"`
}

// ImageUse is one place zarf.yaml names an image: the component and
// whether under images or imageArchives.
type ImageUse struct {
	Ref       string `json:"image"`
	Component string `json:"component"`
	Key       string `json:"key"`
}

type rawImage struct {
	Name string
}

func (r *rawImage) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		r.Name = n.Value
		return nil
	}
	var obj struct {
		Name string `yaml:"name"`
	}
	if err := n.Decode(&obj); err != nil {
		return err
	}
	r.Name = obj.Name
	return nil
}

type rawDoc struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name              string `yaml:"name"`
		Version           string `yaml:"version"`
		Architecture      string `yaml:"architecture"`
		AggregateChecksum string `yaml:"aggregateChecksum"`
	} `yaml:"metadata"`
	Build struct {
		Architecture      string   `yaml:"architecture"`
		Flavor            string   `yaml:"flavor"`
		Signed            *bool    `yaml:"signed"`
		ProvenanceFiles   []string `yaml:"provenanceFiles"`
		AggregateChecksum string   `yaml:"aggregateChecksum"`
	} `yaml:"build"`
	Components []struct {
		Name           string     `yaml:"name"`
		Images         []rawImage `yaml:"images"`
		Files          []any      `yaml:"files"`
		DataInjections []any      `yaml:"dataInjections"`
		ImageArchives  []struct {
			Images []string `yaml:"images"`
		} `yaml:"imageArchives"`
		Actions struct {
			OnDeploy rawActions `yaml:"onDeploy"`
		} `yaml:"actions"`
	} `yaml:"components"`
}

// ParseZarfYAML parses zarf.yaml: a single v1alpha1 document, or the
// two-document form (v1alpha1 then v1beta1) that zarf writes for v1beta1
// packages. Like zarf, the v1beta1 document wins when both are present; unlike
// zarf, the two must agree on name, version and aggregate checksum.
func ParseZarfYAML(b []byte) (*ZarfPackage, error) {
	if len(b) > MaxZarfYAMLSize {
		return nil, fmt.Errorf("zarf.yaml is %d bytes, over the %d byte limit", len(b), MaxZarfYAMLSize)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var docs []rawDoc
	for {
		var d rawDoc
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("parsing zarf.yaml document %d: %w", len(docs)+1, err)
		}
		docs = append(docs, d)
		if len(docs) > 2 {
			return nil, fmt.Errorf("zarf.yaml has more than two documents")
		}
	}
	var alpha, beta *rawDoc
	for i := range docs {
		d := &docs[i]
		switch d.APIVersion {
		case APIVersionV1Alpha1, "":
			// v1alpha1 packages before apiVersion existed carry none.
			if alpha != nil {
				return nil, fmt.Errorf("zarf.yaml has two v1alpha1 documents")
			}
			alpha = d
		case APIVersionV1Beta1:
			if beta != nil {
				return nil, fmt.Errorf("zarf.yaml has two v1beta1 documents")
			}
			beta = d
		default:
			return nil, fmt.Errorf("zarf.yaml document %d has unsupported apiVersion %q", i+1, d.APIVersion)
		}
	}
	if alpha == nil && beta == nil {
		return nil, fmt.Errorf("zarf.yaml is empty")
	}
	chosen := alpha
	if beta != nil {
		chosen = beta
	}
	p := fromRaw(chosen)
	if alpha != nil && beta != nil {
		a := fromRaw(alpha)
		if a.Name != p.Name || a.Version != p.Version || a.AggregateChecksum != p.AggregateChecksum {
			return nil, fmt.Errorf("zarf.yaml's v1alpha1 and v1beta1 documents disagree (name %q/%q, version %q/%q, aggregate checksum %q/%q)",
				a.Name, p.Name, a.Version, p.Version, a.AggregateChecksum, p.AggregateChecksum)
		}
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	return p, nil
}

func fromRaw(d *rawDoc) *ZarfPackage {
	p := &ZarfPackage{
		APIVersion:      d.APIVersion,
		Kind:            d.Kind,
		Name:            d.Metadata.Name,
		Version:         d.Metadata.Version,
		Architecture:    d.Build.Architecture,
		Flavor:          d.Build.Flavor,
		Signed:          d.Build.Signed,
		ProvenanceFiles: d.Build.ProvenanceFiles,
	}
	if p.APIVersion == "" {
		p.APIVersion = APIVersionV1Alpha1
	}
	if p.Architecture == "" {
		p.Architecture = d.Metadata.Architecture
	}
	if p.APIVersion == APIVersionV1Beta1 {
		p.AggregateChecksum = d.Build.AggregateChecksum
	} else {
		p.AggregateChecksum = d.Metadata.AggregateChecksum
	}
	for _, c := range d.Components {
		for _, img := range c.Images {
			p.Images = append(p.Images, img.Name)
			p.ImageUses = append(p.ImageUses, ImageUse{Ref: img.Name, Component: c.Name, Key: "images"})
		}
		for _, ia := range c.ImageArchives {
			p.Images = append(p.Images, ia.Images...)
			for _, img := range ia.Images {
				p.ImageUses = append(p.ImageUses, ImageUse{Ref: img, Component: c.Name, Key: "imageArchives"})
			}
		}
		if len(c.Files) > 0 || len(c.DataInjections) > 0 {
			p.FileComponents = append(p.FileComponents, c.Name)
		}
		for _, w := range []struct {
			when string
			acts []rawAction
		}{{"before", c.Actions.OnDeploy.Before}, {"after", c.Actions.OnDeploy.After}, {"onSuccess", c.Actions.OnDeploy.OnSuccess}, {"onFailure", c.Actions.OnDeploy.OnFailure}} {
			for _, a := range w.acts {
				if strings.TrimSpace(a.Cmd) != "" && len(p.DeployActions) < maxDeployActions {
					p.DeployActions = append(p.DeployActions, DeployAction{Component: c.Name, When: w.when, Cmd: strings.TrimSpace(a.Cmd)})
				}
			}
		}
		if len(c.Images) > 0 || len(c.Files) > 0 || len(c.DataInjections) > 0 || len(c.ImageArchives) > 0 {
			p.SBOMAble = true
		}
	}
	return p
}

func (p *ZarfPackage) validate() error {
	switch p.Kind {
	case "ZarfPackageConfig", "ZarfInitConfig":
	default:
		return fmt.Errorf("zarf.yaml kind %q is not ZarfPackageConfig or ZarfInitConfig", p.Kind)
	}
	if p.Name == "" {
		return fmt.Errorf("zarf.yaml has no metadata.name")
	}
	for field, v := range map[string]string{"metadata.name": p.Name, "metadata.version": p.Version, "build.flavor": p.Flavor} {
		if v == ".." || strings.ContainsAny(v, `/\`) {
			return fmt.Errorf("zarf.yaml %s %q would make an unsafe path", field, v)
		}
	}
	for _, c := range p.FileComponents {
		if c == ".." || strings.ContainsAny(c, `/\`) {
			return fmt.Errorf("zarf.yaml component name %q would make an unsafe path", c)
		}
	}
	for _, f := range p.ProvenanceFiles {
		if err := checkMemberPath(f); err != nil {
			return fmt.Errorf("zarf.yaml build.provenanceFiles: %w", err)
		}
	}
	return nil
}
