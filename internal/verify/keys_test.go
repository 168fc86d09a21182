package verify

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

type testKey struct {
	name string
	priv crypto.Signer
	sign func(msg []byte) []byte
}

func testKeys(t *testing.T) []testKey {
	t.Helper()
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return []testKey{
		{"ecdsa-p256", ec, func(m []byte) []byte { d := sha256.Sum256(m); s, _ := ecdsa.SignASN1(rand.Reader, ec, d[:]); return s }},
		{"ed25519", ed, func(m []byte) []byte { return ed25519.Sign(ed, m) }},
		{"rsa-2048", rk, func(m []byte) []byte {
			d := sha256.Sum256(m)
			s, _ := rsa.SignPKCS1v15(rand.Reader, rk, crypto.SHA256, d[:])
			return s
		}},
	}
}

func writePub(t *testing.T, k crypto.Signer) string {
	der, err := x509.MarshalPKIXPublicKey(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "key.pub")
	os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644)
	return p
}

// keyBundle builds a Sigstore bundle v0.3 signed with a public key, as
// cosign sign-blob --key --new-bundle-format writes it offline.
func keyBundle(t *testing.T, msg, sig []byte) []byte {
	d := sha256.Sum256(msg)
	b, err := protojson.Marshal(&protobundle.Bundle{
		MediaType: "application/vnd.dev.sigstore.bundle.v0.3+json",
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content: &protobundle.VerificationMaterial_PublicKey{PublicKey: &protocommon.PublicKeyIdentifier{Hint: "test"}},
		},
		Content: &protobundle.Bundle_MessageSignature{MessageSignature: &protocommon.MessageSignature{
			MessageDigest: &protocommon.HashOutput{Algorithm: protocommon.HashAlgorithm_SHA2_256, Digest: d[:]},
			Signature:     sig,
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestKeyTypes: ECDSA, Ed25519 and RSA keys, legacy and bundle signatures.
func TestKeyTypes(t *testing.T) {
	for _, k := range testKeys(t) {
		t.Run(k.name, func(t *testing.T) {
			pub := writePub(t, k.priv)
			opts := Options{Signature: SignatureOptions{KeyPath: pub}}
			for _, form := range []string{"legacy", "bundle"} {
				a := synthetic(t)
				zy := a.Get("zarf.yaml").Data
				sig := k.sign(zy)
				if form == "legacy" {
					a.Set(LegacySigName, []byte(base64.StdEncoding.EncodeToString(sig)))
				} else {
					a.Set(BundleSigName, keyBundle(t, zy, sig))
				}
				r := mustVerify(t, opts, writeArchive(t, a, "p.tar.zst"))
				if !r.Verified || r.Signer.Format != form {
					t.Fatalf("%s: %+v %+v", form, r.Signer, r.Checks)
				}
				// The same signature over different bytes fails.
				a.Get("zarf.yaml").Data = append(append([]byte(nil), zy...), '#')
				r = mustVerify(t, opts, writeArchive(t, a, "p.tar.zst"))
				if c, _ := r.FirstFailure(); r.Verified || c.Name != CheckSignature {
					t.Fatalf("%s tampered: %+v", form, r.Checks)
				}
			}
		})
	}
}

func FuzzSignatureBundle(f *testing.F) {
	f.Add([]byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json"}`))
	f.Add([]byte(`{}`))
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	dir := f.TempDir()
	pub := filepath.Join(dir, "k.pub")
	os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644)
	sv, err := newSignatureVerifier(SignatureOptions{KeyPath: pub})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := newReport("x", false)
		if st, _ := sv.verify([]byte("zarf.yaml"), nil, b, nil, r); st == Pass {
			t.Fatalf("a fuzzed bundle verified")
		}
		if st, _ := sv.verify([]byte("zarf.yaml"), nil, nil, b, r); st == Pass {
			t.Fatalf("a fuzzed legacy signature verified")
		}
	})
}
