// Package releasefmt reads the files a release carries besides archives:
// krew plugin manifests and sha256sum checksum files. It is kept apart, with
// few dependencies, because both are parsed from untrusted input and fuzzed.
package releasefmt

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// Krew's manifest identity: the only apiVersion and kind krew v0.4 installs.
const (
	KrewAPIVersion = "krew.googlecontainertools.github.com/v1alpha2"
	KrewKind       = "Plugin"
)

// KrewManifest is a krew plugin manifest (dist/krew/<name>.yaml).
type KrewManifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec KrewSpec `json:"spec"`
}

// KrewSpec is a manifest's spec.
type KrewSpec struct {
	Version          string         `json:"version"`
	Homepage         string         `json:"homepage,omitempty"`
	ShortDescription string         `json:"shortDescription"`
	Description      string         `json:"description,omitempty"`
	Caveats          string         `json:"caveats,omitempty"`
	Platforms        []KrewPlatform `json:"platforms"`
}

// KrewPlatform is one archive of a manifest and the platforms it serves.
type KrewPlatform struct {
	URI      string              `json:"uri"`
	SHA256   string              `json:"sha256"`
	Bin      string              `json:"bin"`
	Files    []KrewFileOperation `json:"files,omitempty"`
	Selector *LabelSelector      `json:"selector"`
}

// LabelSelector is a platform's selector, as Kubernetes label selectors are
// written; krew matches it against the labels os and arch.
type LabelSelector struct {
	MatchLabels      map[string]string     `json:"matchLabels,omitempty"`
	MatchExpressions []SelectorRequirement `json:"matchExpressions,omitempty"`
}

// SelectorRequirement is one matchExpressions entry.
type SelectorRequirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values,omitempty"`
}

// KrewFileOperation copies From (a glob in the archive) to To.
type KrewFileOperation struct {
	From string `json:"from"`
	To   string `json:"to"`
}

var (
	krewName = regexp.MustCompile(`^[\w-]+$`)
	SHA256Re = regexp.MustCompile(`^[a-f0-9]{64}$`)
	// KrewVersion is Semantic Versioning 2.0.0 with the leading "v" krew requires.
	KrewVersion = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
		`(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?` +
		`(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?$`)
	// Names Windows reserves, which krew refuses as plugin names.
	windowsReserved = []string{"CON", "PRN", "AUX", "NUL", "COM1", "COM2", "COM3", "COM4",
		"COM5", "COM6", "COM7", "COM8", "COM9", "LPT1", "LPT2", "LPT3", "LPT4", "LPT5",
		"LPT6", "LPT7", "LPT8", "LPT9"}
)

// ParseKrewManifest reads a manifest strictly (an unknown field is an
// error: krew would ignore it, so it is most likely a mistake) and validates
// it by krew's rules. name is the name the manifest must carry: krew
// installs a manifest only under the name of its file.
func ParseKrewManifest(b []byte, name string) (*KrewManifest, error) {
	var m KrewManifest
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		return nil, fmt.Errorf("krew manifest: %w", err)
	}
	if err := m.Validate(name); err != nil {
		return nil, err
	}
	return &m, nil
}

// Validate applies the rules krew v0.4 applies before it installs a
// manifest: apiVersion and kind, a safe name equal to name, a one-line
// short description, a semantic version with a leading v, and platforms
// with uri, a sha256, bin, a selector on os/arch only and well-formed file
// operations.
func (m *KrewManifest) Validate(name string) error {
	switch {
	case m.APIVersion != KrewAPIVersion:
		return fmt.Errorf("krew manifest: apiVersion is %q, krew installs only %q", m.APIVersion, KrewAPIVersion)
	case m.Kind != KrewKind:
		return fmt.Errorf("krew manifest: kind is %q, want %q", m.Kind, KrewKind)
	case !safeKrewName(m.Metadata.Name):
		return fmt.Errorf("krew manifest: metadata.name %q is not allowed: it must match %s and not be a Windows device name", m.Metadata.Name, krewName)
	case m.Metadata.Name != name:
		return fmt.Errorf("krew manifest: metadata.name is %q, but krew installs it as %q (the file's name)", m.Metadata.Name, name)
	case m.Spec.ShortDescription == "":
		return errors.New("krew manifest: spec.shortDescription is empty")
	case strings.ContainsAny(m.Spec.ShortDescription, "\r\n"):
		return errors.New("krew manifest: spec.shortDescription has a line break")
	case !KrewVersion.MatchString(m.Spec.Version):
		return fmt.Errorf("krew manifest: spec.version %q is not a semantic version with a leading v (v1.2.3)", m.Spec.Version)
	case len(m.Spec.Platforms) == 0:
		return errors.New("krew manifest: spec.platforms is empty")
	}
	for i, p := range m.Spec.Platforms {
		if err := p.validate(); err != nil {
			return fmt.Errorf("krew manifest: spec.platforms[%d]: %w", i, err)
		}
	}
	return nil
}

func safeKrewName(n string) bool {
	if !krewName.MatchString(n) {
		return false
	}
	for _, w := range windowsReserved {
		if strings.EqualFold(w, n) {
			return false
		}
	}
	return true
}

func (p KrewPlatform) validate() error {
	switch {
	case p.URI == "":
		return errors.New("uri is empty")
	case !SHA256Re.MatchString(p.SHA256):
		return fmt.Errorf("sha256 %q is not 64 lowercase hex digits", p.SHA256)
	case p.Bin == "":
		return errors.New("bin is empty")
	case p.Files != nil && len(p.Files) == 0:
		return errors.New("files is given but empty")
	}
	for j, f := range p.Files {
		if f.From == "" || f.To == "" {
			return fmt.Errorf("files[%d]: both from and to must be set", j)
		}
	}
	s := p.Selector
	switch {
	case s == nil:
		return errors.New("selector is missing")
	case s.MatchLabels == nil && len(s.MatchExpressions) == 0:
		return errors.New("selector is empty")
	case s.MatchLabels != nil && len(s.MatchLabels) == 0:
		return errors.New("selector.matchLabels is given but empty")
	case s.MatchExpressions != nil && len(s.MatchExpressions) == 0:
		return errors.New("selector.matchExpressions is given but empty")
	}
	for k := range s.MatchLabels {
		if k != "os" && k != "arch" {
			return fmt.Errorf("selector key %q: krew selects only on os and arch", k)
		}
	}
	for _, e := range s.MatchExpressions {
		if e.Key != "os" && e.Key != "arch" {
			return fmt.Errorf("selector key %q: krew selects only on os and arch", e.Key)
		}
	}
	return nil
}

// Platform is the os/arch a platform entry's matchLabels name ("" where a
// label is absent).
func (p KrewPlatform) Platform() (goos, goarch string) {
	if p.Selector == nil {
		return "", ""
	}
	return p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
}

// KrewName is the krew plugin name of a binary: kubectl-bundle-verify is
// installed as bundle-verify (krew links it as kubectl-bundle_verify).
func KrewName(binary string) string {
	return strings.TrimPrefix(binary, "kubectl-")
}
