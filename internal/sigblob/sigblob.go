// Package sigblob signs a blob into a Sigstore bundle with a cosign-format
// key, offline (no certificate authority, timestamp authority or
// transparency log), and checks such a bundle: what cosign sign-blob
// --bundle writes and cosign verify-blob --key checks.
package sigblob

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/kubectl-bundle/kubectl-bundle/internal/verify"
)

// PEM block types of private keys: cosign's and zarf's encrypted format
// (`cosign generate-key-pair`, `zarf tools gen-key`), its older name, and an
// unencrypted PKCS#8 key.
const (
	pemSigstoreEncrypted = "ENCRYPTED SIGSTORE PRIVATE KEY"
	pemCosignEncrypted   = "ENCRYPTED COSIGN PRIVATE KEY"
	pemPKCS8             = "PRIVATE KEY"
)

// LoadPrivateKey decodes a signing key: a cosign-format encrypted key
// (decrypted with password) or an unencrypted PKCS#8 PEM key.
func LoadPrivateKey(pemBytes, password []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, errors.New("not a PEM private key")
	}
	der := block.Bytes
	switch block.Type {
	case pemSigstoreEncrypted, pemCosignEncrypted:
		var err error
		der, err = encrypted.Decrypt(block.Bytes, password)
		if err != nil {
			return nil, fmt.Errorf("decrypting the key (wrong password?): %w", err)
		}
	case pemPKCS8:
	default:
		return nil, fmt.Errorf("PEM block %q is not a private key this signer reads (%s or %s)", block.Type, pemSigstoreEncrypted, pemPKCS8)
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("parsing the private key: %w", err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("a %T cannot sign", k)
	}
	return s, nil
}

// GenerateKey makes an ECDSA P-256 key pair in cosign's format: the private
// key encrypted with password, the public key as PKIX PEM.
func GenerateKey(password []byte) (privPEM, pubPEM []byte, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, nil, err
	}
	enc, err := encrypted.Encrypt(der, password)
	if err != nil {
		return nil, nil, err
	}
	privPEM = pem.EncodeToMemory(&pem.Block{Type: pemSigstoreEncrypted, Bytes: enc})
	pubPEM, err = cryptoutils.MarshalPublicKeyToPEM(k.Public())
	return privPEM, pubPEM, err
}

// keypair adapts a loaded key to sigstore-go's signer.
type keypair struct {
	key  crypto.Signer
	alg  signature.AlgorithmDetails
	hint []byte
}

func newKeypair(key crypto.Signer) (*keypair, error) {
	if _, ok := key.Public().(ed25519.PublicKey); ok {
		// A bundle's message signature is over a digest; pure Ed25519 signs
		// the message itself, which verifiers reject in that form.
		return nil, errors.New("an Ed25519 key cannot sign a Sigstore message bundle: use an ECDSA key (cosign generate-key-pair and zarf tools gen-key make ECDSA P-256) or RSA")
	}
	alg, err := signature.GetDefaultAlgorithmDetails(key.Public())
	if err != nil {
		return nil, fmt.Errorf("key type: %w", err)
	}
	hint, err := KeyHint(key.Public())
	if err != nil {
		return nil, err
	}
	return &keypair{key: key, alg: alg, hint: []byte(hint)}, nil
}

func (k *keypair) GetHashAlgorithm() protocommon.HashAlgorithm { return k.alg.GetProtoHashType() }
func (k *keypair) GetSigningAlgorithm() protocommon.PublicKeyDetails {
	return k.alg.GetSignatureAlgorithm()
}
func (k *keypair) GetHint() []byte                { return k.hint }
func (k *keypair) GetPublicKey() crypto.PublicKey { return k.key.Public() }
func (k *keypair) GetPublicKeyPem() (string, error) {
	b, err := cryptoutils.MarshalPublicKeyToPEM(k.key.Public())
	return string(b), err
}

func (k *keypair) GetKeyAlgorithm() string {
	if _, ok := k.key.Public().(*ecdsa.PublicKey); ok {
		return "ECDSA"
	}
	return "RSA"
}

func (k *keypair) SignData(_ context.Context, data []byte) ([]byte, []byte, error) {
	h := k.alg.GetHashType()
	digest := data
	if h != crypto.Hash(0) {
		w := h.New()
		w.Write(data)
		digest = w.Sum(nil)
	}
	sig, err := k.key.Sign(rand.Reader, digest, h)
	return sig, digest, err
}

// SignBlob signs content with key into a Sigstore bundle (v0.3, message
// signature, the key's hint as cosign writes it) and returns its JSON. Nothing
// is sent anywhere: no certificate authority, timestamp authority or
// transparency log is involved, so the bundle verifies offline with the
// public key alone.
func SignBlob(content []byte, key crypto.Signer) ([]byte, error) {
	kp, err := newKeypair(key)
	if err != nil {
		return nil, err
	}
	pb, err := sign.Bundle(&sign.PlainData{Data: content}, kp, sign.BundleOptions{})
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	b, err := bundle.NewBundle(pb)
	if err != nil {
		return nil, fmt.Errorf("the signed bundle is invalid: %w", err)
	}
	out, err := b.MarshalJSON()
	if err != nil {
		return nil, err
	}
	// Verify before handing it out: a bundle that does not verify must
	// never be published.
	if _, err := VerifyBlob(content, out, key.Public()); err != nil {
		return nil, fmt.Errorf("the new bundle does not verify: %w", err)
	}
	return append(out, '\n'), nil
}

// VerifyBlob checks that bundleJSON is a Sigstore bundle with a valid
// signature over content by pub, and returns the key's fingerprint.
func VerifyBlob(content, bundleJSON []byte, pub crypto.PublicKey) (string, error) {
	fp, err := verify.KeyFingerprint(pub)
	if err != nil {
		return "", err
	}
	var b bundle.Bundle
	if err := b.UnmarshalJSON(bundleJSON); err != nil {
		return fp, fmt.Errorf("not a Sigstore bundle: %w", err)
	}
	if err := verify.VerifyKeyBundle(&b, bytes.NewReader(content), pub); err != nil {
		return fp, fmt.Errorf("the signature does not verify with key %s: %w", fp, err)
	}
	return fp, nil
}

// ParsePublicKey reads a PEM public key (ECDSA, Ed25519 or RSA).
func ParsePublicKey(pemBytes []byte) (crypto.PublicKey, error) {
	return cryptoutils.UnmarshalPEMToPublicKey(pemBytes)
}

// KeyHint is the public key hint cosign and sigstore-go put in a bundle:
// the standard base64 of the SHA-256 of the key's PKIX DER encoding.
func KeyHint(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	return base64.StdEncoding.EncodeToString(sum[:]), nil
}
