package verify

import (
	"archive/tar"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/testpkg"
)

const (
	layerOCIGzip  = "application/vnd.oci.image.layer.v1.tar+gzip"
	configOCI     = "application/vnd.oci.image.config.v1+json"
	appImage      = "docker.io/library/demo-app:1.0.0"
	configArtRef  = "localhost:5001/krops-config:latest"
	syftDocument  = `{"artifacts":[],"source":{},"descriptor":{},"schema":{"version":"16.0.0"}}`
	fluxArtLayers = MediaTypeFluxContent
)

// testImage is one image of an imagePackage: what its manifest says and
// whether sboms.tar holds a document for it.
type testImage struct {
	ref        string
	config     string
	layerTypes []string
	sbom       bool
}

// imagePackage builds an unsigned package the way zarf lays one out: one
// component naming every image, an OCI layout under images/ (index.json
// naming each manifest by org.opencontainers.image.ref.name), sboms.tar with
// a Syft document for each image marked sbom. It returns the package and
// each image's manifest digest.
func imagePackage(t testing.TB, imgs ...testImage) (*testpkg.Archive, map[string]string) {
	t.Helper()
	a := &testpkg.Archive{Compressed: true}
	sboms := &testpkg.Archive{}
	sboms.Set("sbom-viewer-assets.html", []byte("<html></html>"))
	var descs []map[string]any
	digests := map[string]string{}
	blobs := map[string][]byte{}
	zy := "kind: ZarfPackageConfig\nmetadata:\n  name: krops-shaped\n  version: 1.0.0\n  aggregateChecksum: AGG\nbuild:\n  architecture: amd64\ncomponents:\n- name: config\n  images:\n"
	for _, img := range imgs {
		cfg := []byte(`{"architecture":"amd64","os":"linux"}`)
		blobs[testpkg.SHA256(cfg)] = cfg
		var layers []map[string]any
		for i, lt := range img.layerTypes {
			l := []byte(img.ref + " layer " + string(rune('a'+i)))
			blobs[testpkg.SHA256(l)] = l
			layers = append(layers, map[string]any{"mediaType": lt, "digest": "sha256:" + testpkg.SHA256(l), "size": len(l)})
		}
		man, _ := json.Marshal(map[string]any{
			"schemaVersion": 2, "mediaType": MediaTypeOCIManifest,
			"config": map[string]any{"mediaType": img.config, "digest": "sha256:" + testpkg.SHA256(cfg), "size": len(cfg)},
			"layers": layers,
		})
		d := testpkg.SHA256(man)
		blobs[d] = man
		digests[img.ref] = "sha256:" + d
		descs = append(descs, map[string]any{"mediaType": MediaTypeOCIManifest, "digest": "sha256:" + d, "size": len(man),
			"annotations": map[string]string{refNameAnnotation: NormalizeImageRef(img.ref)}})
		zy += "  - " + img.ref + "\n"
		if img.sbom {
			sboms.Set(sbomFileName(NormalizeImageRef(img.ref)), []byte(syftDocument))
		}
	}
	idx, _ := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": descs})
	sb, err := sboms.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	a.Members = append(a.Members, &testpkg.Member{Header: tar.Header{Name: "images/", Typeflag: tar.TypeDir, Mode: 0o755}})
	a.Set("images/oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`))
	a.Set("images/index.json", idx)
	cs := testpkg.SHA256(idx) + " images/index.json\n" + testpkg.SHA256([]byte(`{"imageLayoutVersion":"1.0.0"}`)) + " images/oci-layout\n"
	for h, b := range blobs {
		a.Set(imageBlobPrefix+h, b)
		cs += h + " " + imageBlobPrefix + h + "\n"
	}
	a.Set("sboms.tar", sb)
	cs += testpkg.SHA256(sb) + " sboms.tar\n"
	a.Set("checksums.txt", []byte(cs))
	a.Set("zarf.yaml", []byte(strings.Replace(zy, "AGG", testpkg.SHA256([]byte(cs)), 1)))
	return a, digests
}

var (
	appWithSBOM = testImage{ref: appImage, config: configOCI, layerTypes: []string{layerOCIGzip}, sbom: true}
	fluxConfig  = testImage{ref: configArtRef, config: MediaTypeFluxConfig, layerTypes: []string{fluxArtLayers}}
)

// TestSBOMRuleFluxArtifact: a Flux artifact beside a container image needs
// no SBOM; the report says what it is, in text and JSON.
func TestSBOMRuleFluxArtifact(t *testing.T) {
	a, digests := imagePackage(t, appWithSBOM, fluxConfig)
	r := mustVerify(t, skipSig, writeArchive(t, a, "p.tar.zst"))
	text := reportText(t, r)
	if !r.Verified {
		t.Fatalf("not verified:\n%s", text)
	}
	want := SBOMArtifact{Image: configArtRef, Kind: "Flux artifact", Digest: digests[configArtRef], MediaType: MediaTypeOCIManifest,
		ConfigMediaType: MediaTypeFluxConfig, LayerMediaTypes: []string{MediaTypeFluxContent}}
	if len(r.SBOM.Artifacts) != 1 || !equalArtifact(r.SBOM.Artifacts[0], want) {
		t.Fatalf("artifacts %+v, want %+v", r.SBOM.Artifacts, want)
	}
	if c := r.Check(CheckSBOM); c.Detail != "1 Syft JSON documents; every container image and file component has one; 1 OCI artifact, not a container image, needs none" {
		t.Errorf("sbom detail %q", c.Detail)
	}
	row := "    · " + configArtRef + ": Flux artifact " + digests[configArtRef] + " (config " + MediaTypeFluxConfig +
		", layers " + MediaTypeFluxContent + "), not a container image: no SBOM expected\n"
	if !strings.Contains(text, "✔ sbom ") || !strings.Contains(text, row) {
		t.Errorf("text report lacks the row %q:\n%s", row, text)
	}
	js, _ := json.Marshal(r)
	if !strings.Contains(string(js), `"artifacts":[{"image":"`+configArtRef+`","kind":"Flux artifact","digest":"`+digests[configArtRef]+`"`) {
		t.Errorf("json: %s", js)
	}
}

func equalArtifact(a, b SBOMArtifact) bool {
	return a.Image == b.Image && a.Kind == b.Kind && a.Digest == b.Digest && a.MediaType == b.MediaType &&
		a.ConfigMediaType == b.ConfigMediaType && strings.Join(a.LayerMediaTypes, ",") == strings.Join(b.LayerMediaTypes, ",")
}

// TestSBOMRuleStaysStrict: whatever the package also carries, a container
// image without its SBOM fails, and so does anything the package does not
// prove to be an artifact.
func TestSBOMRuleStaysStrict(t *testing.T) {
	appNoSBOM := appWithSBOM
	appNoSBOM.sbom = false
	fluxWithImageLayers := fluxConfig
	fluxWithImageLayers.layerTypes = []string{layerOCIGzip}
	for _, tc := range []struct {
		name   string
		imgs   []testImage
		edit   func(a *testpkg.Archive, digests map[string]string)
		detail string
	}{
		{"container image without its SBOM beside a Flux artifact", []testImage{appNoSBOM, fluxConfig}, nil,
			"no SBOM document for image " + appImage},
		{"Flux config type over container layers is a container image", []testImage{appWithSBOM, fluxWithImageLayers}, nil,
			"no SBOM document for image " + configArtRef},
		{"Flux config type over a container layer and a Flux layer is not", []testImage{appNoSBOM,
			{ref: configArtRef, config: MediaTypeFluxConfig, layerTypes: []string{layerOCIGzip, MediaTypeFluxContent}}}, nil,
			"no SBOM document for image " + appImage},
		{"no layers is a container image, as zarf counts it", []testImage{appWithSBOM, {ref: configArtRef, config: MediaTypeFluxConfig}}, nil,
			"no SBOM document for image " + configArtRef},
		{"artifact's manifest missing", []testImage{appWithSBOM, fluxConfig}, func(a *testpkg.Archive, d map[string]string) {
			a.Remove(imageBlobPrefix + strings.TrimPrefix(d[configArtRef], "sha256:"))
		}, "no SBOM document for image " + configArtRef},
		{"artifact's manifest stored under another digest", []testImage{appWithSBOM, fluxConfig}, func(a *testpkg.Archive, d map[string]string) {
			m := a.Get(imageBlobPrefix + strings.TrimPrefix(d[configArtRef], "sha256:"))
			m.Data = append(append([]byte(nil), m.Data...), ' ')
			a.Rechecksum(m.Header.Name)
		}, "no SBOM document for image " + configArtRef},
		{"artifact's entry says index, its blob is a manifest", []testImage{appWithSBOM, fluxConfig}, func(a *testpkg.Archive, d map[string]string) {
			editIndex(t, a, func(desc *Descriptor) {
				if desc.Name() == configArtRef {
					desc.MediaType = MediaTypeOCIIndex
				}
			})
		}, "no SBOM document for image " + configArtRef},
		{"artifact not in the OCI layout's index", []testImage{appWithSBOM, fluxConfig}, func(a *testpkg.Archive, d map[string]string) {
			editIndex(t, a, func(desc *Descriptor) {
				if desc.Name() == configArtRef {
					desc.Annotations[refNameAnnotation] = "localhost:5001/other:latest"
				}
			})
		}, "no SBOM document for image " + configArtRef},
		{"only artifacts but a file component without its SBOM", []testImage{fluxConfig}, func(a *testpkg.Archive, d map[string]string) {
			zy := a.Get("zarf.yaml")
			zy.Data = append(zy.Data, []byte("- name: app\n  files:\n  - source: a\n    target: /a\n")...)
		}, "no SBOM document for component app"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, digests := imagePackage(t, tc.imgs...)
			if tc.edit != nil {
				tc.edit(a, digests)
			}
			r := mustVerify(t, skipSig, writeArchive(t, a, "p.tar.zst"))
			if c := r.Check(CheckSBOM); r.Verified || c.Status != Fail || c.Detail != tc.detail {
				t.Fatalf("verified %v, sbom %s %q, want fail %q\n%s", r.Verified, c.Status, c.Detail, tc.detail, reportText(t, r))
			}
		})
	}
}

