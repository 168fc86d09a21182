package verify

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// The OCI layout zarf stores a package's images in.
const (
	controlImageIndex = "images/index.json"
	imageBlobPrefix   = "images/blobs/sha256/"
	// MaxImageIndexSize caps images/index.json: it is read whole into memory.
	MaxImageIndexSize = 4 << 20
	// maxSniffedBlob is the largest blob whose media type is read: manifests
	// and indexes are small, layers are only hashed.
	maxSniffedBlob = 1 << 20
)

// Media types of what an image pin can name.
const (
	MediaTypeOCIIndex        = "application/vnd.oci.image.index.v1+json"
	MediaTypeOCIManifest     = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeDockerList      = "application/vnd.docker.distribution.manifest.list.v2+json"
	MediaTypeDockerManifest  = "application/vnd.docker.distribution.manifest.v2+json"
	refNameAnnotation        = "org.opencontainers.image.ref.name"
	baseNameAnnotation       = "org.opencontainers.image.base.name"
	containerdNameAnnotation = "io.containerd.image.name"
)

// DigestPolicy is the digest-pin policy: every image in zarf.yaml pinned
// as repo:tag@sha256:<64 hex>, the same pin wherever the tag appears, and
// the package's OCI layout holding what each pin names.
type DigestPolicy struct {
	Require bool
	// Exempt are image references the policy does not apply to, as
	// zarf.yaml spells them (or the same image normalized).
	Exempt []string
}

// DigestReport is what the digest-pin check found.
type DigestReport struct {
	// Images counts the distinct image references in zarf.yaml.
	Images    int              `json:"images"`
	Exempt    []string         `json:"exempt,omitempty"`
	Offenders []DigestOffender `json:"offenders,omitempty"`
}

// DigestOffender is one image reference that breaks the policy, and why.
type DigestOffender struct {
	Image      string   `json:"image"`
	Components []string `json:"components"`
	Problem    string   `json:"problem"`
}

// ImageIndex is the part of an OCI image layout's index.json the digest
// check reads.
type ImageIndex struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType,omitempty"`
	Manifests     []Descriptor `json:"manifests"`
}

// Descriptor is an OCI content descriptor.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Name is the image reference the descriptor is stored under, as zarf
// and oras name it ("" when it has none).
func (d Descriptor) Name() string {
	for _, k := range []string{refNameAnnotation, containerdNameAnnotation, baseNameAnnotation} {
		if v := d.Annotations[k]; v != "" {
			return v
		}
	}
	return ""
}

var sha256Digest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// ParseImageIndex parses an OCI layout's index.json from an untrusted
// package: size-capped, every descriptor with a sha256 digest.
func ParseImageIndex(b []byte) (*ImageIndex, error) {
	if len(b) > MaxImageIndexSize {
		return nil, fmt.Errorf("%s is %d bytes, over the %d byte limit", controlImageIndex, len(b), MaxImageIndexSize)
	}
	var idx ImageIndex
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", controlImageIndex, err)
	}
	if idx.SchemaVersion != 2 {
		return nil, fmt.Errorf("%s has schemaVersion %d, want 2", controlImageIndex, idx.SchemaVersion)
	}
	for i, d := range idx.Manifests {
		if !sha256Digest.MatchString(d.Digest) {
			return nil, fmt.Errorf("%s manifests[%d] has digest %q, not sha256:<64 hex>", controlImageIndex, i, truncate(d.Digest, 80))
		}
	}
	return &idx, nil
}

// ImagePin is an image reference split into its parts, the name
// normalized as zarf stores it (docker.io/library/ added where implied).
type ImagePin struct {
	Name, Tag, Digest string
}

// String is the normalized reference.
func (p ImagePin) String() string {
	s := p.Name
	if p.Tag != "" {
		s += ":" + p.Tag
	}
	if p.Digest != "" {
		s += "@" + p.Digest
	}
	return s
}

