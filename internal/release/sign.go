package release

import (
	"crypto"

	"github.com/kubectl-bundle/kubectl-bundle/internal/sigblob"
)

// The release's checksums file is signed with the suite's one blob signer
// (internal/sigblob), which the evidence export uses too.

// LoadPrivateKey decodes a signing key: a cosign-format encrypted key
// (decrypted with password) or an unencrypted PKCS#8 PEM key.
func LoadPrivateKey(pemBytes, password []byte) (crypto.Signer, error) {
	return sigblob.LoadPrivateKey(pemBytes, password)
}

// GenerateKey makes an ECDSA P-256 key pair in cosign's format.
func GenerateKey(password []byte) (privPEM, pubPEM []byte, err error) {
	return sigblob.GenerateKey(password)
}

// SignBlob signs content with key into a Sigstore bundle that verifies
// offline with the public key alone.
func SignBlob(content []byte, key crypto.Signer) ([]byte, error) {
	return sigblob.SignBlob(content, key)
}

// VerifyBlob checks that bundleJSON is a Sigstore bundle with a valid
// signature over content by pub, and returns the key's fingerprint.
func VerifyBlob(content, bundleJSON []byte, pub crypto.PublicKey) (string, error) {
	return sigblob.VerifyBlob(content, bundleJSON, pub)
}

// ParsePublicKey reads a PEM public key (ECDSA, Ed25519 or RSA).
func ParsePublicKey(pemBytes []byte) (crypto.PublicKey, error) {
	return sigblob.ParsePublicKey(pemBytes)
}