// TestSBOMRuleOnlyArtifacts: a package whose only images are OCI artifacts
// gets a sboms.tar without a document from zarf; that is not a failure.
func TestSBOMRuleOnlyArtifacts(t *testing.T) {
	helm := testImage{ref: "localhost:5001/charts/podinfo:6.0.0", config: MediaTypeHelmConfig, layerTypes: []string{"application/vnd.cncf.helm.chart.content.v1.tar+gzip"}}
	a, _ := imagePackage(t, fluxConfig, helm)
	r := mustVerify(t, skipSig, writeArchive(t, a, "p.tar.zst"))
	if !r.Verified || r.Check(CheckSBOM).Detail != "no Syft JSON document, and none is needed; 2 OCI artifacts, not container images, need none" {
		t.Fatalf("verified %v:\n%s", r.Verified, reportText(t, r))
	}
	if len(r.SBOM.Artifacts) != 2 || r.SBOM.Artifacts[0].Kind != "Helm chart" || r.SBOM.Artifacts[1].Kind != "Flux artifact" {
		t.Errorf("artifacts %+v", r.SBOM.Artifacts)
	}
}

// TestSBOMRuleIndex: an index is an artifact only when every child is a
// manifest that is not a container image.
func TestSBOMRuleIndex(t *testing.T) {
	for _, tc := range []struct {
		name     string
		children []testImage
		artifact bool
	}{
		{"flux children", []testImage{fluxConfig, fluxConfig}, true},
		{"one container child", []testImage{fluxConfig, appWithSBOM}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &archiveResult{members: map[string]*member{}, control: map[string][]byte{}, controlErr: map[string]error{}}
			var children []map[string]any
			for i, c := range tc.children {
				layers := []map[string]any{}
				for _, lt := range c.layerTypes {
					layers = append(layers, map[string]any{"mediaType": lt, "digest": "sha256:" + sha, "size": i})
				}
				man, _ := json.Marshal(map[string]any{"schemaVersion": 2, "config": map[string]any{"mediaType": c.config, "digest": "sha256:" + sha, "size": i}, "layers": layers})
				addBlob(a, man)
				children = append(children, map[string]any{"mediaType": MediaTypeOCIManifest, "digest": "sha256:" + testpkg.SHA256(man), "size": len(man)})
			}
			idx, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": MediaTypeOCIIndex, "manifests": children})
			addBlob(a, idx)
			top, _ := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []any{map[string]any{"mediaType": MediaTypeOCIIndex,
				"digest": "sha256:" + testpkg.SHA256(idx), "size": len(idx), "annotations": map[string]string{refNameAnnotation: configArtRef}}}})
			a.control[controlImageIndex] = top
			arts := sbomFreeImages(&ZarfPackage{Images: []string{configArtRef}}, a)
			if (len(arts) == 1) != tc.artifact {
				t.Fatalf("artifacts %+v, want artifact %v", arts, tc.artifact)
			}
			if tc.artifact && (arts[0].Kind != "Flux artifact" || arts[0].MediaType != MediaTypeOCIIndex || arts[0].Digest != "sha256:"+testpkg.SHA256(idx)) {
				t.Errorf("artifact %+v", arts[0])
			}
		})
	}
}

