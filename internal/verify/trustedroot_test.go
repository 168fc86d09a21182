package verify

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sigstore/sigstore-go/pkg/bundle"
)

// goModule is `go list -m -json MODULE` run in dir.
type goModule struct {
	Path, Version, Dir string
	Time               time.Time
}

func listModule(t testing.TB, dir, module string) goModule {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-json", module)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -m -json %s in %s: %v\n%s", module, dir, err, stderr)
	}
	var m goModule
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	if m.Dir == "" {
		// Not in the module cache yet: download it (a fresh machine with a proxy).
		dl := exec.Command("go", "mod", "download", "-json", module)
		dl.Dir = dir
		out, err := dl.Output()
		if err != nil {
			t.Fatalf("go mod download %s in %s: %v", module, dir, err)
		}
		if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
			t.Fatalf("go mod download %s: no Dir in %s", module, out)
		}
	}
	return m
}

// TestEmbeddedTrustedRootIsPinnedZarfs: the embedded root is byte for byte
// the file the zarf pinned in hack/tools embeds, and its record says so
// (run `make trusted-root` after a zarf bump).
func TestEmbeddedTrustedRootIsPinnedZarfs(t *testing.T) {
	zarf := listModule(t, filepath.Join("..", "..", "hack", "tools"), "github.com/zarf-dev/zarf")
	got, src, err := EmbeddedTrustedRoot()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(zarf.Dir, filepath.FromSlash(src.Path)))
	if err != nil {
		t.Fatalf("the pinned zarf %s has no %s: %v (run make trusted-root)", zarf.Version, src.Path, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("internal/verify/trustedroot/embedded_trusted_root.json differs from %s in zarf %s: run make trusted-root", src.Path, zarf.Version)
	}
	sum := sha256.Sum256(got)
	if hex.EncodeToString(sum[:]) != src.SHA256 {
		t.Errorf("source.json says sha256 %s, the embedded root hashes to %x: run make trusted-root", src.SHA256, sum)
	}
	if src.Module != zarf.Path || src.Version != zarf.Version {
		t.Errorf("source.json says %s %s, hack/tools pins %s %s: run make trusted-root", src.Module, src.Version, zarf.Path, zarf.Version)
	}
	if !src.Date.Equal(zarf.Time) {
		t.Errorf("source.json says date %s, zarf %s is dated %s: run make trusted-root", src.Date, zarf.Version, zarf.Time)
	}
}

