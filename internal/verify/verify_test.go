package verify

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/testpkg"
)

// synthetic builds a small, well-formed unsigned package in memory: what
// zarf would write for one component with a file, and an SBOM for it.
func synthetic(t testing.TB) *testpkg.Archive {
	t.Helper()
	sbom := &testpkg.Archive{}
	sbom.Set("zarf-component-app.json", []byte(`{"artifacts":[],"source":{},"descriptor":{},"schema":{"version":"16.0.0"}}`))
	sbomBytes, err := sbom.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	comp := []byte("component tarball bytes")
	cs := testpkg.SHA256(comp) + " components/app.tar\n" + testpkg.SHA256(sbomBytes) + " sboms.tar\n"
	zy := "kind: ZarfPackageConfig\nmetadata:\n  name: demo\n  version: 1.0.0\n  aggregateChecksum: " + testpkg.SHA256([]byte(cs)) +
		"\nbuild:\n  architecture: amd64\ncomponents:\n- name: app\n  files:\n  - source: a\n    target: /a\n"
	a := &testpkg.Archive{Compressed: true}
	a.Members = append(a.Members, &testpkg.Member{Header: tar.Header{Name: "components/", Typeflag: tar.TypeDir, Mode: 0o755}})
	a.Set("checksums.txt", []byte(cs))
	a.Set("components/app.tar", comp)
	a.Set("sboms.tar", sbomBytes)
	a.Set("zarf.yaml", []byte(zy))
	return a
}