// editIndex edits each descriptor of the package's images/index.json and
// makes the checksums consistent again.
func editIndex(t *testing.T, a *testpkg.Archive, edit func(*Descriptor)) {
	t.Helper()
	m := a.Get(controlImageIndex)
	idx, err := ParseImageIndex(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range idx.Manifests {
		edit(&idx.Manifests[i])
	}
	if m.Data, err = json.Marshal(idx); err != nil {
		t.Fatal(err)
	}
	if err := a.Rechecksum(controlImageIndex); err != nil {
		t.Fatal(err)
	}
}

// addBlob stores b as the readArchive pass would: under its digest, its
// media type sniffed and its manifest parsed.
func addBlob(a *archiveResult, b []byte) {
	h := testpkg.SHA256(b)
	m := &member{sha256: h, mediaType: sniffMediaType(b)}
	m.info, _ = ParseManifestInfo(b)
	a.members[imageBlobPrefix+h] = m
}

func TestParseManifestInfo(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // kind, or the error's start
	}{
		{`{"schemaVersion":2,"config":{"mediaType":"` + MediaTypeFluxConfig + `"},"layers":[{"mediaType":"` + MediaTypeFluxContent + `"}]}`, "manifest"},
		{`{"schemaVersion":2,"manifests":[]}`, "index"},
		{`{"schemaVersion":2,"mediaType":"` + MediaTypeDockerManifest + `","config":{},"layers":[]}`, "manifest"},
		{`{"schemaVersion":1,"config":{}}`, "manifest has schemaVersion 1"},
		{`{"schemaVersion":2,"mediaType":"application/x","config":{}}`, "media type \"application/x\" is neither"},
		{`{"schemaVersion":2}`, "neither a manifest nor an index"},
		{`{"schemaVersion":2,"manifests":[{"digest":"md5:x"}]}`, "index manifests[0] has digest"},
		{`{"schemaVersion":2,"mediaType":"` + MediaTypeOCIIndex + `","manifests":[],"layers":[]}`, "an index with a config or layers"},
		{`{"schemaVersion":2,"mediaType":"` + MediaTypeOCIManifest + `","layers":[]}`, "a manifest without a config"},
		{`[`, "parsing manifest"},
	} {
		info, err := ParseManifestInfo([]byte(tc.in))
		switch {
		case err != nil && !strings.HasPrefix(err.Error(), tc.want):
			t.Errorf("%s: error %v, want %s", tc.in, err, tc.want)
		case err == nil && info.Kind != tc.want:
			t.Errorf("%s: kind %s, want %s", tc.in, info.Kind, tc.want)
		}
	}
}
