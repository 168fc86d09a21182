package bluegreen

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"fmt"
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
	broken := fluxPackage(t, map[string]string{"flux.yaml": fluxKS(""), "clusters/kustomization.yaml": "resources: [https://example.invalid/x]\n"})
	if _, err := broken.SharedNames("b"); err == nil || !strings.Contains(err.Error(), "Flux artifact zarf-registry/site-config:1") {
		t.Errorf("broken: %v", err)
	}
}