var (
	tagPattern  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	namePattern = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$`)
	hostPattern = regexp.MustCompile(`^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*|\[[0-9A-Fa-f:]+\])(?::[0-9]+)?$`)
)

// ParseImageRef splits ref (host/path:tag@algo:hex, tag and digest each
// optional) and normalizes its name the way zarf and Docker do.
func ParseImageRef(ref string) (ImagePin, error) {
	var p ImagePin
	rest := ref
	if i := strings.Index(rest, "@"); i >= 0 {
		rest, p.Digest = rest[:i], rest[i+1:]
		if !strings.Contains(p.Digest, ":") {
			return p, fmt.Errorf("%q: digest %q has no algorithm", ref, p.Digest)
		}
	}
	if i := strings.LastIndex(rest, ":"); i >= 0 && !strings.Contains(rest[i+1:], "/") {
		rest, p.Tag = rest[:i], rest[i+1:]
		if !tagPattern.MatchString(p.Tag) {
			return p, fmt.Errorf("%q: %q is not a valid tag", ref, p.Tag)
		}
	}
	host, path := "docker.io", rest
	if i := strings.Index(rest, "/"); i >= 0 {
		if first := rest[:i]; strings.ContainsAny(first, ".:") || first == "localhost" || strings.HasPrefix(first, "[") {
			host, path = first, rest[i+1:]
			if !hostPattern.MatchString(host) {
				return p, fmt.Errorf("%q: %q is not a valid registry host", ref, host)
			}
		}
	}
	if host == "index.docker.io" {
		host = "docker.io"
	}
	if host == "docker.io" && !strings.Contains(path, "/") {
		path = "library/" + path
	}
	if !namePattern.MatchString(path) {
		return p, fmt.Errorf("%q: %q is not a valid repository name", ref, path)
	}
	p.Name = host + "/" + path
	if len(p.Name) > 255 {
		return p, fmt.Errorf("%q: repository name is longer than 255 characters", truncate(ref, 80))
	}
	return p, nil
}

// checkDigests applies the digest-pin policy to the package's images and
// its OCI layout.
func (v *Verifier) checkDigests(r *Report, a *archiveResult, pkg *ZarfPackage) {
	dr := &DigestReport{}
	r.Digests = dr
	exempt := map[string]bool{}
	for _, e := range v.opts.Digests.Exempt {
		exempt[e] = true
		if p, err := ParseImageRef(e); err == nil {
			exempt[p.String()] = true
		}
	}
	// Each distinct reference once, with the components naming it.
	var order []string
	where := map[string][]string{}
	for _, u := range pkg.ImageUses {
		if _, seen := where[u.Ref]; !seen {
			order = append(order, u.Ref)
		}
		if c := where[u.Ref]; len(c) == 0 || c[len(c)-1] != u.Component {
			where[u.Ref] = append(c, u.Component)
		}
	}
	dr.Images = len(order)
	offend := func(ref, format string, args ...any) {
		dr.Offenders = append(dr.Offenders, DigestOffender{Image: ref, Components: where[ref], Problem: fmt.Sprintf(format, args...)})
	}

	var idx *ImageIndex
	var idxErr error
	switch b, ok := a.control[controlImageIndex]; {
	case a.controlErr[controlImageIndex] != nil:
		idxErr = a.controlErr[controlImageIndex]
	case !ok:
		idxErr = fmt.Errorf("the package has no %s", controlImageIndex)
	default:
		idx, idxErr = ParseImageIndex(b)
	}
	stored := map[string][]Descriptor{}
	if idx != nil {
		for _, d := range idx.Manifests {
			if p, err := ParseImageRef(d.Name()); err == nil {
				stored[p.String()] = append(stored[p.String()], d)
			}
		}
	}

	pinned := map[string]string{} // name:tag -> the first digest pinned for it
	pinnedBy := map[string]string{}
	for _, ref := range order {
		p, err := ParseImageRef(ref)
		switch {
		case exempt[ref] || (err == nil && exempt[p.String()]):
			dr.Exempt = append(dr.Exempt, ref)
			continue
		case err != nil:
			offend(ref, "not an image reference: %v", err)
			continue
		case p.Digest == "":
			offend(ref, "not pinned: no @sha256:<digest> (pin it as %s:%s@sha256:<64 hex>)", p.Name, tagOr(p.Tag))
			continue
		case p.Tag == "":
			offend(ref, "no tag: pin it as %s:<tag>@%s (the tag is for people, the digest for machines)", p.Name, p.Digest)
			continue
		case !sha256Digest.MatchString(p.Digest):
			offend(ref, "digest %q is not sha256:<64 hex>", p.Digest)
			continue
		}
		key := p.Name + ":" + p.Tag
		if first, ok := pinned[key]; ok && first != p.Digest {
			offend(ref, "%s is pinned to two digests: %s here, %s in %s", key, p.Digest, first, pinnedBy[key])
		} else if !ok {
			pinned[key], pinnedBy[key] = p.Digest, ref
		}
		if idxErr != nil {
			offend(ref, "its image cannot be checked: %v", idxErr)
			continue
		}
		if problem := storedMatches(p, stored[p.String()], a); problem != "" {
			offend(ref, "%s", problem)
		}
	}

	switch {
	case len(order) == 0:
		r.set(CheckDigests, Pass, "the package names no image")
	case len(dr.Offenders) > 0:
		n := len(dr.Offenders)
		r.set(CheckDigests, Fail, "%d of %d images break the digest-pin policy: %s: %s", n, dr.Images, dr.Offenders[0].Image, dr.Offenders[0].Problem)
	default:
		exempted := ""
		if len(dr.Exempt) > 0 {
			exempted = fmt.Sprintf(" (%d exempt)", len(dr.Exempt))
		}
		r.set(CheckDigests, Pass, "%d images pinned repo:tag@sha256, each stored as pinned%s", dr.Images-len(dr.Exempt), exempted)
	}
}

func tagOr(t string) string {
	if t == "" {
		return "<tag>"
	}
	return t
}

// storedMatches says what is wrong with the images stored under pin p's
// name ("" when the stored image is the one the digest names: the same
// digest, a blob with that content, and an index for an index).
func storedMatches(p ImagePin, ds []Descriptor, a *archiveResult) string {
	if len(ds) == 0 {
		return fmt.Sprintf("the package's OCI layout (%s) stores no image named %s", controlImageIndex, p)
	}
	for _, d := range ds {
		if d.Digest != p.Digest {
			return fmt.Sprintf("the package stores %s under this name, not the pinned %s", d.Digest, p.Digest)
		}
	}
	hexDigest := strings.TrimPrefix(p.Digest, "sha256:")
	m, ok := a.members[imageBlobPrefix+hexDigest]
	switch {
	case !ok || m.dir:
		return fmt.Sprintf("the pinned blob %s%s is missing from the package", imageBlobPrefix, hexDigest)
	case m.sha256 != hexDigest:
		return fmt.Sprintf("the blob %s%s hashes to sha256:%s: it is not what the pin names", imageBlobPrefix, hexDigest, m.sha256)
	}
	want := ds[0].MediaType
	if m.mediaType != "" && want != "" && kindOf(m.mediaType) != kindOf(want) {
		return fmt.Sprintf("%s is stored as %s but the blob is %s", p.Digest, want, m.mediaType)
	}
	if kindOf(m.mediaType) == "" && kindOf(want) == "" {
		return fmt.Sprintf("%s is neither an image index nor a manifest", p.Digest)
	}
	return ""
}

// kindOf is "index", "manifest" or "" for other media types.
func kindOf(mediaType string) string {
	switch mediaType {
	case MediaTypeOCIIndex, MediaTypeDockerList:
		return "index"
	case MediaTypeOCIManifest, MediaTypeDockerManifest:
		return "manifest"
	}
	return ""
}

// sniffMediaType reads what a small image blob is: the media type it
// declares, else an index or a manifest by its fields ("" when it is
// neither, e.g. a layer or a config).
func sniffMediaType(b []byte) string {
	var doc struct {
		SchemaVersion int               `json:"schemaVersion"`
		MediaType     string            `json:"mediaType"`
		Manifests     []json.RawMessage `json:"manifests"`
		Layers        []json.RawMessage `json:"layers"`
		Config        json.RawMessage   `json:"config"`
	}
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &doc) != nil || doc.SchemaVersion != 2 {
		return ""
	}
	switch {
	case doc.MediaType != "":
		return doc.MediaType
	case doc.Manifests != nil:
		return MediaTypeOCIIndex
	case doc.Config != nil:
		return MediaTypeOCIManifest
	}
	return ""
}
