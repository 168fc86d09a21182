package release

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"github.com/kubectl-bundle/kubectl-bundle/internal/sigblob"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/verify"
)

// The repository's test key pair (hack/gen-testdata.sh: zarf tools gen-key,
// password "testpass"): the cosign format operators already hold.
const (
	testKey      = "../../testdata/keys/cosign.key"
	testPub      = "../../testdata/keys/cosign.pub"
	testOtherPub = "../../testdata/keys/other.pub"
	testPassword = "testpass"
)

func readPub(t *testing.T, path string) crypto.PublicKey {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ParsePublicKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

func loadTestKey(t *testing.T) crypto.Signer {
	t.Helper()
	b, err := os.ReadFile(testKey)
	if err != nil {
		t.Fatal(err)
	}
	k, err := LoadPrivateKey(b, []byte(testPassword))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestLoadPrivateKeyReadsZarfAndCosignKeys(t *testing.T) {
	k := loadTestKey(t)
	want, _ := verify.KeyFingerprint(readPub(t, testPub))
	got, _ := verify.KeyFingerprint(k.Public())
	if got != want {
		t.Fatalf("the key's public half is %s, cosign.pub is %s", got, want)
	}

	b, _ := os.ReadFile(testKey)
	if _, err := LoadPrivateKey(b, []byte("wrong")); err == nil || !strings.Contains(err.Error(), "wrong password") {
		t.Errorf("wrong password: %v", err)
	}
	if _, err := LoadPrivateKey([]byte("not a key"), nil); err == nil || !strings.Contains(err.Error(), "not a PEM") {
		t.Errorf("garbage: %v", err)
	}
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	pkcs1 := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rk)})
	if _, err := LoadPrivateKey(pkcs1, nil); err == nil || !strings.Contains(err.Error(), "ENCRYPTED SIGSTORE PRIVATE KEY") {
		t.Errorf("PKCS#1 key: want an error naming the formats read, got %v", err)
	}
	pub := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1}})
	if _, err := LoadPrivateKey(pub, nil); err == nil {
		t.Error("a public key loaded as a private key")
	}
}

