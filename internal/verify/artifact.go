package verify

import (
	"encoding/json"
	"fmt"
	"sort"
)

// Media types of OCI artifacts that are not container images.
const (
	MediaTypeFluxConfig  = "application/vnd.cncf.flux.config.v1+json"
	MediaTypeFluxContent = "application/vnd.cncf.flux.content.v1.tar+gzip"
	MediaTypeHelmConfig  = "application/vnd.cncf.helm.config.v1+json"
	// maxLayerTypes bounds the distinct layer media types kept per manifest.
	maxLayerTypes = 8
	// maxIndexChildren bounds the children kept per image index; an index
	// with more is not classified (its SBOMs are required as before).
	maxIndexChildren = 1024
	maxMediaTypeLen  = 255
)

// containerLayerTypes are the layer media types zarf counts as container
// layers (zarf v0.84.0 src/pkg/images/common.go, isLayer): a manifest whose
// layers are all of these is a container image and gets an SBOM.
var containerLayerTypes = map[string]bool{
	"application/vnd.docker.image.rootfs.diff.tar.gzip":            true,
	"application/vnd.docker.image.rootfs.diff.tar":                 true,
	"application/vnd.docker.image.rootfs.foreign.diff.tar.gzip":    true,
	"application/vnd.oci.image.layer.v1.tar":                       true,
	"application/vnd.oci.image.layer.v1.tar+gzip":                  true,
	"application/vnd.oci.image.layer.v1.tar+zstd":                  true,
	"application/vnd.oci.image.layer.nondistributable.v1.tar":      true,
	"application/vnd.oci.image.layer.nondistributable.v1.tar+gzip": true,
	"application/vnd.oci.image.layer.nondistributable.v1.tar+zstd": true,
}

// ManifestInfo is what the SBOM rule reads from an image manifest or index
// blob of the package's OCI layout.
type ManifestInfo struct {
	// Kind is "manifest" or "index".
	Kind string
	// ConfigMediaType is a manifest's config media type.
	ConfigMediaType string
	// LayerMediaTypes are a manifest's distinct layer media types, in
	// order, at most maxLayerTypes.
	LayerMediaTypes []string
	// Container is true when every layer of a manifest is a container
	// layer (none counts as all): zarf makes an SBOM for it.
	Container bool
	// Children are an index's manifests (media type and digest).
	Children []Descriptor
}