func writeArchive(t *testing.T, a *testpkg.Archive, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := a.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustVerify(t *testing.T, opts Options, path string) *Report {
	t.Helper()
	v, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	r, err := v.Verify(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var skipSig = Options{Signature: SignatureOptions{InsecureSkip: true}}

func TestVerifySynthetic(t *testing.T) {
	p := writeArchive(t, synthetic(t), "zarf-package-demo-amd64-1.0.0.tar.zst")
	r := mustVerify(t, skipSig, p)
	if !r.Verified || !r.SignatureSkipped || r.SBOM.Documents != 1 || r.Package.Name != "demo" {
		var b bytes.Buffer
		r.WriteText(&b)
		t.Fatalf("not verified:\n%s", b.String())
	}
	raw, _ := os.ReadFile(p)
	if sum := sha256.Sum256(raw); r.SHA256 != hex.EncodeToString(sum[:]) || r.Bytes != int64(len(raw)) {
		t.Errorf("sha256/bytes: %s %d", r.SHA256, r.Bytes)
	}
	for _, c := range r.Checks {
		want := Pass
		if c.Name == CheckSplit || c.Name == CheckSignature {
			want = Skip
		}
		if c.Status != want {
			t.Errorf("check %s: %s (%s)", c.Name, c.Status, c.Detail)
		}
	}
}

// TestVerifyFailures derives one bad package per check and asserts that
// exactly that check fails.
func TestVerifyFailures(t *testing.T) {
	for _, tc := range []struct {
		name  string
		check string
		edit  func(a *testpkg.Archive)
	}{
		{"duplicate", CheckMembers, func(a *testpkg.Archive) {
			a.Members = append([]*testpkg.Member{{Header: a.Get("zarf.yaml").Header, Data: []byte("evil")}}, a.Members...)
		}},
		{"symlink", CheckMembers, func(a *testpkg.Archive) {
			a.Members = append(a.Members, &testpkg.Member{Header: tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/"}})
		}},
		{"hardlink", CheckMembers, func(a *testpkg.Archive) {
			a.Members = append(a.Members, &testpkg.Member{Header: tar.Header{Name: "l", Typeflag: tar.TypeLink, Linkname: "zarf.yaml"}})
		}},
		{"absolute", CheckMembers, func(a *testpkg.Archive) { a.Set("/etc/x", []byte("x")) }},
		{"dot-slash", CheckMembers, func(a *testpkg.Archive) { a.Set("./x", []byte("x")) }},
		{"no zarf.yaml", CheckZarfYAML, func(a *testpkg.Archive) { a.Remove("zarf.yaml") }},
		{"no checksums", CheckAggregateChecksum, func(a *testpkg.Archive) { a.Remove("checksums.txt") }},
		{"aggregate", CheckAggregateChecksum, func(a *testpkg.Archive) { a.Get("checksums.txt").Data = append(a.Get("checksums.txt").Data, '\n') }},
		{"modified", CheckChecksums, func(a *testpkg.Archive) { a.Get("components/app.tar").Data = []byte("evil") }},
		{"missing", CheckChecksums, func(a *testpkg.Archive) { a.Remove("components/app.tar") }},
		{"unlisted", CheckChecksums, func(a *testpkg.Archive) { a.Set("components/extra.tar", []byte("x")) }},
		{"dir listed", CheckChecksums, func(a *testpkg.Archive) {
			a.Remove("components/app.tar")
			a.Members = append(a.Members, &testpkg.Member{Header: tar.Header{Name: "components/app.tar/", Typeflag: tar.TypeDir}})
		}},
		{"sbom absent", CheckSBOM, func(a *testpkg.Archive) {
			a.Remove("sboms.tar")
			cs := a.Get("checksums.txt")
			old := testpkg.SHA256(cs.Data)
			cs.Data = []byte(strings.SplitAfter(string(cs.Data), "\n")[0])
			a.Get("zarf.yaml").Data = bytes.ReplaceAll(a.Get("zarf.yaml").Data, []byte(old), []byte(testpkg.SHA256(cs.Data)))
		}},
		{"sbom invalid", CheckSBOM, func(a *testpkg.Archive) {
			s := &testpkg.Archive{}
			s.Set("zarf-component-app.json", []byte(`{"artifacts":{}}`))
			a.Get("sboms.tar").Data, _ = s.Bytes()
			a.Rechecksum("sboms.tar")
		}},
		{"sbom for other component", CheckSBOM, func(a *testpkg.Archive) {
			s := &testpkg.Archive{}
			s.Set("zarf-component-other.json", []byte(`{"artifacts":[],"source":{},"descriptor":{},"schema":{"version":"1"}}`))
			a.Get("sboms.tar").Data, _ = s.Bytes()
			a.Rechecksum("sboms.tar")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := synthetic(t)
			tc.edit(a)
			r := mustVerify(t, skipSig, writeArchive(t, a, "p.tar.zst"))
			if r.Verified {
				t.Fatal("verified a bad package")
			}
			c, _ := r.FirstFailure()
			if c.Name != tc.check {
				t.Fatalf("first failure is %s (%s), want %s", c.Name, c.Detail, tc.check)
			}
		})
	}
}

func TestVerifyContainer(t *testing.T) {
	good, err := synthetic(t).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	plain := synthetic(t)
	plain.Compressed = false
	tarBytes, _ := plain.Bytes()
	for name, b := range map[string][]byte{
		"truncated zstd":          good[:len(good)/2],
		"truncated tar at member": tarBytes[:len(tarBytes)-1024],
		"truncated tar mid":       tarBytes[:len(tarBytes)/2],
		"one zero block":          tarBytes[:len(tarBytes)-512],
		"garbage after":           append(append([]byte(nil), tarBytes...), []byte("junk")...),
		"not an archive":          []byte("hello"),
		"empty":                   nil,
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "p.tar")
			os.WriteFile(p, b, 0o644)
			r := mustVerify(t, skipSig, p)
			if c, _ := r.FirstFailure(); r.Verified || c.Name != CheckContainer {
				t.Fatalf("verified=%v first failure %+v", r.Verified, c)
			}
		})
	}
	t.Run("plain tar verifies", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "p.tar")
		os.WriteFile(p, tarBytes, 0o644)
		if r := mustVerify(t, skipSig, p); !r.Verified {
			t.Fatalf("%+v", r.Checks)
		}
	})
	t.Run("zero padding after trailer is fine", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "p.tar")
		os.WriteFile(p, append(append([]byte(nil), tarBytes...), make([]byte, 8192)...), 0o644)
		if r := mustVerify(t, skipSig, p); !r.Verified {
			t.Fatalf("%+v", r.Checks)
		}
	})
}

