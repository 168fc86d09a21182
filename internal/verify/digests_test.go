package verify

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/testpkg"
)

// Digests in testdata/packages/digests (hack/gen-digest-testdata.sh): the
// fixture's local-test manifest, hello-world's manifest, and the index
// hack/gentestdata adds over the local-test manifest.
const (
	pinManifest = "sha256:6a88822e787d1df28b83ebd72eb348569fc44351b84bba25c0bc566f6083965b"
	pinHello    = "sha256:03b62250a3cb1abd125271d393fc08bf0cc713391eda6b57c02d1ef85efcc25c"
	pinIndex    = "sha256:e61447b73072da84995f7fcf74aead8108ce8eb0ff09a2fa3983893454791a27"
)

func digestPkg(name string) string {
	return filepath.Join("..", "..", "testdata", "packages", "digests", "zarf-package-"+name+"-amd64-1.0.0.tar.zst")
}

func requireDigests(exempt ...string) Options {
	return Options{Signature: SignatureOptions{KeyPath: filepath.Join("..", "..", "testdata", "keys", "cosign.pub")},
		Digests: DigestPolicy{Require: true, Exempt: exempt}}
}

func reportText(t *testing.T, r *Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestDigestPolicyPackages: the packages the real zarf built from its own
// OCI-layout fixture, pinned and not, against the digest-pin policy.
func TestDigestPolicyPackages(t *testing.T) {
	for _, tc := range []struct {
		pkg      string
		verified bool
		images   int
		// offenders: image -> a part of the problem
		offenders map[string]string
	}{
		{"pinned", true, 2, nil},
		{"pinned-beta", true, 2, nil},
		{"tag-only", false, 1, map[string]string{"docker.io/library/local-test:1.0.0": "not pinned: no @sha256:<digest>"}},
		{"digest-only", false, 1, map[string]string{"docker.io/library/hello-world@" + pinHello: "no tag: pin it as docker.io/library/hello-world:<tag>@" + pinHello}},
		{"mismatched", false, 1, map[string]string{"docker.io/library/local-test:1.0.0@" + pinHello: "the package stores " + pinManifest + " under this name, not the pinned " + pinHello}},
		{"two-pins", false, 2, map[string]string{"docker.io/library/local-test:1.0.0@" + pinIndex: "docker.io/library/local-test:1.0.0 is pinned to two digests: " + pinIndex + " here, " + pinManifest}},
	} {
		t.Run(tc.pkg, func(t *testing.T) {
			r := mustVerify(t, requireDigests(), digestPkg(tc.pkg))
			text := reportText(t, r)
			if r.Verified != tc.verified || r.Digests == nil || r.Digests.Images != tc.images {
				t.Fatalf("verified %v (want %v), digests %+v:\n%s", r.Verified, tc.verified, r.Digests, text)
			}
			// Everything but the digest policy passes: zarf stored every one of them without complaint.
			for _, c := range r.Checks {
				if c.Status == Fail && c.Name != CheckDigests {
					t.Errorf("check %s failed: %s", c.Name, c.Detail)
				}
			}
			if len(r.Digests.Offenders) != len(tc.offenders) {
				t.Fatalf("offenders %+v, want %v", r.Digests.Offenders, tc.offenders)
			}
			for _, o := range r.Digests.Offenders {
				want, ok := tc.offenders[o.Image]
				if !ok || !strings.Contains(o.Problem, want) {
					t.Errorf("offender %s: %q, want %q", o.Image, o.Problem, want)
				}
				if !strings.Contains(text, "    ✗ "+o.Image+" (") {
					t.Errorf("text report does not list %s:\n%s", o.Image, text)
				}
			}
			if c := r.Check(CheckDigests); (c.Status == Pass) != tc.verified {
				t.Errorf("digests check %s: %s", c.Status, c.Detail)
			}
			js, _ := json.Marshal(r)
			if tc.verified == strings.Contains(string(js), `"offenders"`) {
				t.Errorf("json: %s", js)
			}
		})
	}

	// Without the policy, the report does not name the check and every package verifies.
	r := mustVerify(t, Options{Signature: requireDigests().Signature}, digestPkg("mismatched"))
	if !r.Verified || r.Digests != nil || r.Check(CheckDigests).Detail != "" {
		t.Errorf("without --require-digests: verified %v, digests %+v, check %+v", r.Verified, r.Digests, r.Check(CheckDigests))
	}
	for _, c := range r.Checks {
		if c.Name == CheckDigests {
			t.Errorf("the report names the digests check without the policy")
		}
	}
}

// TestDigestExemptions: an exempt image (as zarf.yaml spells it, or the
// same image spelled short) is left out of the policy and said to be exempt.
func TestDigestExemptions(t *testing.T) {
	for _, exempt := range []string{"docker.io/library/local-test:1.0.0", "local-test:1.0.0"} {
		r := mustVerify(t, requireDigests(exempt), digestPkg("tag-only"))
		if !r.Verified || len(r.Digests.Exempt) != 1 || r.Digests.Exempt[0] != "docker.io/library/local-test:1.0.0" {
			t.Errorf("exempt %s: verified %v, %+v\n%s", exempt, r.Verified, r.Digests, reportText(t, r))
		}
		if d := r.Check(CheckDigests).Detail; d != "0 images pinned repo:tag@sha256, each stored as pinned (1 exempt)" {
			t.Errorf("detail %q", d)
		}
	}
	// An exemption for another image does not help.
	if r := mustVerify(t, requireDigests("localhost:5001/krops-airgap:latest"), digestPkg("tag-only")); r.Verified {
		t.Error("an unrelated exemption let a tag-only image through")
	}
}

// editPackage rewrites members of a digests package (keeping checksums.txt
// and the aggregate checksum true); its signature no longer matters.
func editPackage(t *testing.T, name string, edit func(a *testpkg.Archive) []string) string {
	t.Helper()
	a, err := testpkg.ReadFile(digestPkg(name))
	if err != nil {
		t.Fatal(err)
	}
	if changed := edit(a); len(changed) > 0 {
		if err := a.Rechecksum(changed...); err != nil {
			t.Fatal(err)
		}
	}
	return writeArchive(t, a, "zarf-package-"+name+"-amd64-1.0.0.tar.zst")
}

var skipSigDigests = Options{Signature: SignatureOptions{InsecureSkip: true}, Digests: DigestPolicy{Require: true}}

// TestDigestPolicyImagesKey: images named under components[].images are
// held to the policy as those under imageArchives are, in v1alpha1 and
// v1beta1 (zarf.yaml rewritten from the archives the real zarf built).
func TestDigestPolicyImagesKey(t *testing.T) {
	toImages := func(a *testpkg.Archive) []string {
		zy := a.Get("zarf.yaml")
		s := strings.ReplaceAll(string(zy.Data), "  imageArchives:\n  - path: layout.tar\n    images:\n", "  images:\n")
		if s == string(zy.Data) {
			t.Fatal("zarf.yaml has no imageArchives to rewrite")
		}
		zy.Data = []byte(s)
		return nil
	}
	for _, tc := range []struct {
		pkg      string
		verified bool
	}{{"pinned", true}, {"pinned-beta", true}, {"mismatched", false}, {"tag-only", false}} {
		p := editPackage(t, tc.pkg, toImages)
		r := mustVerify(t, skipSigDigests, p)
		if r.Verified != tc.verified {
			t.Errorf("%s with images: verified %v, want %v:\n%s", tc.pkg, r.Verified, tc.verified, reportText(t, r))
		}
		a, err := testpkg.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := ParseZarfYAML(a.Get("zarf.yaml").Data)
		if err != nil {
			t.Fatal(err)
		}
		if u := parsed.ImageUses[0]; u.Key != "images" || u.Component != "c0" {
			t.Errorf("%s: image uses %+v", tc.pkg, parsed.ImageUses)
		}
	}
}

// TestDigestPolicyStoredContent: the stored image must be what the digest
// names: a descriptor that calls a manifest an index, a pinned blob that is
// missing, and an index.json that is not one are each an offence.
func TestDigestPolicyStoredContent(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(a *testpkg.Archive) []string
		want string
	}{
		{"manifest stored as an index", func(a *testpkg.Archive) []string {
			idx := a.Get("images/index.json")
			idx.Data = bytes.Replace(idx.Data, []byte(`"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"`+pinManifest),
				[]byte(`"mediaType":"application/vnd.oci.image.index.v1+json","digest":"`+pinManifest), 1)
			return []string{"images/index.json"}
		}, "is stored as application/vnd.oci.image.index.v1+json but the blob is application/vnd.oci.image.manifest.v1+json"},
		{"blob missing", func(a *testpkg.Archive) []string {
			a.Remove("images/blobs/sha256/" + strings.TrimPrefix(pinIndex, "sha256:"))
			cs := a.Get("checksums.txt")
			var keep []string
			for _, l := range strings.Split(string(cs.Data), "\n") {
				if !strings.Contains(l, strings.TrimPrefix(pinIndex, "sha256:")) {
					keep = append(keep, l)
				}
			}
			cs.Data = []byte(strings.Join(keep, "\n"))
			return []string{"checksums.txt"}
		}, "the pinned blob images/blobs/sha256/" + strings.TrimPrefix(pinIndex, "sha256:") + " is missing"},
		{"index.json not an index", func(a *testpkg.Archive) []string {
			a.Get("images/index.json").Data = []byte(`{"schemaVersion":2,"manifests":[{"digest":"md5:abc"}]}`)
			return []string{"images/index.json"}
		}, `its image cannot be checked: images/index.json manifests[0] has digest "md5:abc"`},
		{"no index.json", func(a *testpkg.Archive) []string {
			a.Remove("images/index.json")
			return nil
		}, "its image cannot be checked: the package has no images/index.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := editPackage(t, "pinned", tc.edit)
			r := mustVerify(t, skipSigDigests, p)
			if r.Verified || r.Digests == nil || len(r.Digests.Offenders) == 0 || !strings.Contains(r.Digests.Offenders[0].Problem, tc.want) {
				t.Errorf("verified %v, digests %+v, want an offender with %q\n%s", r.Verified, r.Digests, tc.want, reportText(t, r))
			}
		})
	}
}

func TestParseImageRef(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"nginx", "docker.io/library/nginx", ""},
		{"nginx:1.27", "docker.io/library/nginx:1.27", ""},
		{"library/nginx:1.27@" + pinHello, "docker.io/library/nginx:1.27@" + pinHello, ""},
		{"ghcr.io/org/app:v1@" + pinIndex, "ghcr.io/org/app:v1@" + pinIndex, ""},
		{"localhost:5001/krops-airgap:latest", "localhost:5001/krops-airgap:latest", ""},
		{"localhost/app", "localhost/app", ""},
		{"127.0.0.1:31999/app:1", "127.0.0.1:31999/app:1", ""},
		{"index.docker.io/org/app:1", "docker.io/org/app:1", ""},
		{"Nginx:1", "", "not a valid repository name"},
		{"nginx:bad tag", "", "not a valid tag"},
		{"nginx@abc", "", "has no algorithm"},
		{"", "", "not a valid repository name"},
	} {
		p, err := ParseImageRef(tc.in)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error with %q", tc.in, err, tc.err)
			}
		case err != nil || p.String() != tc.want:
			t.Errorf("%q: %q %v, want %q", tc.in, p.String(), err, tc.want)
		}
	}
}