// ParseManifestInfo reads an OCI or Docker manifest or index from an
// untrusted package: schemaVersion 2, a known manifest or index media type
// (declared or implied by its fields), every child digest sha256.
func ParseManifestInfo(b []byte) (*ManifestInfo, error) {
	var doc struct {
		SchemaVersion int    `json:"schemaVersion"`
		MediaType     string `json:"mediaType"`
		Config        *struct {
			MediaType string `json:"mediaType"`
		} `json:"config"`
		Layers []struct {
			MediaType string `json:"mediaType"`
		} `json:"layers"`
		Manifests []struct {
			MediaType string `json:"mediaType"`
			Digest    string `json:"digest"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("parsing manifest: %w", err)
	}
	if doc.SchemaVersion != 2 {
		return nil, fmt.Errorf("manifest has schemaVersion %d, want 2", doc.SchemaVersion)
	}
	kind := kindOf(doc.MediaType)
	switch {
	case doc.MediaType != "" && kind == "":
		return nil, fmt.Errorf("media type %q is neither a manifest nor an index", truncate(doc.MediaType, 80))
	case kind == "" && doc.Manifests != nil:
		kind = "index"
	case kind == "" && doc.Config != nil:
		kind = "manifest"
	case kind == "":
		return nil, fmt.Errorf("neither a manifest nor an index")
	}
	info := &ManifestInfo{Kind: kind}
	if kind == "index" {
		if doc.Config != nil || doc.Layers != nil {
			return nil, fmt.Errorf("an index with a config or layers")
		}
		if len(doc.Manifests) > maxIndexChildren {
			return nil, fmt.Errorf("index has %d manifests, over the %d limit", len(doc.Manifests), maxIndexChildren)
		}
		for i, m := range doc.Manifests {
			if !sha256Digest.MatchString(m.Digest) {
				return nil, fmt.Errorf("index manifests[%d] has digest %q, not sha256:<64 hex>", i, truncate(m.Digest, 80))
			}
			info.Children = append(info.Children, Descriptor{MediaType: truncate(m.MediaType, maxMediaTypeLen), Digest: m.Digest})
		}
		return info, nil
	}
	if doc.Config == nil || doc.Manifests != nil {
		return nil, fmt.Errorf("a manifest without a config, or with manifests")
	}
	info.ConfigMediaType = truncate(doc.Config.MediaType, maxMediaTypeLen)
	info.Container = true
	seen := map[string]bool{}
	for _, l := range doc.Layers {
		if !containerLayerTypes[l.MediaType] {
			info.Container = false
		}
		if !seen[l.MediaType] && len(info.LayerMediaTypes) < maxLayerTypes {
			seen[l.MediaType] = true
			info.LayerMediaTypes = append(info.LayerMediaTypes, truncate(l.MediaType, maxMediaTypeLen))
		}
	}
	return info, nil
}

// SBOMArtifact is an image of zarf.yaml whose stored manifest is not a
// container image: zarf makes no SBOM for it, and none is expected.
type SBOMArtifact struct {
	Image string `json:"image"`
	// Kind is "Flux artifact", "Helm chart" or "OCI artifact".
	Kind            string   `json:"kind"`
	Digest          string   `json:"digest"`
	MediaType       string   `json:"mediaType"`
	ConfigMediaType string   `json:"configMediaType"`
	LayerMediaTypes []string `json:"layerMediaTypes"`
}

func artifactKind(configMediaType string) string {
	switch configMediaType {
	case MediaTypeFluxConfig:
		return "Flux artifact"
	case MediaTypeHelmConfig:
		return "Helm chart"
	}
	return "OCI artifact"
}

// sbomFreeImages returns the images of zarf.yaml that are OCI artifacts,
// not container images, by zarf's rule: a manifest with a layer that is not
// a container layer, or an index whose every child is such a manifest.
// Only what the package's OCI layout proves is exempted: an image whose
// index entry, blob or manifest is missing, unreadable, misnamed or of
// another kind than its entry says keeps its SBOM requirement.
func sbomFreeImages(pkg *ZarfPackage, a *archiveResult) []SBOMArtifact {
	b, ok := a.control[controlImageIndex]
	if !ok || a.controlErr[controlImageIndex] != nil || len(pkg.Images) == 0 {
		return nil
	}
	idx, err := ParseImageIndex(b)
	if err != nil {
		return nil
	}
	stored := map[string][]Descriptor{}
	for _, d := range idx.Manifests {
		if n := d.Name(); n != "" {
			stored[NormalizeImageRef(n)] = append(stored[NormalizeImageRef(n)], d)
		}
	}
	var out []SBOMArtifact
	seen := map[string]bool{}
	for _, img := range pkg.Images {
		ref := NormalizeImageRef(img)
		if seen[ref] {
			continue
		}
		seen[ref] = true
		ds := stored[ref]
		if len(ds) == 0 {
			continue
		}
		var art *SBOMArtifact
		for _, d := range ds {
			art = artifactOf(d, a)
			if art == nil {
				break
			}
		}
		if art != nil {
			art.Image = img
			out = append(out, *art)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Image < out[j].Image })
	return out
}

// storedInfo is the parsed blob d names, when the package holds it under
// its own digest and it is of the kind d says.
func storedInfo(d Descriptor, a *archiveResult) *ManifestInfo {
	hexDigest := d.Digest[len("sha256:"):]
	m, ok := a.members[imageBlobPrefix+hexDigest]
	if !ok || m.dir || m.sha256 != hexDigest || m.info == nil || kindOf(d.MediaType) != m.info.Kind {
		return nil
	}
	return m.info
}

// artifactOf says what d is when it is not a container image (nil when it
// is one, or when the package does not prove it is not).
func artifactOf(d Descriptor, a *archiveResult) *SBOMArtifact {
	info := storedInfo(d, a)
	if info == nil {
		return nil
	}
	art := &SBOMArtifact{Digest: d.Digest, MediaType: d.MediaType}
	switch info.Kind {
	case "manifest":
		if info.Container {
			return nil
		}
		art.ConfigMediaType, art.LayerMediaTypes = info.ConfigMediaType, info.LayerMediaTypes
	case "index":
		if len(info.Children) == 0 {
			return nil
		}
		for _, c := range info.Children {
			ci := storedInfo(c, a)
			if ci == nil || ci.Kind != "manifest" || ci.Container {
				return nil
			}
			if art.ConfigMediaType == "" {
				art.ConfigMediaType, art.LayerMediaTypes = ci.ConfigMediaType, ci.LayerMediaTypes
			}
		}
	}
	art.Kind = artifactKind(art.ConfigMediaType)
	return art
}
