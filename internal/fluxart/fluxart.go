// Package fluxart reads a Flux OCI artifact's content (the tar+gzip layer
// a package carries as an images: entry) and builds it as Flux would: it
// finds the tree's Flux Kustomizations, builds each one's path with
// kustomize (the library; a path without a kustomization file gets the
// one Flux generates), and lists the Cluster API clusters they create and
// the names the Kustomizations use for them (healthChecks, dependsOn).
//
// The content is untrusted: it is read within limits, nothing of it is
// written to disk, and a kustomization that names anything outside the
// artifact (a URL, a path out of the tree) is refused before any build,
// so a build never reaches the network or the host's files.
package fluxart

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Limits of what Read takes from an artifact.
const (
	MaxFiles     = 10000 // entries of any type
	MaxFileBytes = 8 << 20
	MaxBytes     = 64 << 20
	MaxNameBytes = 1024
	MaxDepth     = 32 // directories in a name
	// MaxVisits bounds the kustomizations one build reaches, counting a
	// directory once for each way it is reached (kustomize builds it as
	// often): a tree of kustomizations that each name two others costs
	// 2^depth.
	MaxVisits = 1000
	// MaxKustomizations bounds the Flux Kustomizations read.
	MaxKustomizations = 500
)

// Tree is an artifact's content, in memory, rooted at "/".
type Tree struct {
	fs    filesys.FileSystem
	files []string // regular files, sorted, each "/"-rooted
	// Skipped names the entries that are neither files nor directories
	// (links, devices): Flux's artifacts carry none, and none is followed.
	Skipped []string
	checked *error
}

// Read takes a Flux artifact's content layer (tar+gzip).
func Read(r io.Reader) (*Tree, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("flux artifact: not gzip: %w", err)
	}
	defer zr.Close()
	t := &Tree{fs: filesys.MakeFsInMemory()}
	tr := tar.NewReader(zr)
	var total int64
	entries := 0
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("flux artifact: %w", err)
		}
		if entries++; entries > MaxFiles {
			return nil, fmt.Errorf("flux artifact: more than %d entries", MaxFiles)
		}
		name, err := cleanName(h.Name)
		if err != nil {
			return nil, err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if name != "/" {
				if err := t.fs.MkdirAll(name); err != nil {
					return nil, fmt.Errorf("flux artifact: %s: %w", h.Name, err)
				}
			}
			continue
		case tar.TypeReg:
		default:
			t.Skipped = append(t.Skipped, name)
			continue
		}
		if name == "/" || seen[name] {
			return nil, fmt.Errorf("flux artifact: entry %q twice or without a name", h.Name)
		}
		if h.Size > MaxFileBytes {
			return nil, fmt.Errorf("flux artifact: %s is %d bytes, more than %d", h.Name, h.Size, MaxFileBytes)
		}
		b, err := io.ReadAll(io.LimitReader(tr, MaxFileBytes+1))
		if err != nil {
			return nil, fmt.Errorf("flux artifact: %s: %w", h.Name, err)
		}
		if len(b) > MaxFileBytes {
			return nil, fmt.Errorf("flux artifact: %s is more than %d bytes", h.Name, MaxFileBytes)
		}
		if total += int64(len(b)); total > MaxBytes {
			return nil, fmt.Errorf("flux artifact: more than %d bytes in all", MaxBytes)
		}
		if err := t.fs.MkdirAll(path.Dir(name)); err != nil {
			return nil, fmt.Errorf("flux artifact: %s: %w", h.Name, err)
		}
		if t.fs.IsDir(name) {
			return nil, fmt.Errorf("flux artifact: %s is both a directory and a file", h.Name)
		}
		if err := t.fs.WriteFile(name, b); err != nil {
			return nil, fmt.Errorf("flux artifact: %s: %w", h.Name, err)
		}
		seen[name] = true
		t.files = append(t.files, name)
	}
	sort.Strings(t.files)
	return t, nil
}