// publicGood reads the public-good message-signature bundle over a.txt that
// sigstore's protobuf-specs ship as test assets (signed by Fulcio, logged in
// Rekor: nobody here made it).
func publicGood(t testing.TB) (artifact []byte, b *bundle.Bundle) {
	t.Helper()
	m := listModule(t, ".", "github.com/sigstore/protobuf-specs")
	dir := filepath.Join(m.Dir, "gen", "pb-rust", "sigstore-protobuf-specs", "assets")
	artifact, err := os.ReadFile(filepath.Join(dir, "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "a.txt.sigstore"))
	if err != nil {
		t.Fatal(err)
	}
	b = &bundle.Bundle{}
	if err := b.UnmarshalJSON(raw); err != nil {
		t.Fatal(err)
	}
	return artifact, b
}

// TestEmbeddedRootVerifiesPublicGood: with no trusted-root path, the
// embedded root verifies a real public-good bundle for its identity, and
// rejects one changed byte and a wrong identity, naming the root it used.
func TestEmbeddedRootVerifiesPublicGood(t *testing.T) {
	artifact, b := publicGood(t)
	policy := SignatureOptions{CertIdentity: "a@tny.town", CertOIDCIssuer: "https://github.com/login/oauth"}

	v, err := newSignatureVerifier(policy)
	if err != nil {
		t.Fatal(err)
	}
	r := newReport("a.txt", false)
	st, detail := v.verifyKeyless(b, artifact, r)
	if st != Pass {
		t.Fatalf("public-good bundle with the embedded root: %s: %s", st, detail)
	}
	if r.TrustedRoot == nil || r.TrustedRoot.Source != RootEmbedded || r.TrustedRoot.From != "zarf v0.84.0" {
		t.Errorf("report's trusted root: %+v, want the embedded one from zarf v0.84.0", r.TrustedRoot)
	}
	if r.Signer.Identity != "a@tny.town" || r.Signer.Issuer != "https://github.com/login/oauth" {
		t.Errorf("signer %+v", r.Signer)
	}
	if !strings.Contains(detail, "transparency log") {
		t.Errorf("detail %q does not name the transparency log", detail)
	}
	if len(r.Warnings) != 0 {
		t.Errorf("a 2024 signature against a 2026 root: warnings %q", r.Warnings)
	}

	changed := bytes.Clone(artifact)
	changed[len(changed)/2] ^= 1
	r = newReport("a.txt", false)
	st, detail = v.verifyKeyless(b, changed, r)
	if st != Fail || !strings.Contains(detail, "the embedded public-good trusted root (zarf v0.84.0, 2026-08-20") {
		t.Errorf("one changed byte: %s: %s", st, detail)
	}

	wrong := policy
	wrong.CertIdentity = "b@tny.town"
	v2, err := newSignatureVerifier(wrong)
	if err != nil {
		t.Fatal(err)
	}
	st, detail = v2.verifyKeyless(b, artifact, newReport("a.txt", false))
	if st != Fail || !strings.Contains(detail, `expected SAN value "b@tny.town", got "a@tny.town"`) {
		t.Errorf("wrong identity: %s: %s", st, detail)
	}
	wrongIssuer := policy
	wrongIssuer.CertOIDCIssuer = "https://token.actions.githubusercontent.com"
	v3, err := newSignatureVerifier(wrongIssuer)
	if err != nil {
		t.Fatal(err)
	}
	if st, detail = v3.verifyKeyless(b, artifact, newReport("a.txt", false)); st != Fail {
		t.Errorf("wrong issuer: %s: %s", st, detail)
	}
}

// TestStaleRootWarning: a signature logged after the embedded root's date
// is reported with a warning that the root may be stale; a file root (of
// unknown date) is named by its path.
func TestStaleRootWarning(t *testing.T) {
	artifact, b := publicGood(t)
	v, err := newSignatureVerifier(SignatureOptions{CertIdentity: "a@tny.town", CertOIDCIssuer: "https://github.com/login/oauth"})
	if err != nil {
		t.Fatal(err)
	}
	// The embedded root as if it had been copied in 2023.
	info := *v.rootInfo
	info.date = time.Date(2023, 6, 1, 0, 0, 0, 0, time.UTC)
	v.rootInfo = &info
	r := newReport("a.txt", false)
	if st, detail := v.verifyKeyless(b, artifact, r); st != Pass {
		t.Fatalf("%s: %s", st, detail)
	}
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "log time 2024-01-26T19:35:30Z is later than the embedded trusted root's date 2023-06-01 (zarf v0.84.0): the root may be stale") {
		t.Errorf("warnings %q", r.Warnings)
	}
	var text bytes.Buffer
	r.finish(time.Now())
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nroot      the embedded public-good trusted root (zarf v0.84.0, 2023-06-01, sha256 6494e21ea73f)\n", "\nWARNING: the signature's log time "} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}

	// The test CA's root does not vouch for a public-good certificate.
	testRoot := filepath.Join("..", "..", "testdata", "keys", "trusted_root.json")
	vf, err := newSignatureVerifier(SignatureOptions{CertIdentity: "a@tny.town", CertOIDCIssuer: "https://github.com/login/oauth", TrustedRootPath: testRoot})
	if err != nil {
		t.Fatal(err)
	}
	r = newReport("a.txt", false)
	st, detail := vf.verifyKeyless(b, artifact, r)
	if st != Fail || !strings.Contains(detail, "does not verify against the trusted root "+testRoot+" (sha256 ") {
		t.Errorf("test CA root: %s: %s", st, detail)
	}
	if r.TrustedRoot == nil || r.TrustedRoot.Source != RootFile || r.TrustedRoot.Path != testRoot || len(r.Warnings) != 0 {
		t.Errorf("file root: %+v, warnings %q", r.TrustedRoot, r.Warnings)
	}
}

// BenchmarkKeylessRoot: loading the trusted root and verifying the
// public-good bundle, with the embedded root and with the same root as a
// --trusted-root file.
func BenchmarkKeylessRoot(b *testing.B) {
	artifact, bun := publicGood(b)
	file := filepath.Join(b.TempDir(), "trusted_root.json")
	raw, _, _ := EmbeddedTrustedRoot()
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct{ name, root string }{{"embedded", ""}, {"file", file}} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				v, err := newSignatureVerifier(SignatureOptions{CertIdentity: "a@tny.town", CertOIDCIssuer: "https://github.com/login/oauth", TrustedRootPath: tc.root})
				if err != nil {
					b.Fatal(err)
				}
				if st, detail := v.verifyKeyless(bun, artifact, newReport("a.txt", false)); st != Pass {
					b.Fatal(detail)
				}
			}
		})
	}
}
