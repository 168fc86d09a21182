package verify

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/digest"
	"github.com/kubectl-bundle/kubectl-bundle/internal/testpkg"
)

// Seeds come from the committed zarf-built packages where they exist, so the
// fuzzers start from real inputs.
func seedFromPackages(f *testing.F, member string) {
	paths, _ := filepath.Glob("../../testdata/packages/*.tar.zst")
	more, _ := filepath.Glob("../../testdata/packages/*/*.tar.zst")
	for _, p := range append(paths, more...) {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if member == "" {
			f.Add(b)
			continue
		}
		a := readArchive(context.Background(), bufio.NewReader(bytes.NewReader(b)))
		if c, ok := a.control[member]; ok {
			f.Add(c)
		}
	}
}

func FuzzParseChecksums(f *testing.F) {
	seedFromPackages(f, controlChecksumsTxt)
	f.Add([]byte(sha + " a\n"))
	f.Add([]byte(sha + " ../a\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		lines, err := ParseChecksums(b)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, l := range lines {
			if checkMemberPath(l.Path) != nil || !digest.IsSHA256(l.SHA256) || seen[l.Path] {
				t.Fatalf("accepted a bad line %+v", l)
			}
			seen[l.Path] = true
		}
	})
}

func FuzzParseZarfYAML(f *testing.F) {
	seedFromPackages(f, controlZarfYAML)
	f.Add([]byte("kind: ZarfPackageConfig\nmetadata:\n  name: a\n"))
	f.Add([]byte("a: &a [x]\nb: [*a, *a]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseZarfYAML(b)
		if err != nil {
			return
		}
		if p.Name == "" || strings.ContainsAny(p.Name, `/\`) {
			t.Fatalf("accepted unsafe name %q", p.Name)
		}
	})
}

func FuzzCheckSyftJSON(f *testing.F) {
	f.Add([]byte(`{"artifacts":[],"source":{},"descriptor":{},"schema":{"version":"1"}}`))
	f.Add([]byte(`{"artifacts":[[[[{}]]]],"source":{"a":[1]},"descriptor":{},"schema":{"version":"1","x":{}}}`))
	f.Add([]byte(`{"artifacts":`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = CheckSyftJSON(bytes.NewReader(b))
	})
}

func FuzzParseSplitMetadata(f *testing.F) {
	f.Add([]byte(`{"Sha256Sum":"` + sha + `","Bytes":10,"Count":2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseSplitMetadata(b)
		if err == nil && (m.Count < 1 || m.Count > MaxSplitParts || m.Bytes < 0) {
			t.Fatalf("accepted %+v", m)
		}
	})
}

// FuzzReadArchive runs the whole verifier on arbitrary bytes: it must never
// panic, never hang, and never call a package verified unless the bytes
// really are a consistent package.
func FuzzReadArchive(f *testing.F) {
	seedFromPackages(f, "")
	good, err := synthetic(f).Bytes()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	plain := synthetic(f)
	plain.Compressed = false
	tb, _ := plain.Bytes()
	f.Add(tb)
	v, err := New(skipSig)
	if err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(dir, "p.tar")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := v.Verify(context.Background(), p)
		if err != nil {
			t.Fatalf("bytes from a readable file gave an I/O error: %v", err)
		}
		if r.Verified {
			for _, c := range r.Checks {
				if c.Status == Fail {
					t.Fatalf("verified with a failed check %+v", c)
				}
			}
			if r.Check(CheckChecksums).Status != Pass || r.Check(CheckMembers).Status != Pass {
				t.Fatalf("verified without checksums: %+v", r.Checks)
			}
		}
	})
}

// FuzzDigestPolicy runs the digest-pin check on an arbitrary zarf.yaml and
// images/index.json, as an untrusted archive would carry them: it must
// never panic, and it passes only when every image that is not exempt is
// pinned repo:tag@sha256 and stored under that name with that digest.
func FuzzDigestPolicy(f *testing.F) {
	paths, _ := filepath.Glob("../../testdata/packages/digests/*.tar.zst")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		a := readArchive(context.Background(), bufio.NewReader(bytes.NewReader(b)))
		f.Add(a.control[controlZarfYAML], a.control[controlImageIndex])
	}
	f.Add([]byte("kind: ZarfPackageConfig\nmetadata:\n  name: a\ncomponents:\n- name: c\n  images: [a:1@sha256:"+sha+"]\n"),
		[]byte(`{"schemaVersion":2,"manifests":[{"digest":"sha256:`+sha+`","annotations":{"org.opencontainers.image.ref.name":"docker.io/library/a:1@sha256:`+sha+`"}}]}`))
	v, err := New(Options{Signature: SignatureOptions{InsecureSkip: true}, Digests: DigestPolicy{Require: true, Exempt: []string{"localhost:5001/krops-airgap:latest"}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, zy, idx []byte) {
		pkg, err := ParseZarfYAML(zy)
		if err != nil {
			return
		}
		a := &archiveResult{members: map[string]*member{}, control: map[string][]byte{controlImageIndex: idx}, controlErr: map[string]error{}}
		// Every blob the index names is present, as it hashes.
		parsed, idxErr := ParseImageIndex(idx)
		if idxErr == nil {
			for _, d := range parsed.Manifests {
				h := strings.TrimPrefix(d.Digest, "sha256:")
				a.members[imageBlobPrefix+h] = &member{sha256: h, mediaType: d.MediaType}
			}
		}
		r := newReport("p", true)
		v.checkDigests(r, a, pkg)
		if r.Check(CheckDigests).Status != Pass {
			return
		}
		for _, u := range pkg.ImageUses {
			if u.Ref == "localhost:5001/krops-airgap:latest" {
				continue
			}
			p, err := ParseImageRef(u.Ref)
			if err != nil || p.Tag == "" || !sha256Digest.MatchString(p.Digest) || idxErr != nil {
				t.Fatalf("passed with %q (%v, index %v)", u.Ref, err, idxErr)
			}
			found := false
			for _, d := range parsed.Manifests {
				if q, err := ParseImageRef(d.Name()); err == nil && q == p && d.Digest == p.Digest {
					found = true
				}
			}
			if !found {
				t.Fatalf("passed with %q not stored under its pin", u.Ref)
			}
		}
	})
}

// FuzzParseImageRef: a reference that parses normalizes to one that parses
// to itself.
func FuzzParseImageRef(f *testing.F) {
	for _, s := range []string{"nginx", "nginx:1.27@sha256:" + sha, "localhost:5001/krops-airgap:latest", "[::1]:5000/a/b:c", "a@b:c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseImageRef(s)
		if err != nil {
			return
		}
		q, err := ParseImageRef(p.String())
		if err != nil || q != p {
			t.Fatalf("%q normalizes to %q, which parses to %+v (%v)", s, p.String(), q, err)
		}
	})
}

