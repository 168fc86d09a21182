package bluegreen

import (
	"bytes"
	"os"
	"testing"
)

// FuzzRead: the archive and its manifests are untrusted; reading and
// rendering them never panics.
func FuzzRead(f *testing.F) {
	for _, p := range []string{"zarf-package-site-slot-amd64-1.0.0.tar.zst", "zarf-package-site-fixed-amd64-1.0.0.tar.zst"} {
		b, err := os.ReadFile(site + p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("\x28\xb5\x2f\xfd"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Read(bytes.NewReader(b))
		if err != nil {
			return
		}
		_, _ = Check(p, "b", "a")
	})
}

// FuzzSharedNames: manifests and values of any shape.
func FuzzSharedNames(f *testing.F) {
	f.Add("apiVersion: cluster.x-k8s.io/v1beta2\nkind: Cluster\nmetadata: {name: wl-###ZARF_VAR_SLOT###}\n", "docker run --name x y")
	f.Add("apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nspec: {url: 'oci://h:5000/r'}\n---\n- [a]\n", "")
	f.Fuzz(func(t *testing.T, manifest, cmd string) {
		p := &Package{Variables: []string{Variable}, Actions: []string{cmd}, Files: map[string]string{"components/c.tar/c/manifests/m.yaml": manifest}}
		_, _ = Check(p, "b", "a")
	})
}

// FuzzFlux: an OCI layout's index, a manifest and a layer of any shape, as
// the Flux check keeps them from the archive.
func FuzzFlux(f *testing.F) {
	f.Add([]byte(`{"manifests":[{"digest":"sha256:m","annotations":{"org.opencontainers.image.ref.name":"r"}}]}`),
		[]byte(`{"config":{"mediaType":"`+fluxConfig+`"},"layers":[{"mediaType":"`+fluxContent+`","digest":"sha256:l"}]}`), []byte("\x1f\x8b"))
	f.Fuzz(func(t *testing.T, index, manifest, layer []byte) {
		p := &Package{Files: map[string]string{}}
		p.keepBlob("images/index.json", index)
		p.keepBlob("images/blobs/sha256/m", manifest)
		p.keepBlob("images/blobs/sha256/l", layer)
		_, _ = p.Flux()
		_, _ = p.SharedNames("b")
	})
}
