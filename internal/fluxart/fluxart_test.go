package fluxart

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

// artifact is a tar+gzip of files (name -> content), as flux push artifact
// writes one; a name ending in "/" is a directory.
func artifact(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		h := &tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg}
		if strings.HasSuffix(n, "/") {
			h = &tar.Header{Name: n, Mode: 0o755, Typeflag: tar.TypeDir}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(files[n])); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// siteTree is shaped as the first site's config artifact: the mgmt tree's
// Flux Kustomizations (the cluster with a healthCheck on it, the add-ons
// depending on its CNI), a cluster directory without a kustomization file
// (Flux generates one), a CNI directory with one. NAME is the workload
// cluster's name as the build left it.
func siteTree(name, postBuild string) map[string]string {
	return map[string]string{
		"mgmt/local-host/flux-ks.yaml": `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: ` + name + `
  namespace: flux-system
spec:
  interval: 5m
  prune: true
  sourceRef:
    kind: OCIRepository
    name: flux-system
  path: ./mgmt/local-host/clusters/docker
  healthChecks:
    - apiVersion: cluster.x-k8s.io/v1beta2
      kind: Cluster
      name: ` + name + `
      namespace: default
` + postBuild + `---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: ` + name + `-cni
  namespace: flux-system
spec:
  path: ./mgmt/local-host/addons/cni
  sourceRef:
    kind: OCIRepository
    name: flux-system
  dependsOn:
    - name: ` + name + `
`,
		"mgmt/local-host/addons/flux-apps/flux-ks.yaml": `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: flux-apps
  namespace: flux-system
spec:
  path: ./mgmt/local-host/addons/flux-apps/apps
  sourceRef:
    kind: OCIRepository
    name: flux-system
  dependsOn:
    - name: ` + name + `-cni
`,
		"mgmt/local-host/addons/flux-apps/apps/podinfo.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: podinfo\n",
		"mgmt/local-host/clusters/docker/cluster.yaml": `apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata:
  name: ` + name + `
  namespace: default
spec:
  infrastructureRef:
    apiGroup: infrastructure.cluster.x-k8s.io
    kind: DockerCluster
    name: ` + name + `
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DockerCluster
metadata:
  name: ` + name + `
  namespace: default
`,
		"mgmt/local-host/clusters/docker/README.md":  "not a manifest\n",
		"mgmt/local-host/clusters/docker/notes.yaml": "just: notes\n",
		"mgmt/local-host/addons/cni/kustomization.yaml": `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - cni.yaml
`,
		"mgmt/local-host/addons/cni/cni.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cni\n  namespace: default\n",
	}
}

func read(t *testing.T, files map[string]string) *Tree {
	t.Helper()
	tree, err := Read(bytes.NewReader(artifact(t, files)))
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// TestClustersOfTheSiteTree: the site's workload cluster is found by
// building its Kustomization's path (a directory Flux generates the
// kustomization of: the README and the non-manifest YAML are left out, as
// Flux leaves them), with every Kustomization that names it.
func TestClustersOfTheSiteTree(t *testing.T) {
	tree := read(t, siteTree("local-workload", ""))
	ks := tree.Kustomizations()
	var names []string
	for _, k := range ks {
		names = append(names, k.Name)
	}
	if want := []string{"flux-apps", "local-workload", "local-workload-cni"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("Kustomizations %q, want %q", names, want)
	}
	got, err := tree.Clusters()
	if err != nil {
		t.Fatal(err)
	}
	want := []Cluster{{Name: "local-workload", Namespace: "default", Kustomization: "local-workload",
		NamedBy: []string{"healthChecks of local-workload", "dependsOn of local-workload-cni (local-workload)", "dependsOn of flux-apps (local-workload-cni)"}}}
	sort.Strings(want[0].NamedBy)
	for i := range got {
		sort.Strings(got[i].NamedBy)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Clusters\n got %+v\nwant %+v", got, want)
	}
	objs, err := tree.Build("./mgmt/local-host/clusters/docker")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].Kind != "Cluster" || objs[1].Kind != "DockerCluster" {
		t.Errorf("generated build: %+v, want the Cluster and the DockerCluster only", objs)
	}
}

// TestClustersNamedByAVariable: with the name a postBuild variable (the
// rename given ${WORKLOAD_CLUSTER_NAME:=local-workload}) and the
// Kustomization substituting, the cluster's name is the slot's to set;
// without postBuild it is a fixed (odd) name.
func TestClustersNamedByAVariable(t *testing.T) {
	const v = "${WORKLOAD_CLUSTER_NAME:=local-workload}"
	pb := "  postBuild:\n    substituteFrom:\n      - kind: ConfigMap\n        name: kb-slot\n        optional: true\n"
	got, err := read(t, siteTree(v, pb)).Clusters()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Variable != "WORKLOAD_CLUSTER_NAME" || got[0].Default != "local-workload" || got[0].Name != v {
		t.Errorf("with postBuild: %+v", got)
	}
	got, err = read(t, siteTree(v, "")).Clusters()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Variable != "" {
		t.Errorf("without postBuild the variable is never substituted: %+v", got)
	}
}

