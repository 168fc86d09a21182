package verify

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/digitorus/timestamp"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	sgverify "github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
)

// MaxSignatureSize caps zarf.bundle.sig and zarf.yaml.sig.
const MaxSignatureSize = 1 << 20

// Signature files inside a Zarf package.
const (
	BundleSigName = "zarf.bundle.sig"
	LegacySigName = "zarf.yaml.sig"
)

// SignatureOptions is the verification material an operator supplies.
type SignatureOptions struct {
	// KeyPath is a PEM public key (ECDSA, Ed25519 or RSA).
	KeyPath string
	// Keyless: certificate identity and OIDC issuer, exact or by regexp,
	// checked against TrustedRootPath (a Sigstore trusted_root.json), or,
	// when it is empty, the public-good root the pinned zarf embeds.
	CertIdentity         string
	CertIdentityRegexp   string
	CertOIDCIssuer       string
	CertOIDCIssuerRegexp string
	TrustedRootPath      string
	// InsecureSkip skips the signature check: integrity only.
	InsecureSkip bool
}

// Keyless reports whether keyless material was given.
func (o SignatureOptions) Keyless() bool {
	return o.CertIdentity != "" || o.CertIdentityRegexp != "" || o.CertOIDCIssuer != "" || o.CertOIDCIssuerRegexp != ""
}

// UsageError is an invocation problem, found before reading the package.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// ErrorKind: an invocation problem is a usage error.
func (e *UsageError) ErrorKind() errkind.Kind { return errkind.Usage }

func usagef(format string, args ...any) error { return &UsageError{Err: fmt.Errorf(format, args...)} }

// namedFileError classifies a failure to read a file the operator named
// (doing says what was being done, e.g. "reading --key"): one that is
// missing or not a file is a usage error, any other read error an I/O error.
func namedFileError(doing string, err error) error {
	err = fmt.Errorf("%s: %w", doing, err)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EISDIR) {
		return &UsageError{Err: err}
	}
	return &IOError{Err: err}
}

// signatureVerifier holds loaded verification material, ready before the pass starts.
type signatureVerifier struct {
	opts        SignatureOptions
	pub         crypto.PublicKey
	fingerprint string
	trustedRoot *root.TrustedRoot
	rootInfo    *TrustedRootInfo
	identity    sgverify.CertificateIdentity
}

// newSignatureVerifier validates the options and loads the key or trusted
// root, so that a bad flag fails before any byte of the package is read.
func newSignatureVerifier(o SignatureOptions) (*signatureVerifier, error) {
	v := &signatureVerifier{opts: o}
	if o.InsecureSkip {
		if o.KeyPath != "" || o.Keyless() {
			return nil, usagef("--insecure-skip-signature cannot be combined with --key or --certificate-* flags")
		}
		return v, nil
	}
	switch {
	case o.KeyPath != "" && o.Keyless():
		return nil, usagef("give either --key or the --certificate-* flags, not both")
	case o.KeyPath == "" && !o.Keyless():
		return nil, usagef("no verification material: give --key PATH, or --certificate-identity[-regexp] with --certificate-oidc-issuer[-regexp] (and --trusted-root, else the embedded public-good root), or set verify.certificateIdentity and verify.certificateOIDCIssuer in the state dir's config.yaml, or --insecure-skip-signature to check integrity only")
	case o.KeyPath != "":
		b, err := os.ReadFile(o.KeyPath)
		if err != nil {
			return nil, namedFileError("reading --key", err)
		}
		pub, err := cryptoutils.UnmarshalPEMToPublicKey(b)
		if err != nil {
			return nil, usagef("--key %s is not a PEM public key (ECDSA, Ed25519 or RSA): %v", o.KeyPath, err)
		}
		fp, err := KeyFingerprint(pub)
		if err != nil {
			return nil, usagef("--key %s: %v", o.KeyPath, err)
		}
		v.pub, v.fingerprint = pub, fp
	default:
		if (o.CertIdentity == "") == (o.CertIdentityRegexp == "") {
			return nil, usagef("keyless verification needs exactly one of --certificate-identity or --certificate-identity-regexp")
		}
		if (o.CertOIDCIssuer == "") == (o.CertOIDCIssuerRegexp == "") {
			return nil, usagef("keyless verification needs exactly one of --certificate-oidc-issuer or --certificate-oidc-issuer-regexp")
		}
		tr, info, err := loadTrustedRoot(o.TrustedRootPath)
		if err != nil {
			return nil, err
		}
		id, err := sgverify.NewShortCertificateIdentity(o.CertOIDCIssuer, o.CertOIDCIssuerRegexp, o.CertIdentity, o.CertIdentityRegexp)
		if err != nil {
			return nil, usagef("certificate identity: %v", err)
		}
		v.trustedRoot, v.rootInfo, v.identity = tr, info, id
	}
	return v, nil
}