// cleanName is an entry's name rooted at "/", refusing one that leaves
// the tree.
func cleanName(n string) (string, error) {
	if len(n) > MaxNameBytes {
		return "", fmt.Errorf("flux artifact: an entry's name is longer than %d bytes", MaxNameBytes)
	}
	if strings.ContainsRune(n, 0) || strings.Contains(n, `\`) {
		return "", fmt.Errorf("flux artifact: entry name %q", n)
	}
	if strings.Count(n, "/") > MaxDepth {
		return "", fmt.Errorf("flux artifact: entry %q is more than %d directories deep", n, MaxDepth)
	}
	for _, part := range strings.Split(n, "/") {
		if part == ".." {
			return "", fmt.Errorf("flux artifact: entry %q leaves the tree", n)
		}
	}
	return path.Clean("/" + n), nil
}

// Files lists the tree's regular files, "/"-rooted and sorted.
func (t *Tree) Files() []string { return append([]string(nil), t.files...) }

// Object is one object of a build, or of the tree's files.
type Object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Namespace  string `json:"namespace,omitempty"`
	// File is where it was read (tree files only).
	File string `json:"file,omitempty"`
}

// Ref is a reference by kind and name, as a Kustomization's healthChecks
// and dependsOn hold them.
type Ref struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Name       string `json:"name"`
	Namespace  string `json:"namespace,omitempty"`
}

// Kustomization is a Flux Kustomization found in the tree.
type Kustomization struct {
	Object
	// Path is spec.path, as written.
	Path         string `json:"path"`
	HealthChecks []Ref  `json:"healthChecks,omitempty"`
	DependsOn    []Ref  `json:"dependsOn,omitempty"`
	// Substitutes says spec.postBuild substitutes variables (substitute or
	// substituteFrom): ${VAR} in what it builds are the slot's to set.
	Substitutes bool `json:"substitutes,omitempty"`
	// Substitute are spec.postBuild.substitute's values.
	Substitute map[string]string `json:"substitute,omitempty"`
	// NamePrefix and NameSuffix are spec.namePrefix and spec.nameSuffix,
	// which Flux applies to every name it builds.
	NamePrefix string `json:"namePrefix,omitempty"`
	NameSuffix string `json:"nameSuffix,omitempty"`
	// SlotSets: spec.postBuild.substituteFrom names the optional ConfigMap
	// SlotConfigMap (in the Kustomization's namespace), which each slot
	// writes with its own values of the artifact's variables.
	SlotSets bool `json:"slotSets,omitempty"`
	// SubstituteStrategy is spec.postBuild.substituteStrategy ("" is
	// Flux's default, WithVariables).
	SubstituteStrategy string `json:"substituteStrategy,omitempty"`
	// MaybeNoVariables: nothing sure to set a variable (no substitute
	// entry, every substituteFrom optional) and substituteStrategy is not
	// Always. Where none is set, Flux's default strategy substitutes
	// nothing, not even ${VAR:=default}'s default.
	MaybeNoVariables bool `json:"maybeNoVariables,omitempty"`
}

// SlotConfigMap is the ConfigMap a slot writes, in the namespace of each
// Flux Kustomization that substitutes from it, with the slot's values of
// the artifact's variables (docs/krops.md, "Two slots side by side"). It
// must be optional in substituteFrom: a site without the tool has none,
// and Flux then substitutes the variables' defaults.
const SlotConfigMap = "kubectl-bundle-slot"

// slotSets says spec.postBuild.substituteFrom's entries name
// SlotConfigMap, optional. They are read as any YAML (an entry of another
// shape names nothing here, and never hides the Kustomization).
func slotSets(refs []any) bool {
	return slices.ContainsFunc(refs, func(r any) bool {
		var ref struct {
			Kind     string `json:"kind"`
			Name     string `json:"name"`
			Optional bool   `json:"optional"`
		}
		b, err := json.Marshal(r)
		return err == nil && json.Unmarshal(b, &ref) == nil && ref.Kind == "ConfigMap" && ref.Name == SlotConfigMap && ref.Optional
	})
}

// allOptional says every substituteFrom entry is optional (read as any
// YAML, as slotSets reads them): Flux may then find no variable at all.
func allOptional(refs []any) bool {
	return !slices.ContainsFunc(refs, func(r any) bool {
		var ref struct {
			Optional bool `json:"optional"`
		}
		b, err := json.Marshal(r)
		return err != nil || json.Unmarshal(b, &ref) != nil || !ref.Optional
	})
}

type fluxKustomization struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		Path         string `json:"path"`
		NamePrefix   string `json:"namePrefix"`
		NameSuffix   string `json:"nameSuffix"`
		HealthChecks []Ref  `json:"healthChecks"`
		DependsOn    []Ref  `json:"dependsOn"`
		PostBuild    *struct {
			Substitute         map[string]string `json:"substitute"`
			SubstituteFrom     []any             `json:"substituteFrom"`
			SubstituteStrategy string            `json:"substituteStrategy"`
		} `json:"postBuild"`
	} `json:"spec"`
}

// isFluxKustomization: kind Kustomization of Flux's API group (kustomize's
// own kustomization files have apiVersion kustomize.config.k8s.io).
func isFluxKustomization(apiVersion, kind string) bool {
	return kind == "Kustomization" && strings.HasPrefix(apiVersion, "kustomize.toolkit.fluxcd.io/")
}

// documents splits a YAML file into its documents.
func documents(b []byte) [][]byte {
	var out [][]byte
	text := strings.ReplaceAll("\n"+string(b), "\r\n", "\n")
	for _, d := range strings.Split(text, "\n---") {
		// The rest of a separator line ("--- # comment") is not content.
		if first, rest, ok := strings.Cut(d, "\n"); ok && (strings.TrimSpace(first) == "" || strings.HasPrefix(strings.TrimSpace(first), "#")) {
			d = rest
		}
		if !onlyComments(d) {
			out = append(out, []byte(d))
		}
	}
	return out
}

func onlyComments(d string) bool {
	for _, l := range strings.Split(d, "\n") {
		if l = strings.TrimSpace(l); l != "" && l != "..." && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

func isYAML(name string) bool {
	return strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")
}

// Kustomizations lists the Flux Kustomizations in the tree's YAML files,
// in file order. A document that is not YAML is skipped: Flux's own build
// of the tree meets it where it is used.
func (t *Tree) Kustomizations() []Kustomization {
	var out []Kustomization
	for _, f := range t.files {
		if !isYAML(f) {
			continue
		}
		b, err := t.fs.ReadFile(f)
		if err != nil {
			continue
		}
		for _, d := range documents(b) {
			var k fluxKustomization
			if yaml.Unmarshal(d, &k) != nil || !isFluxKustomization(k.APIVersion, k.Kind) {
				continue
			}
			p := k.Spec.PostBuild
			out = append(out, Kustomization{
				Object: Object{APIVersion: k.APIVersion, Kind: k.Kind, Name: k.Metadata.Name, Namespace: k.Metadata.Namespace, File: f},
				Path:   k.Spec.Path, HealthChecks: k.Spec.HealthChecks, DependsOn: k.Spec.DependsOn,
				Substitutes: p != nil && (len(p.Substitute) > 0 || len(p.SubstituteFrom) > 0),
				NamePrefix:  k.Spec.NamePrefix, NameSuffix: k.Spec.NameSuffix,
			})
			if p != nil {
				out[len(out)-1].Substitute = p.Substitute
				out[len(out)-1].SlotSets = slotSets(p.SubstituteFrom)
				out[len(out)-1].SubstituteStrategy = p.SubstituteStrategy
				out[len(out)-1].MaybeNoVariables = p.SubstituteStrategy != "Always" && len(p.Substitute) == 0 && allOptional(p.SubstituteFrom)
			}
		}
	}
	return out
}

// kustomizationFile is the kustomization file of dir, or "".
func (t *Tree) kustomizationFile(dir string) string {
	for _, n := range []string{"kustomization.yaml", "kustomization.yml", "Kustomization"} {
		if p := path.Join(dir, n); t.fs.Exists(p) && !t.fs.IsDir(p) {
			return p
		}
	}
	return ""
}

// Build builds a Flux Kustomization's path (relative to the artifact's
// root, as spec.path) as kustomize-controller does: with the path's
// kustomization file, else with the one Flux generates (every YAML
// manifest under the path, and each directory below that has a
// kustomization file of its own). Every kustomization the build can reach
// is checked first: a resource, component or base outside the tree (a
// URL, an absolute path, a path that leaves it) is refused.
func (t *Tree) Build(p string) ([]Object, error) {
	dir := path.Clean("/" + p)
	if slices.Contains(strings.Split(p, "/"), "..") || !t.fs.IsDir(dir) {
		return nil, fmt.Errorf("path %q: no such directory in the artifact", p)
	}
	if t.kustomizationFile(dir) == "" {
		if err := t.generate(dir); err != nil {
			return nil, err
		}
		// Flux generates it for this build only: another Kustomization's
		// path above this one must not see it.
		defer func() { _ = t.fs.RemoveAll(path.Join(dir, "kustomization.yaml")) }()
	}
	if err := t.checkAll(); err != nil {
		return nil, err
	}
	visits := 0
	if err := t.countVisits(dir, map[string]bool{}, &visits); err != nil {
		return nil, fmt.Errorf("path %q: %w", p, err)
	}
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = types.LoadRestrictionsRootOnly
	rm, err := krusty.MakeKustomizer(opts).Run(t.fs, dir)
	if err != nil {
		return nil, fmt.Errorf("path %q: kustomize build: %w", p, err)
	}
	var out []Object
	for _, r := range rm.Resources() {
		out = append(out, Object{APIVersion: r.GetApiVersion(), Kind: r.GetKind(), Name: r.GetName(), Namespace: r.GetNamespace()})
	}
	return out, nil
}

// generate writes the kustomization Flux generates for dir.
func (t *Tree) generate(dir string) error {
	var res []string
	prefix := strings.TrimSuffix(dir, "/") + "/"
	sub := map[string]bool{}
	for _, f := range t.files {
		if !strings.HasPrefix(f, prefix) || !isYAML(f) {
			continue
		}
		rel := strings.TrimPrefix(f, prefix)
		// A directory below with a kustomization of its own is one resource.
		parts := strings.Split(rel, "/")
		own := ""
		for i := 1; i < len(parts); i++ {
			if d := prefix + strings.Join(parts[:i], "/"); t.kustomizationFile(d) != "" {
				own = strings.Join(parts[:i], "/")
				break
			}
		}
		if own != "" {
			if !sub[own] {
				sub[own] = true
				res = append(res, own)
			}
			continue
		}
		b, err := t.fs.ReadFile(f)
		if err != nil || !isManifest(b) {
			continue
		}
		res = append(res, rel)
	}
	k := map[string]any{"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": res}
	b, err := yaml.Marshal(k)
	if err != nil {
		return err
	}
	return t.fs.WriteFile(path.Join(dir, "kustomization.yaml"), b)
}

// isManifest: every document has an apiVersion and a kind (Flux skips
// YAML files that are not Kubernetes manifests).
func isManifest(b []byte) bool {
	docs := documents(b)
	if len(docs) == 0 {
		return false
	}
	for _, d := range docs {
		var o struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if yaml.Unmarshal(d, &o) != nil || o.APIVersion == "" || o.Kind == "" {
			return false
		}
	}
	return true
}

// dirFields are the fields of a kustomization whose entries name a file
// or directory to load (a generator or transformer entry may instead be
// an inline object, which names nothing).
var dirFields = []string{"resources", "components", "bases", "generators", "transformers", "validators", "crds", "configurations"}

// localEntries reads a kustomization file's entries that name files or
// directories, refusing a URL anywhere in it and an entry not in the tree.
func (t *Tree) localEntries(kf string) ([]string, error) {
	b, err := t.fs.ReadFile(kf)
	if err != nil {
		return nil, err
	}
	var all map[string]any
	if err := yaml.Unmarshal(b, &all); err != nil {
		return nil, fmt.Errorf("%s: %w", kf, err)
	}
	// kustomize fetches any file a kustomization names by URL (patches,
	// configurations, openapi), not only resources.
	if u := firstURL(all); u != "" {
		return nil, fmt.Errorf("%s: %q is not in the artifact (a site in the gap builds only what the package carries)", kf, u)
	}
	dir := path.Dir(kf)
	var out []string
	for _, field := range dirFields {
		list, _ := all[field].([]any)
		for _, v := range list {
			e, ok := v.(string)
			if !ok || strings.Contains(e, "\n") {
				continue // an inline object
			}
			p := path.Join(dir, e)
			if strings.HasPrefix(e, "/") || !t.fs.Exists(p) {
				return nil, fmt.Errorf("%s: %s entry %q is not in the artifact (a remote base, or a file the artifact lacks; a site in the gap builds only what the package carries)", kf, field, e)
			}
			out = append(out, p)
		}
	}
	return out, nil
}

// checkAll checks every kustomization file of the tree, reached or not,
// before any build: what kustomize loads is never a URL, a repository or
// a path outside the tree.
func (t *Tree) checkAll() error {
	if t.checked != nil {
		return *t.checked
	}
	var err error
	for _, f := range t.files {
		switch path.Base(f) {
		case "kustomization.yaml", "kustomization.yml", "Kustomization":
			if _, err = t.localEntries(f); err != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	t.checked = &err
	return err
}

// countVisits counts the kustomization directories a build of dir
// reaches, each as often as it is reached, refusing more than MaxVisits.
func (t *Tree) countVisits(dir string, stack map[string]bool, n *int) error {
	if *n++; *n > MaxVisits {
		return fmt.Errorf("its kustomizations reach more than %d kustomizations, counting repeats: not built", MaxVisits)
	}
	kf := t.kustomizationFile(dir)
	if kf == "" || stack[dir] {
		return nil // a cycle: kustomize refuses it
	}
	stack[dir] = true
	defer delete(stack, dir)
	entries, err := t.localEntries(kf)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if t.fs.IsDir(e) {
			if err := t.countVisits(e, stack, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// firstURL is the first string of v that names a URL.
func firstURL(v any) string {
	switch x := v.(type) {
	case string:
		if strings.Contains(x, "://") {
			return x
		}
	case []any:
		for _, e := range x {
			if u := firstURL(e); u != "" {
				return u
			}
		}
	case map[string]any:
		for _, e := range x {
			if u := firstURL(e); u != "" {
				return u
			}
		}
	}
	return ""
}

// Cluster is a Cluster API cluster a Kustomization of the tree creates.
type Cluster struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	// Kustomization is the Flux Kustomization whose build holds it.
	Kustomization string `json:"kustomization"`
	// Variable is the postBuild variable its name is ("" when the name is
	// fixed): a slot can give it a name of its own.
	Variable string `json:"variable,omitempty"`
	// Default is the variable's default (${VAR:=default}, :-, =, -), the
	// name a site gets that sets none; "" when it has none.
	Default string `json:"default,omitempty"`
	// SlotSets: the Kustomization substitutes from SlotConfigMap, so a slot
	// sets Variable (in KustomizationNamespace, where that ConfigMap is).
	SlotSets               bool   `json:"slotSets,omitempty"`
	KustomizationNamespace string `json:"kustomizationNamespace,omitempty"`
	// DefaultUnsubstituted: where no slot writes SlotConfigMap (a site
	// without the tool), Flux may substitute nothing and apply the name as
	// ${VAR:=default}, which the API server refuses: the Kustomization
	// substitutes with Flux's default strategy (WithVariables) and nothing
	// else sets a variable (Kustomization.MaybeNoVariables).
	DefaultUnsubstituted bool `json:"defaultUnsubstituted,omitempty"`
	// NamedBy lists the Kustomizations whose healthChecks or dependsOn use
	// its name ("KIND/NAME", healthChecks' kind Cluster or a dependsOn of
	// a Kustomization whose name starts with it).
	NamedBy []string `json:"namedBy,omitempty"`
}

// Clusters builds every Flux Kustomization of the tree and lists the
// Cluster API clusters they create. A build that fails is an error naming
// its Kustomization: what cannot be built cannot be checked.
func (t *Tree) Clusters() ([]Cluster, error) {
	if err := t.checkAll(); err != nil {
		return nil, err
	}
	ks := t.Kustomizations()
	if len(ks) > MaxKustomizations {
		return nil, fmt.Errorf("more than %d Flux Kustomizations: not built", MaxKustomizations)
	}
	var out []Cluster
	built := map[string][]Object{}
	for _, k := range ks {
		key := path.Clean("/" + k.Path)
		objs, ok := built[key]
		if !ok {
			var err error
			if objs, err = t.Build(k.Path); err != nil {
				return nil, fmt.Errorf("flux Kustomization %s (%s): %w", k.Name, k.File, err)
			}
			built[key] = objs
		}
		for _, o := range objs {
			if o.Kind != "Cluster" || !strings.HasPrefix(o.APIVersion, "cluster.x-k8s.io/") {
				continue
			}
			name := k.NamePrefix + o.Name + k.NameSuffix
			c := Cluster{Name: name, Namespace: o.Namespace, Kustomization: k.Name}
			if v, d, ok := variable(o.Name); ok && k.Substitutes {
				if val, set := k.Substitute[v]; set {
					// Set by the artifact itself: the same for every slot.
					c.Name = k.NamePrefix + val + k.NameSuffix
				} else {
					c.Variable, c.Default = v, d
					c.SlotSets, c.KustomizationNamespace = k.SlotSets, k.Namespace
					c.DefaultUnsubstituted = k.SlotSets && k.MaybeNoVariables
					if c.KustomizationNamespace == "" {
						// Applied without one: into Flux's own namespace, as
						// the site's bootstrap applies its Kustomizations.
						c.KustomizationNamespace = "flux-system"
					}
				}
			}
			out = append(out, c)
		}
	}
	for i := range out {
		for _, k := range ks {
			for _, h := range k.HealthChecks {
				if h.Kind == "Cluster" && h.Name == out[i].Name {
					out[i].NamedBy = append(out[i].NamedBy, "healthChecks of "+k.Name)
				}
			}
			for _, d := range k.DependsOn {
				if d.Name == out[i].Name || strings.HasPrefix(d.Name, out[i].Name+"-") {
					out[i].NamedBy = append(out[i].NamedBy, "dependsOn of "+k.Name+" ("+d.Name+")")
				}
			}
		}
	}
	return out, nil
}

// variable reads a name that is one Flux variable, ${VAR} or
// ${VAR:=default}.
func variable(name string) (v, def string, ok bool) {
	in, found := strings.CutPrefix(name, "${")
	if !found || !strings.HasSuffix(in, "}") {
		return "", "", false
	}
	in = strings.TrimSuffix(in, "}")
	// Flux's defaults: ${VAR:=default}, ${VAR:-default}, ${VAR=default},
	// ${VAR-default}; a variable name is letters, digits and _.
	end := strings.IndexFunc(in, func(r rune) bool {
		return !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	})
	v, rest := in, ""
	if end >= 0 {
		v, rest = in[:end], in[end:]
	}
	for _, op := range []string{":=", ":-", "=", "-"} {
		if d, ok := strings.CutPrefix(rest, op); ok {
			def, rest = d, ""
			break
		}
	}
	if v == "" || rest != "" || strings.ContainsAny(def, "${}") {
		return "", "", false
	}
	return v, def, true
}