// TestClustersTheSlotNames: a Kustomization that substitutes from the
// optional SlotConfigMap lets each slot set the variable, in its own
// namespace; another ConfigMap, or SlotConfigMap not optional (a site
// without the tool would fail to reconcile), or an entry of another shape
// does not. Where nothing else is sure to set a variable and the
// strategy is Flux's default (WithVariables), a site without the
// ConfigMap gets no substitution at all (DefaultUnsubstituted), as Flux
// on the bench showed (docs/krops.md); substituteStrategy: Always, a
// substitute entry or a substituteFrom that is not optional avoid it.
func TestClustersTheSlotNames(t *testing.T) {
	const v = "${WORKLOAD_CLUSTER_NAME:=local-workload}"
	const slot = "      - kind: ConfigMap\n        name: kubectl-bundle-slot\n        optional: true\n"
	from := func(entries string) string { return "  postBuild:\n    substituteFrom:\n" + entries }
	for name, c := range map[string]struct {
		pb          string
		sets, unsub bool
	}{
		"the slot's, optional":    {from(slot), true, true},
		"with Always":             {"  postBuild:\n    substituteStrategy: Always\n    substituteFrom:\n" + slot, true, false},
		"with WithVariables":      {"  postBuild:\n    substituteStrategy: WithVariables\n    substituteFrom:\n" + slot, true, true},
		"with a substitute entry": {"  postBuild:\n    substitute:\n      KB_DEFAULTS: \"on\"\n    substituteFrom:\n" + slot, true, false},
		"after another":           {from("      - {kind: Secret, name: s}\n      - {kind: ConfigMap, name: kubectl-bundle-slot, optional: true}\n"), true, false},
		"after another optional":  {from("      - {kind: Secret, name: s, optional: true}\n" + slot), true, true},
		"not optional":            {from("      - kind: ConfigMap\n        name: kubectl-bundle-slot\n"), false, false},
		"another ConfigMap":       {from("      - kind: ConfigMap\n        name: kb-slot\n        optional: true\n"), false, false},
		"a Secret of that name":   {from("      - {kind: Secret, name: kubectl-bundle-slot, optional: true}\n"), false, false},
		"an entry of other shape": {from("      - kubectl-bundle-slot\n"), false, false},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := read(t, siteTree(v, c.pb)).Clusters()
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].Variable != "WORKLOAD_CLUSTER_NAME" || got[0].SlotSets != c.sets {
				t.Fatalf("%+v, want one cluster named by WORKLOAD_CLUSTER_NAME, SlotSets %v", got, c.sets)
			}
			if got[0].DefaultUnsubstituted != c.unsub {
				t.Errorf("DefaultUnsubstituted %v, want %v", got[0].DefaultUnsubstituted, c.unsub)
			}
			if c.sets && got[0].KustomizationNamespace != "flux-system" {
				t.Errorf("namespace %q, want the Kustomization's, flux-system", got[0].KustomizationNamespace)
			}
		})
	}
}

// TestBuildRefusesWhatIsNotInTheArtifact: a remote base or a path out of
// the tree is refused before kustomize runs (a build never reaches the
// network or the host's files).
func TestBuildRefusesWhatIsNotInTheArtifact(t *testing.T) {
	for name, res := range map[string]string{
		"a URL":            "https://example.invalid/base",
		"a git base":       "github.com/example/base?ref=v1",
		"an absolute path": "/etc",
		"a path out":       "../../../../etc",
		"a patch by URL":   "http://127.0.0.1:1/patch.yaml",
	} {
		t.Run(name, func(t *testing.T) {
			files := siteTree("local-workload", "")
			files["mgmt/local-host/addons/cni/kustomization.yaml"] = "resources:\n  - cni.yaml\n  - " + res + "\n"
			if name == "a patch by URL" {
				files["mgmt/local-host/addons/cni/kustomization.yaml"] = "resources:\n  - cni.yaml\npatches:\n  - path: " + res + "\n"
			}
			tree := read(t, files)
			_, err := tree.Build("mgmt/local-host/addons/cni")
			if err == nil || !strings.Contains(err.Error(), "is not in the artifact") {
				t.Fatalf("build: %v, want a refusal naming the resource", err)
			}
			if _, err := tree.Clusters(); err == nil || !strings.Contains(err.Error(), "/mgmt/local-host/addons/cni/kustomization.yaml: ") {
				t.Errorf("Clusters: %v, want the kustomization file named", err)
			}
		})
	}
}