// verify checks the signature over the exact zarf.yaml bytes. bundleSig and
// legacySig are the members' contents, nil when absent.
func (v *signatureVerifier) verify(zarfYAML []byte, signed *bool, bundleSig, legacySig []byte, r *Report) (Status, string) {
	if v.opts.InsecureSkip {
		r.SignatureSkipped = true
		return Skip, "SKIPPED by --insecure-skip-signature: nobody vouches for this package"
	}
	switch {
	case bundleSig != nil:
		return v.verifyBundle(zarfYAML, bundleSig, r)
	case legacySig != nil:
		return v.verifyLegacy(zarfYAML, legacySig, r)
	case signed != nil && *signed:
		return Fail, "zarf.yaml says build.signed: true but the package has neither zarf.bundle.sig nor zarf.yaml.sig"
	default:
		return Fail, "verification material was given but the package is not signed (no zarf.bundle.sig or zarf.yaml.sig)"
	}
}

func (v *signatureVerifier) verifyBundle(zarfYAML, raw []byte, r *Report) (Status, string) {
	r.Signer.Format = "bundle"
	var b bundle.Bundle
	if err := b.UnmarshalJSON(raw); err != nil {
		return Fail, fmt.Sprintf("zarf.bundle.sig is not a valid Sigstore bundle: %v", err)
	}
	vc, err := b.VerificationContent()
	if err != nil {
		return Fail, fmt.Sprintf("zarf.bundle.sig: %v", err)
	}
	_, isCert := vc.(*bundle.Certificate)
	if v.pub != nil {
		if isCert {
			return Fail, "the package was signed keyless (certificate in zarf.bundle.sig) but --key was given: verify with --certificate-identity, --certificate-oidc-issuer and --trusted-root"
		}
		if err := VerifyKeyBundle(&b, bytes.NewReader(zarfYAML), v.pub); err != nil {
			return Fail, fmt.Sprintf("zarf.bundle.sig does not verify zarf.yaml with key %s: %v", v.fingerprint, err)
		}
		r.Signer.Method, r.Signer.KeyFingerprint = "key", v.fingerprint
		return Pass, fmt.Sprintf("Sigstore bundle signed by key %s", v.fingerprint)
	}
	if !isCert {
		return Fail, "the package was signed with a key (no certificate in zarf.bundle.sig) but keyless flags were given: verify with --key"
	}
	st, detail := v.verifyKeyless(&b, zarfYAML, r)
	return st, detail
}

// verifyKeyless checks a bundle with a certificate against the trusted root
// and the identity policy, says in r which root was used, and warns when the
// signature is younger than the embedded root (its keys may have rotated since).
func (v *signatureVerifier) verifyKeyless(b *bundle.Bundle, artifact []byte, r *Report) (Status, string) {
	r.TrustedRoot = v.rootInfo
	st, detail, times := v.checkKeyless(b, artifact, r)
	if v.rootInfo.Source == RootEmbedded {
		for _, t := range times {
			if t.After(v.rootInfo.date) {
				r.Warnings = append(r.Warnings, fmt.Sprintf("the signature's log time %s is later than the embedded trusted root's date %s (%s): the root may be stale; if the signature does not verify, pass --trusted-root with a current trusted_root.json",
					t.UTC().Format(time.RFC3339), v.rootInfo.date.Format(time.DateOnly), v.rootInfo.From))
				break
			}
		}
	}
	return st, detail
}