func TestGenerateKeyIsEncryptedAndLoads(t *testing.T) {
	priv, pubPEM, err := GenerateKey([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(priv), "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----") {
		t.Fatalf("private key is not in cosign's encrypted format:\n%s", priv)
	}
	if _, err := LoadPrivateKey(priv, []byte("other")); err == nil {
		t.Fatal("the generated key loaded with the wrong password")
	}
	k, err := LoadPrivateKey(priv, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ParsePublicKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := verify.KeyFingerprint(pub)
	b, _ := verify.KeyFingerprint(k.Public())
	if a != b {
		t.Fatalf("cosign.pub %s does not belong to cosign.key %s", a, b)
	}
}

func pkcs8PEM(t *testing.T, k crypto.Signer) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func TestSignBlobVerifiesOfflineForEveryKeyType(t *testing.T) {
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	content := []byte("185e55e98dd08a3aa97ee92900b8749f260b257fd8a91f833ff8d443e18deec7  kubectl-bundle-verify_1.0.0_linux_amd64.tar.gz\n")
	if _, err := SignBlob(content, ed); err == nil || !strings.Contains(err.Error(), "use an ECDSA key") {
		t.Errorf("Ed25519: want a refusal that names what to use, got %v", err)
	}
	for name, key := range map[string]crypto.Signer{"zarf key": loadTestKey(t), "ecdsa-p256": p256, "ecdsa-p384": p384, "rsa-2048": rk} {
		t.Run(name, func(t *testing.T) {
			k, err := LoadPrivateKey(pkcs8PEM(t, key), nil)
			if err != nil {
				t.Fatal(err)
			}
			b, err := SignBlob(content, k)
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				MediaType            string
				VerificationMaterial struct{ PublicKey struct{ Hint string } }
				MessageSignature     struct{ Signature string }
			}
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			fp, _ := verify.KeyFingerprint(key.Public())
			hint, _ := sigblob.KeyHint(key.Public())
			if doc.MediaType != "application/vnd.dev.sigstore.bundle.v0.3+json" || doc.VerificationMaterial.PublicKey.Hint != hint || doc.MessageSignature.Signature == "" {
				t.Fatalf("not a v0.3 message-signature bundle with the key's hint:\n%s", b)
			}
			if got, err := VerifyBlob(content, b, key.Public()); err != nil || got != fp {
				t.Fatalf("VerifyBlob = %s, %v", got, err)
			}
			tampered := append([]byte{}, content...)
			tampered[0] ^= 1
			if _, err := VerifyBlob(tampered, b, key.Public()); err == nil || !strings.Contains(err.Error(), "does not verify with key "+fp) {
				t.Errorf("a changed file verified: %v", err)
			}
			if _, err := VerifyBlob(content, b, other.Public()); err == nil {
				t.Error("the bundle verified with another key")
			}
			if _, err := VerifyBlob(content, []byte(`{"mediaType":"x"}`), key.Public()); err == nil || !strings.Contains(err.Error(), "not a Sigstore bundle") {
				t.Errorf("a non-bundle: %v", err)
			}
		})
	}
}

func TestSignedWithTheTestKeyVerifiesWithItsPublicKeyOnly(t *testing.T) {
	content := []byte("x\n")
	b, err := SignBlob(content, loadTestKey(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyBlob(content, b, readPub(t, testPub)); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyBlob(content, b, readPub(t, testOtherPub)); err == nil {
		t.Fatal("verified with other.pub")
	}
}

// The hint cosign v3.1.3 wrote for the test key (sign-blob --bundle).
func TestKeyHintIsCosigns(t *testing.T) {
	hint, err := sigblob.KeyHint(readPub(t, testPub))
	if err != nil || hint != "Sr/XypP1XYaoCKPwOXYjvREzR5nYOOqeBcVhaxVTeBo=" {
		t.Fatalf("hint %q, %v", hint, err)
	}
}

// Bundles made here verify with the real cosign, and cosign's with VerifyBlob,
// both offline.
func TestBundlesInteroperateWithCosign(t *testing.T) {
	cosign := tool(t, "COSIGN", "cosign")
	dir := t.TempDir()
	file := filepath.Join(dir, "checksums.txt")
	content := []byte(strings.Repeat("ab", 32) + "  a.tar.gz\n")
	if err := os.WriteFile(file, content, 0o644); err != nil {
		t.Fatal(err)
	}
	ours, err := SignBlob(content, loadTestKey(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ours.json"), ours, 0o644); err != nil {
		t.Fatal(err)
	}
	cosignRun := func(args ...string) (string, error) {
		cmd := exec.Command(cosign, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "COSIGN_PASSWORD="+testPassword)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	pub, _ := filepath.Abs(testPub)
	if out, err := cosignRun("verify-blob", "--key", pub, "--bundle", "ours.json", "--insecure-ignore-tlog=true", "checksums.txt"); err != nil || !strings.Contains(out, "Verified OK") {
		t.Fatalf("cosign verify-blob of SignBlob's bundle: %v\n%s", err, out)
	}
	other, _ := filepath.Abs(testOtherPub)
	if out, err := cosignRun("verify-blob", "--key", other, "--bundle", "ours.json", "--insecure-ignore-tlog=true", "checksums.txt"); err == nil {
		t.Fatalf("cosign verified SignBlob's bundle with other.pub:\n%s", out)
	}
	key, _ := filepath.Abs(testKey)
	if out, err := cosignRun("sign-blob", "--key", key, "--use-signing-config=false", "--tlog-upload=false", "--bundle", "cosign.json", "--yes", "checksums.txt"); err != nil {
		t.Fatalf("cosign sign-blob: %v\n%s", err, out)
	}
	if _, err := VerifyBlob(content, mustRead(t, filepath.Join(dir, "cosign.json")), readPub(t, testPub)); err != nil {
		t.Fatalf("VerifyBlob of cosign's bundle: %v", err)
	}
	if _, err := VerifyBlob(append(content, 'x'), mustRead(t, filepath.Join(dir, "cosign.json")), readPub(t, testPub)); err == nil {
		t.Fatal("cosign's bundle verified a changed file")
	}
}