// TestReadRefuses: entries that leave the tree, a name twice, and the
// limits.
func TestReadRefuses(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"dot-dot":       {"a/../../etc/passwd": "x"},
		"backslash":     {`a\b.yaml`: "x"},
		"file and file": {"a.yaml": "x", "./a.yaml": "y"},
		"dir and file":  {"a/b": "x", "a": "y"},
	} {
		if _, err := Read(bytes.NewReader(artifact(t, files))); err == nil {
			t.Errorf("%s: read", name)
		}
	}
	if _, err := Read(strings.NewReader("not gzip")); err == nil || !strings.Contains(err.Error(), "not gzip") {
		t.Errorf("not gzip: %v", err)
	}
	big := map[string]string{"big.yaml": strings.Repeat("x", MaxFileBytes+1)}
	if _, err := Read(bytes.NewReader(artifact(t, big))); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("a file over the limit: %v", err)
	}
	tree := read(t, map[string]string{"./x/y.yaml": "a: 1\n", "x/": ""})
	if got := tree.Files(); !reflect.DeepEqual(got, []string{"/x/y.yaml"}) {
		t.Errorf("files %q", got)
	}
	if _, err := tree.Build("../x"); err == nil {
		t.Error("Build of a path with .. ran")
	}
}

func TestVariable(t *testing.T) {
	for in, want := range map[string][3]string{
		"${A}":        {"A", "", "true"},
		"${A:=b-c}":   {"A", "b-c", "true"},
		"${}":         {"", "", "false"},
		"x${A}":       {"", "", "false"},
		"${A}${B}":    {"", "", "false"},
		"local":       {"", "", "false"},
		"${A:=${B}}":  {"", "", "false"},
		"${A:-b}":     {"A", "b", "true"},
		"${A-b}":      {"A", "b", "true"},
		"${A=b}":      {"A", "b", "true"},
		"${A:b}":      {"", "", "false"},
		"${A:=b}tail": {"", "", "false"},
	} {
		v, d, ok := variable(in)
		if got := [3]string{v, d, map[bool]string{true: "true", false: "false"}[ok]}; got != want {
			t.Errorf("variable(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzRead: any bytes, as a Flux artifact's layer, are read or refused;
// a tree read is built without panicking.
func FuzzRead(f *testing.F) {
	f.Add(artifact(f, siteTree("local-workload", "")))
	f.Add(artifact(f, map[string]string{"k/kustomization.yaml": "resources: [a.yaml, ../k]\n", "k/a.yaml": "apiVersion: v1\nkind: X\nmetadata: {name: a}\n",
		"f.yaml": "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: k}\nspec: {path: ./k}\n"}))
	f.Add([]byte("\x1f\x8b"))
	f.Fuzz(func(t *testing.T, b []byte) {
		tree, err := Read(bytes.NewReader(b))
		if err != nil {
			return
		}
		_, _ = tree.Clusters()
	})
}

// fks is a one-document Flux Kustomization of path %s.
const fks = "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: ks\n  namespace: flux-system\nspec:\n  path: %s\n"

const wl = "apiVersion: cluster.x-k8s.io/v1beta2\nkind: Cluster\nmetadata:\n  name: wl\n"

// TestAttackRegressions: the breaks a hostile-artifact attack found, each
// failing on the first version of this package.
func TestAttackRegressions(t *testing.T) {
	// A URL or repository reached through generators:, transformers:,
	// validators: or a component's transformers (kustomize fetched it, or
	// ran git) is refused before any build.
	for field, files := range map[string]map[string]string{
		"generators":   {"app/kustomization.yaml": "generators:\n- gen\n", "app/gen/kustomization.yaml": "resources:\n- http://127.0.0.1:1/x.yaml\n"},
		"transformers": {"app/kustomization.yaml": "transformers:\n- gen\n", "app/gen/kustomization.yaml": "resources:\n- github.com/x/y?ref=v1\n"},
		"validators":   {"app/kustomization.yaml": "validators:\n- gen\n", "app/gen/kustomization.yaml": "resources:\n- https://example.invalid/x\n"},
		"component":    {"app/kustomization.yaml": "components:\n- c\n", "app/c/kustomization.yaml": "kind: Component\ntransformers:\n- t\n", "app/c/t/kustomization.yaml": "resources:\n- github.com/x/y?ref=v1\n"},
	} {
		files["flux.yaml"] = fmt.Sprintf(fks, "./app")
		if _, err := read(t, files).Clusters(); err == nil || !strings.Contains(err.Error(), "is not in the artifact") {
			t.Errorf("%s: %v, want a refusal", field, err)
		}
	}
	// Deep names and many entries are refused while reading.
	if _, err := Read(bytes.NewReader(artifact(t, map[string]string{strings.Repeat("a/", 5000) + "x.yaml": wl}))); err == nil {
		t.Error("a 5,000-deep name was read")
	}
	dirs := map[string]string{}
	for i := 0; i <= MaxFiles; i++ {
		dirs[fmt.Sprintf("d%d/", i)] = ""
	}
	if _, err := Read(bytes.NewReader(artifact(t, dirs))); err == nil || !strings.Contains(err.Error(), "entries") {
		t.Errorf("%d directory entries: %v", len(dirs), err)
	}
	// Kustomizations that each name two others: 2^depth builds, refused.
	files := map[string]string{"flux.yaml": fmt.Sprintf(fks, "./d0")}
	const depth = 12
	for i := 0; i < depth; i++ {
		files[fmt.Sprintf("d%d/kustomization.yaml", i)] = "resources:\n- a\n- b\n"
		for _, s := range []string{"a", "b"} {
			files[fmt.Sprintf("d%d/%s/kustomization.yaml", i, s)] = fmt.Sprintf("namePrefix: %s-\nresources:\n- ../../d%d\n", s, i+1)
		}
	}
	files[fmt.Sprintf("d%d/kustomization.yaml", depth)] = "resources:\n- c.yaml\n"
	files[fmt.Sprintf("d%d/c.yaml", depth)] = wl
	start := time.Now()
	if _, err := read(t, files).Clusters(); err == nil || !strings.Contains(err.Error(), "more than 1000 kustomizations") {
		t.Errorf("2^%d visits: %v", depth, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the refusal took %s", d)
	}
	// A comment-only document beside the Cluster (Flux and kustomize skip
	// it) hid the whole file.
	for name, body := range map[string]string{
		"leading comment": "# the workload cluster\n---\n" + wl,
		"trailing sep":    wl + "---\n# end\n",
		"separator note":  "--- # the cluster\n" + wl,
	} {
		cs, err := read(t, map[string]string{"flux.yaml": fmt.Sprintf(fks, "./c"), "c/cluster.yaml": body, "c/ns.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: n\n"}).Clusters()
		if err != nil || len(cs) != 1 || cs[0].Name != "wl" {
			t.Errorf("%s: %+v %v, want wl", name, cs, err)
		}
	}
	// The Flux Kustomization's own fields change the name.
	for name, tc := range map[string][2]string{
		"substitute": {"  postBuild:\n    substitute:\n      WL: local-workload\n", "local-workload"},
		"nameSuffix": {"  nameSuffix: -fixed\n", "wl-fixed"},
	} {
		cluster := wl
		if name == "substitute" {
			cluster = strings.Replace(wl, "name: wl", "name: ${WL}", 1)
		}
		cs, err := read(t, map[string]string{"flux.yaml": fmt.Sprintf(fks, "./c") + tc[0], "c/c.yaml": cluster}).Clusters()
		if err != nil || len(cs) != 1 || cs[0].Name != tc[1] || cs[0].Variable != "" {
			t.Errorf("%s: %+v %v, want %s", name, cs, err, tc[1])
		}
	}
	// The same path spelled many ways is built once.
	var b strings.Builder
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&b, "---\n"+strings.Replace(fks, "name: ks", fmt.Sprintf("name: ks%d", i), 1), "./c"+strings.Repeat("/", i+1))
	}
	cs, err := read(t, map[string]string{"flux.yaml": b.String(), "c/c.yaml": wl}).Clusters()
	if err != nil || len(cs) != 50 {
		t.Errorf("50 spellings: %d clusters, %v", len(cs), err)
	}
}

// TestGeneratedKustomizationIsPerBuild: the kustomization Flux generates
// for one path is not seen by the build of a path above it, which Flux
// generates from the files themselves.
func TestGeneratedKustomizationIsPerBuild(t *testing.T) {
	files := map[string]string{
		"flux.yaml":     fmt.Sprintf(fks, "./a/b") + "---\n" + strings.Replace(fmt.Sprintf(fks, "./a"), "name: ks", "name: top", 1),
		"a/b/c.yaml":    wl,
		"a/b/note.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: n\n",
	}
	tree := read(t, files)
	if _, err := tree.Build("./a/b"); err != nil {
		t.Fatal(err)
	}
	if tree.kustomizationFile("/a/b") != "" {
		t.Error("the generated kustomization of ./a/b stayed in the tree")
	}
	cs, err := tree.Clusters()
	if err != nil || len(cs) != 2 {
		t.Errorf("clusters %+v, %v: want wl from both Kustomizations", cs, err)
	}
}