// checkKeyless runs sigstore-go's verification. times are the signature's
// log and timestamp times: verified ones when it passed, else as the bundle
// claims them (used only to warn about a stale root).
func (v *signatureVerifier) checkKeyless(b *bundle.Bundle, zarfYAML []byte, r *Report) (Status, string, []time.Time) {
	claimed := claimedTimes(b)
	tlogs, err := b.TlogEntries()
	if err != nil {
		return Fail, fmt.Sprintf("zarf.bundle.sig: %v", err), claimed
	}
	// A short-lived certificate is only meaningful with a trusted time:
	// a transparency log entry or a signed timestamp, whichever the bundle has.
	vopts := []sgverify.VerifierOption{sgverify.WithObserverTimestamps(1)}
	if len(tlogs) > 0 {
		vopts = append(vopts, sgverify.WithTransparencyLog(1))
	}
	ver, err := sgverify.NewVerifier(v.trustedRoot, vopts...)
	if err != nil {
		return Fail, fmt.Sprintf("setting up verification: %v", err), claimed
	}
	res, err := ver.Verify(b, sgverify.NewPolicy(sgverify.WithArtifact(bytes.NewReader(zarfYAML)), sgverify.WithCertificateIdentity(v.identity)))
	if err != nil {
		return Fail, fmt.Sprintf("zarf.bundle.sig does not verify against %s and the identity policy: %v", v.rootInfo, err), claimed
	}
	var verified []time.Time
	for _, ts := range res.VerifiedTimestamps {
		verified = append(verified, ts.Timestamp)
	}
	r.Signer.Method = "keyless"
	if res.Signature != nil && res.Signature.Certificate != nil {
		r.Signer.Identity = res.Signature.Certificate.SubjectAlternativeName
		r.Signer.Issuer = res.Signature.Certificate.Issuer
	}
	evidence := []string{}
	if len(tlogs) > 0 {
		evidence = append(evidence, "transparency log")
	}
	if ts, _ := b.Timestamps(); len(ts) > 0 {
		evidence = append(evidence, "signed timestamp")
	}
	return Pass, fmt.Sprintf("Sigstore bundle, certificate for %s (issuer %s), %s", r.Signer.Identity, r.Signer.Issuer, strings.Join(evidence, " + ")), verified
}

// claimedTimes are the times a bundle's log entries and signed timestamps
// claim, unverified.
func claimedTimes(b *bundle.Bundle) []time.Time {
	var out []time.Time
	if tlogs, err := b.TlogEntries(); err == nil {
		for _, e := range tlogs {
			if t := e.IntegratedTime(); !t.IsZero() {
				out = append(out, t)
			}
		}
	}
	if raw, err := b.Timestamps(); err == nil {
		for _, der := range raw {
			if ts, err := timestamp.Parse(der); err == nil {
				out = append(out, ts.Time)
			}
		}
	}
	return out
}

func (v *signatureVerifier) verifyLegacy(zarfYAML, raw []byte, r *Report) (Status, string) {
	r.Signer.Format = "legacy"
	if v.pub == nil {
		return Fail, "the package has only a legacy zarf.yaml.sig, which carries no certificate: verify with --key"
	}
	sig, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil {
		return Fail, fmt.Sprintf("zarf.yaml.sig is not base64: %v", err)
	}
	sv, err := signature.LoadVerifier(v.pub, crypto.SHA256)
	if err != nil {
		return Fail, fmt.Sprintf("loading --key: %v", err)
	}
	if err := sv.VerifySignature(bytes.NewReader(sig), bytes.NewReader(zarfYAML)); err != nil {
		return Fail, fmt.Sprintf("zarf.yaml.sig does not verify zarf.yaml with key %s: %v", v.fingerprint, err)
	}
	r.Signer.Method, r.Signer.KeyFingerprint = "key", v.fingerprint
	return Pass, fmt.Sprintf("legacy zarf.yaml.sig signed by key %s", v.fingerprint)
}

// KeyFingerprint names a public key the way the reports do: "SHA256:" and
// the hex SHA-256 of its PKIX DER encoding.
func KeyFingerprint(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	return "SHA256:" + hex.EncodeToString(sum[:]), nil
}

// VerifyKeyBundle checks that a Sigstore bundle signed with a key (no
// certificate) carries a valid signature over artifact by pub. A bundle
// signed with a key has no trusted time, so none is required.
func VerifyKeyBundle(b *bundle.Bundle, artifact io.Reader, pub crypto.PublicKey) error {
	// The hash is the one the bundle says was signed: cosign signs with
	// SHA-256 whatever the key, sigstore-go's default for a P-384 key is
	// SHA-384.
	hash := crypto.SHA256
	if ms := b.GetMessageSignature(); ms != nil && ms.GetMessageDigest() != nil {
		switch ms.GetMessageDigest().GetAlgorithm() {
		case protocommon.HashAlgorithm_SHA2_384:
			hash = crypto.SHA384
		case protocommon.HashAlgorithm_SHA2_512:
			hash = crypto.SHA512
		}
	}
	sv, err := signature.LoadVerifier(pub, hash)
	if err != nil {
		return fmt.Errorf("loading the public key: %w", err)
	}
	key := root.NewExpiringKey(sv, time.Time{}, time.Time{})
	tm := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) { return key, nil })
	ver, err := sgverify.NewVerifier(tm, sgverify.WithNoObserverTimestamps())
	if err != nil {
		return fmt.Errorf("setting up verification: %w", err)
	}
	_, err = ver.Verify(b, sgverify.NewPolicy(sgverify.WithArtifact(artifact), sgverify.WithKey()))
	return err
}
