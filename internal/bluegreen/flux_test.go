package bluegreen

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestFluxArtifactOfTheSitePackage: the krops-shaped package carries its
// workload cluster in a Flux artifact, which Zarf does not template: its
// cluster and load balancer are found by building the artifact, and are
// the same for both slots (before, the check read components only and
// found no name at all).
func TestFluxArtifactOfTheSitePackage(t *testing.T) {
	p, err := ReadFile("../../testdata/packages/krops/zarf-package-krops-shaped-amd64-1.0.0.tar.zst")
	if err != nil {
		t.Fatal(err)
	}
	arts, err := p.Flux()
	if err != nil {
		t.Fatal(err)
	}
	if len(arts) != 1 || arts[0].Ref != "localhost:5001/krops-config:latest" || len(arts[0].Clusters) != 1 || arts[0].Clusters[0].Name != "local-workload" {
		t.Fatalf("Flux artifacts: %+v", arts)
	}
	res, err := Check(p, "b", "a")
	if err != nil {
		t.Fatal(err)
	}
	var same []string
	for _, n := range res.Same {
		same = append(same, n.Kind+" "+n.Name)
		if !strings.HasPrefix(n.Where, "Flux artifact localhost:5001/krops-config:latest: Flux Kustomization ") {
			t.Errorf("%s: where %q does not name the artifact and its Kustomization", n.Name, n.Where)
		}
	}
	if got := strings.Join(same, ", "); got != "load balancer local-workload-lb, workload cluster local-workload" {
		t.Errorf("same for both slots: %q", got)
	}
}