func TestVerifySplit(t *testing.T) {
	b, _ := synthetic(t).Bytes()
	dir := t.TempDir()
	base := filepath.Join(dir, "p.tar.zst")
	third := len(b) / 3
	parts := [][]byte{b[:third], b[third : 2*third], b[2*third:]}
	write := func(count int, total int64, sum string) {
		os.WriteFile(base+".part000", []byte(`{"Sha256Sum":"`+sum+`","Bytes":`+strconv.FormatInt(total, 10)+`,"Count":`+strconv.Itoa(count)+`}`), 0o644)
	}
	for i, p := range parts {
		os.WriteFile(base+".part00"+strconv.Itoa(i+1), p, 0o644)
	}
	write(3, int64(len(b)), testpkg.SHA256(b))
	r := mustVerify(t, skipSig, base+".part000")
	if !r.Verified || r.Check(CheckSplit).Status != Pass {
		t.Fatalf("%+v", r.Checks)
	}
	for name, f := range map[string]func(){
		"count":  func() { write(2, int64(len(b)), testpkg.SHA256(b)) },
		"bytes":  func() { write(3, int64(len(b))+1, testpkg.SHA256(b)) },
		"sha":    func() { write(3, int64(len(b)), testpkg.SHA256(nil)) },
		"extra":  func() { write(3, int64(len(b)), testpkg.SHA256(b)); os.WriteFile(base+".part004", []byte("x"), 0o644) },
		"absent": func() { os.Remove(base + ".part004"); os.Remove(base + ".part002") },
	} {
		f()
		r := mustVerify(t, skipSig, base+".part000")
		if c, _ := r.FirstFailure(); r.Verified || c.Name != CheckSplit {
			t.Errorf("%s: verified=%v first failure %+v", name, r.Verified, c)
		}
	}
}

func TestLegacySignature(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	dir := t.TempDir()
	pub := filepath.Join(dir, "k.pub")
	os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644)
	a := synthetic(t)
	d := sha256.Sum256(a.Get("zarf.yaml").Data)
	sig, _ := ecdsa.SignASN1(rand.Reader, key, d[:])
	a.Set("zarf.yaml.sig", []byte(base64.StdEncoding.EncodeToString(sig)))
	opts := Options{Signature: SignatureOptions{KeyPath: pub}}
	r := mustVerify(t, opts, writeArchive(t, a, "p.tar.zst"))
	if !r.Verified || r.Signer.Method != "key" || r.Signer.Format != "legacy" || !strings.HasPrefix(r.Signer.KeyFingerprint, "SHA256:") {
		t.Fatalf("%+v %+v", r.Signer, r.Checks)
	}
	a.Get("zarf.yaml").Data = append(a.Get("zarf.yaml").Data, '#')
	r = mustVerify(t, opts, writeArchive(t, a, "p.tar.zst"))
	if c, _ := r.FirstFailure(); r.Verified || c.Name != CheckSignature {
		t.Fatalf("tampered zarf.yaml: %+v", r.Checks)
	}
	a.Remove("zarf.yaml.sig")
	r = mustVerify(t, opts, writeArchive(t, a, "p.tar.zst"))
	if c, _ := r.FirstFailure(); r.Verified || c.Name != CheckSignature || !strings.Contains(c.Detail, "not signed") {
		t.Fatalf("unsigned with key: %+v", c)
	}
}

func TestNewUsage(t *testing.T) {
	for name, o := range map[string]Options{
		"no material":       {},
		"key and keyless":   {Signature: SignatureOptions{KeyPath: "k", CertIdentity: "a"}},
		"skip and key":      {Signature: SignatureOptions{KeyPath: "k", InsecureSkip: true}},
		"keyless bad root":  {Signature: SignatureOptions{CertIdentity: "a", CertOIDCIssuer: "b", TrustedRootPath: "no-such-root.json"}},
		"keyless no issuer": {Signature: SignatureOptions{CertIdentity: "a", TrustedRootPath: "r"}},
		"bad sbom":          {Signature: SignatureOptions{InsecureSkip: true}, SBOM: "sometimes"},
	} {
		_, err := New(o)
		if _, ok := err.(*UsageError); !ok {
			t.Errorf("%s: got %v, want a usage error", name, err)
		}
	}
	// Keyless with no trusted root is the embedded root, not a usage error.
	v, err := New(Options{Signature: SignatureOptions{CertIdentity: "a", CertOIDCIssuer: "b"}})
	if err != nil || v.TrustedRoot() == nil || v.TrustedRoot().Source != RootEmbedded {
		t.Errorf("keyless with no root: %v, root %+v", err, v)
	}
}

// TestReadArchiveStreams feeds a large member through readArchive from a pipe
// checks that nothing buffers it.
func TestReadArchiveStreams(t *testing.T) {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		tw.WriteHeader(&tar.Header{Name: "big", Typeflag: tar.TypeReg, Size: 64 << 20, Mode: 0o644})
		buf := make([]byte, 1<<20)
		for i := 0; i < 64; i++ {
			tw.Write(buf)
		}
		tw.Close()
		pw.Close()
	}()
	a := readArchive(context.Background(), bufio.NewReaderSize(pr, 1<<20))
	if a.containerErr != nil || a.members["big"].size != 64<<20 {
		t.Fatalf("%v %+v", a.containerErr, a.members)
	}
}