// FuzzParseManifestInfo: a manifest or index from an untrusted package
// parses into a bounded summary, and a manifest is a container image only
// when every layer it names is a container layer.
func FuzzParseManifestInfo(f *testing.F) {
	f.Add([]byte(`{"schemaVersion":2,"mediaType":"` + MediaTypeOCIManifest + `","config":{"mediaType":"` + MediaTypeFluxConfig + `"},"layers":[{"mediaType":"` + MediaTypeFluxContent + `"}]}`))
	f.Add([]byte(`{"schemaVersion":2,"config":{"mediaType":"` + MediaTypeFluxConfig + `"},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip"}]}`))
	f.Add([]byte(`{"schemaVersion":2,"mediaType":"` + MediaTypeOCIIndex + `","manifests":[{"mediaType":"` + MediaTypeOCIManifest + `","digest":"sha256:` + sha + `"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := ParseManifestInfo(b)
		if err != nil {
			return
		}
		var doc struct {
			Layers []struct {
				MediaType string `json:"mediaType"`
			} `json:"layers"`
		}
		_ = json.Unmarshal(b, &doc)
		switch info.Kind {
		case "manifest":
			container := true
			for _, l := range doc.Layers {
				container = container && containerLayerTypes[l.MediaType]
			}
			if info.Container != container || len(info.LayerMediaTypes) > maxLayerTypes || len(info.Children) > 0 {
				t.Fatalf("manifest %s parsed as %+v", b, info)
			}
		case "index":
			if info.Container || len(info.Children) > maxIndexChildren {
				t.Fatalf("index %s parsed as %+v", b, info)
			}
			for _, c := range info.Children {
				if !sha256Digest.MatchString(c.Digest) {
					t.Fatalf("child digest %q", c.Digest)
				}
			}
		default:
			t.Fatalf("kind %q", info.Kind)
		}
	})
}

// FuzzSBOMRule runs zarf's SBOM rule on an arbitrary zarf.yaml,
// images/index.json and one blob stored under its own digest: it never
// panics, and it exempts an image from its SBOM only when the blob its
// index entry names is a manifest with a layer that is not a container
// layer.
func FuzzSBOMRule(f *testing.F) {
	man := []byte(`{"schemaVersion":2,"mediaType":"` + MediaTypeOCIManifest + `","config":{"mediaType":"` + MediaTypeFluxConfig + `"},"layers":[{"mediaType":"` + MediaTypeFluxContent + `"}]}`)
	f.Add([]byte("kind: ZarfPackageConfig\nmetadata:\n  name: a\ncomponents:\n- name: c\n  images: [localhost:5001/krops-config:latest]\n"),
		[]byte(`{"schemaVersion":2,"manifests":[{"mediaType":"`+MediaTypeOCIManifest+`","digest":"sha256:`+testpkg.SHA256(man)+`","annotations":{"org.opencontainers.image.ref.name":"localhost:5001/krops-config:latest"}}]}`), man)
	// The package krops' shape, as zarf built it: each manifest blob with
	// its zarf.yaml and index.
	if a, err := testpkg.ReadFile("../../testdata/packages/krops/zarf-package-krops-shaped-amd64-1.0.0.tar.zst"); err == nil {
		for _, m := range a.Members {
			if strings.HasPrefix(m.Header.Name, imageBlobPrefix) && kindOf(sniffMediaType(m.Data)) != "" {
				f.Add(a.Get(controlZarfYAML).Data, a.Get(controlImageIndex).Data, m.Data)
			}
		}
	}
	f.Fuzz(func(t *testing.T, zy, idx, blob []byte) {
		pkg, err := ParseZarfYAML(zy)
		if err != nil {
			return
		}
		a := &archiveResult{members: map[string]*member{}, control: map[string][]byte{controlImageIndex: idx}, controlErr: map[string]error{}}
		h := testpkg.SHA256(blob)
		m := &member{sha256: h, mediaType: sniffMediaType(blob)}
		if kindOf(m.mediaType) != "" {
			m.info, _ = ParseManifestInfo(blob)
		}
		a.members[imageBlobPrefix+h] = m
		arts := sbomFreeImages(pkg, a)
		if len(arts) == 0 {
			return
		}
		info, err := ParseManifestInfo(blob)
		if err != nil || info.Kind != "manifest" || info.Container {
			t.Fatalf("exempted %+v with blob %s (%+v, %v)", arts, blob, info, err)
		}
		for _, art := range arts {
			if art.Digest != "sha256:"+h || art.Kind != artifactKind(info.ConfigMediaType) {
				t.Fatalf("artifact %+v, blob %s", art, h)
			}
		}
	})
}