// fluxPackage is a package's OCI layout holding one Flux artifact whose
// content is files.
func fluxPackage(t *testing.T, files map[string]string) *Package {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for n, c := range files {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(c)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(c)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	p := &Package{Files: map[string]string{}}
	digest := func(b []byte) string { return fmt.Sprintf("sha256:%x", sha256.Sum256(b)) }
	layer := buf.Bytes()
	p.keepBlob("images/blobs/sha256/"+strings.TrimPrefix(digest(layer), "sha256:"), layer)
	m, _ := json.Marshal(map[string]any{"config": map[string]any{"mediaType": fluxConfig, "digest": "sha256:00"},
		"layers": []any{map[string]any{"mediaType": fluxContent, "digest": digest(layer)}}})
	p.keepBlob("images/blobs/sha256/"+strings.TrimPrefix(digest(m), "sha256:"), m)
	idx, _ := json.Marshal(map[string]any{"manifests": []any{map[string]any{"digest": digest(m),
		"annotations": map[string]string{"org.opencontainers.image.ref.name": "zarf-registry/site-config:1"}}}})
	p.keepBlob("images/index.json", idx)
	return p
}

const clusterYAML = `apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata:
  name: NAME
  namespace: default
`

func fluxKS(postBuild string) string {
	return `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: clusters
  namespace: flux-system
spec:
  path: ./clusters
` + postBuild
}

// TestFluxArtifactNames: a fixed name and a variable's default land on
// the daemon as themselves; an artifact that cannot be built is an error
// naming it, not a pass.
func TestFluxArtifactNames(t *testing.T) {
	names := func(p *Package) string {
		t.Helper()
		ns, err := p.SharedNames("b")
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, n := range ns {
			s = append(s, n.Kind+" "+n.Name)
		}
		return strings.Join(s, ", ")
	}
	fixed := fluxPackage(t, map[string]string{"flux.yaml": fluxKS(""), "clusters/c.yaml": strings.Replace(clusterYAML, "NAME", "wl", 1)})
	if got := names(fixed); got != "load balancer wl-lb, workload cluster wl" {
		t.Errorf("fixed: %q", got)
	}
	pb := "  postBuild:\n    substituteFrom:\n      - kind: ConfigMap\n        name: kb-slot\n        optional: true\n"
	variable := fluxPackage(t, map[string]string{"flux.yaml": fluxKS(pb), "clusters/c.yaml": strings.Replace(clusterYAML, "NAME", "${WL:=site-wl}", 1)})
	if got := names(variable); got != "load balancer site-wl-lb, workload cluster site-wl" {
		t.Errorf("variable: %q", got)
	}
	// A Kustomization that substitutes from the slot's ConfigMap: slot b
	// names the cluster its own (local-workload-b), and says so; slot a
	// its own; the settings are the ConfigMap's data.
	slotPB := "  postBuild:\n    substituteFrom:\n      - kind: ConfigMap\n        name: kubectl-bundle-slot\n        optional: true\n"
	set := fluxPackage(t, map[string]string{"flux.yaml": fluxKS(slotPB), "clusters/c.yaml": strings.Replace(clusterYAML, "NAME", "${WL:=site-wl}", 1)})
	if got := names(set); got != "load balancer site-wl-b-lb, workload cluster site-wl-b" {
		t.Errorf("set by the slot: %q", got)
	}
	if ns, _ := set.SharedNames("b"); len(ns) == 0 || !strings.Contains(ns[0].Where, "slot b's value of WL (ConfigMap flux-system/kubectl-bundle-slot)") {
		t.Errorf("where: %+v", ns)
	}
	res, err := Check(set, "b", "a")
	if err != nil || len(res.Same) != 0 {
		t.Errorf("check: %+v, %v", res, err)
	}
	settings, err := set.SlotSettings("b")
	if err != nil || fmt.Sprint(settings) != "[{flux-system WL site-wl-b site-wl}]" {
		t.Errorf("settings: %v, %v", settings, err)
	}
	if settings, _ := variable.SlotSettings("b"); len(settings) != 0 {
		t.Errorf("another ConfigMap sets nothing of the slot's: %v", settings)
	}
	broken := fluxPackage(t, map[string]string{"flux.yaml": fluxKS(""), "clusters/kustomization.yaml": "resources: [https://example.invalid/x]\n"})
	if _, err := broken.SharedNames("b"); err == nil || !strings.Contains(err.Error(), "Flux artifact zarf-registry/site-config:1") {
		t.Errorf("broken: %v", err)
	}
}

// tarPackage writes a plain-tar package (zarf.yaml and members) to a file.
func tarPackage(t *testing.T, members [][2]string) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, m := range append([][2]string{{"zarf.yaml", "kind: ZarfPackageConfig\nmetadata:\n  name: p\n"}}, members...) {
		if err := tw.WriteHeader(&tar.Header{Name: m[0], Mode: 0o644, Size: int64(len(m[1])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(m[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	f := t.TempDir() + "/p.tar"
	if err := os.WriteFile(f, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestFluxLayerAfterLargeImageLayers: other images' gzip layers, ahead in
// the archive, fill what the first pass keeps; the Flux artifact's layer
// is read in a second pass, not reported as too large (found by an
// attack: a 300-byte layer was refused as "larger than this check reads").
func TestFluxLayerAfterLargeImageLayers(t *testing.T) {
	src := fluxPackage(t, map[string]string{"flux.yaml": fluxKS(""), "clusters/c.yaml": strings.Replace(clusterYAML, "NAME", "wl", 1)})
	big := make([]byte, 40<<20)
	big[0], big[1] = 0x1f, 0x8b
	members := [][2]string{
		{"images/blobs/sha256/0000a", string(big)},
		{"images/blobs/sha256/0000b", string(big[:24<<20-10])},
	}
	for d, b := range src.blobs {
		name := "images/blobs/sha256/" + strings.TrimPrefix(d, "sha256:")
		if d == "images/index.json" {
			name = d
		}
		members = append(members, [2]string{name, string(b)})
	}
	p, err := ReadFile(tarPackage(t, members))
	if err != nil {
		t.Fatal(err)
	}
	names, err := p.SharedNames("b")
	if err != nil || len(names) != 2 || names[1].Name != "wl" {
		t.Fatalf("names %v, err %v: want wl and wl-lb", names, err)
	}
}

// TestReadKeepsBoundedJSON: JSON blobs count toward a budget (an attack:
// 1,000 blobs of a brace and 1 MiB of spaces, 129 KiB compressed, kept
// 1,000 MiB).
func TestReadKeepsBoundedJSON(t *testing.T) {
	blob := "{" + strings.Repeat(" ", 1<<20-2) + "}"
	var members [][2]string
	for i := 0; i < 40; i++ {
		members = append(members, [2]string{fmt.Sprintf("images/blobs/sha256/%04d", i), blob})
	}
	p, err := ReadFile(tarPackage(t, members))
	if err != nil {
		t.Fatal(err)
	}
	if p.keptJSON > maxJSONKept || len(p.blobs) > maxJSONKept/len(blob)+1 {
		t.Errorf("kept %d JSON bytes in %d blobs, want at most %d", p.keptJSON, len(p.blobs), maxJSONKept)
	}
}
