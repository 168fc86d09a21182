// Command gentestdata derives test packages from packages the real zarf
// built: legacy-signed, keyless-signed (by sigstore-go's test CA) and
// tampered variants. hack/gen-testdata.sh drives it; tests never run it.
package main

import (
	"archive/tar"
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"strings"

	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/kubectl-bundle/kubectl-bundle/internal/testpkg"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gentestdata:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: gentestdata legacy-sign|keyless|tamper ...")
	}
	switch args[0] {
	case "legacy-sign": // KEY PASS IN OUT
		if len(args) != 5 {
			return fmt.Errorf("usage: legacy-sign COSIGN_KEY PASSWORD IN OUT")
		}
		return legacySign(args[1], args[2], args[3], args[4])
	case "keyless": // IN OUT TRUSTED_ROOT IDENTITY ISSUER [IN OUT]...
		if len(args) < 6 || len(args)%2 != 0 {
			return fmt.Errorf("usage: keyless IN OUT TRUSTED_ROOT IDENTITY ISSUER [IN OUT]... (one CA signs every pair)")
		}
		pairs := append([]string{args[1], args[2]}, args[6:]...)
		return keyless(pairs, args[3], args[4], args[5])
	case "oci-image": // OUT REF ARCH
		if len(args) != 4 {
			return fmt.Errorf("usage: oci-image OUT.tar REF ARCH")
		}
		return ociImage(args[1], args[2], args[3])
	case "flux-artifact": // OUT REF DIR SOURCE REVISION
		if len(args) != 6 {
			return fmt.Errorf("usage: flux-artifact OUT.tar REF DIR SOURCE REVISION")
		}
		return fluxArtifact(args[1], args[2], args[3], args[4], args[5])
	case "pinned-layout": // DIR OUT
		if len(args) != 3 {
			return fmt.Errorf("usage: pinned-layout OCI_LAYOUT_DIR OUT.tar")
		}
		return pinnedLayout(args[1], args[2])
	case "tamper": // KIND IN OUT
		if len(args) != 4 {
			return fmt.Errorf("usage: tamper KIND IN OUT")
		}
		return tamper(args[1], args[2], args[3])
	}
	return fmt.Errorf("unknown subcommand %q", args[0])
}

// loadCosignKey decrypts a private key written by `zarf tools gen-key`
// (cosign's scrypt + secretbox format).
func loadCosignKey(path, pass string) (crypto.Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("%s: no PEM block", path)
	}
	der, err := encrypted.Decrypt(blk.Bytes, []byte(pass))
	if err != nil {
		return nil, fmt.Errorf("decrypting %s: %w", path, err)
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: not a signing key", path)
	}
	return s, nil
}

func legacySign(keyPath, pass, in, out string) error {
	key, err := loadCosignKey(keyPath, pass)
	if err != nil {
		return err
	}
	a, err := testpkg.ReadFile(in)
	if err != nil {
		return err
	}
	zy := a.Get("zarf.yaml")
	// A legacy package predates build.signed/provenanceFiles; it is signed
	// because zarf.yaml.sig exists.
	zy.Data = bytes.Replace(zy.Data, []byte("  signed: false\n"), nil, 1)
	digest := sha256.Sum256(zy.Data)
	ek, ok := key.(*ecdsa.PrivateKey)
	if !ok {
		return fmt.Errorf("legacy signing supports ECDSA keys")
	}
	sig, err := ecdsa.SignASN1(rand.Reader, ek, digest[:])
	if err != nil {
		return err
	}
	a.Set("zarf.yaml.sig", []byte(base64.StdEncoding.EncodeToString(sig)))
	return a.WriteFile(out)
}

func keylessSign(vs *ca.VirtualSigstore, in, out, identity, issuer string) error {
	a, err := testpkg.ReadFile(in)
	if err != nil {
		return err
	}
	zy := a.Get("zarf.yaml")
	ent, err := vs.Sign(identity, issuer, zy.Data)
	if err != nil {
		return err
	}
	sc, err := ent.SignatureContent()
	if err != nil {
		return err
	}
	ms := sc.(*bundle.MessageSignature)
	vc, err := ent.VerificationContent()
	if err != nil {
		return err
	}
	cert := vc.(*bundle.Certificate).Certificate()
	ts, err := ent.Timestamps()
	if err != nil {
		return err
	}
	// Offline keyless signing, as zarf does it on an air-gapped network: a
	// signed timestamp, no transparency-log entry.
	var rfc []*protocommon.RFC3161SignedTimestamp
	for _, t := range ts {
		rfc = append(rfc, &protocommon.RFC3161SignedTimestamp{SignedTimestamp: t})
	}
	pb := &protobundle.Bundle{
		MediaType: "application/vnd.dev.sigstore.bundle.v0.3+json",
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content:                   &protobundle.VerificationMaterial_Certificate{Certificate: &protocommon.X509Certificate{RawBytes: cert.Raw}},
			TimestampVerificationData: &protobundle.TimestampVerificationData{Rfc3161Timestamps: rfc},
		},
		Content: &protobundle.Bundle_MessageSignature{MessageSignature: &protocommon.MessageSignature{
			MessageDigest: &protocommon.HashOutput{Algorithm: protocommon.HashAlgorithm_SHA2_256, Digest: ms.Digest()},
			Signature:     ms.Signature(),
		}},
	}
	bb, err := protojson.Marshal(pb)
	if err != nil {
		return err
	}
	a.Set("zarf.bundle.sig", bb)
	return a.WriteFile(out)
}

// keyless signs each IN of pairs (IN OUT IN OUT...) into its OUT with one
// virtual Sigstore, and writes its trusted root to rootPath.
func keyless(pairs []string, rootPath, identity, issuer string) error {
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		return err
	}
	for i := 0; i < len(pairs); i += 2 {
		if err := keylessSign(vs, pairs[i], pairs[i+1], identity, issuer); err != nil {
			return err
		}
	}
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, vs.FulcioCertificateAuthorities(), nil, vs.TimestampingAuthorities(), nil)
	if err != nil {
		return err
	}
	tj, err := tr.MarshalJSON()
	if err != nil {
		return err
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, tj, "", "  "); err != nil {
		return err
	}
	return os.WriteFile(rootPath, append(pretty.Bytes(), '\n'), 0o644)
}

func tamper(kind, in, out string) error {
	raw, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	// Byte-level damage to the container.
	switch kind {
	case "truncate":
		return os.WriteFile(out, raw[:len(raw)*2/3], 0o644)
	case "truncate-at-member":
		// Cut an uncompressed tar right after a member: archive/tar alone would call that a clean end.
		a, err := testpkg.Read(raw)
		if err != nil {
			return err
		}
		a.Compressed = false
		b, err := a.Bytes()
		if err != nil {
			return err
		}
		return os.WriteFile(out, b[:len(b)-1024], 0o644)
	case "corrupt-zstd":
		b := append([]byte(nil), raw...)
		for i := len(b) / 2; i < len(b)/2+64; i++ {
			b[i] ^= 0xff
		}
		return os.WriteFile(out, b, 0o644)
	case "not-an-archive":
		return os.WriteFile(out, []byte(strings.Repeat("this is not a zarf package\n", 100)), 0o644)
	}
	a, err := testpkg.Read(raw)
	if err != nil {
		return err
	}
	switch kind {
	case "duplicate-member":
		// An evil zarf.yaml before the genuine one: zarf extracts both, the
		// last one wins, and it accepts the package.
		evil := &testpkg.Member{Header: a.Get("zarf.yaml").Header, Data: []byte("kind: ZarfPackageConfig\nmetadata:\n  name: evil\n")}
		a.Members = append([]*testpkg.Member{evil}, a.Members...)
	case "symlink-member":
		a.Members = append(a.Members, &testpkg.Member{Header: tar.Header{Name: "components/link", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd", Mode: 0o777}})
	case "unclean-path":
		a.Members = append(a.Members, &testpkg.Member{Header: tar.Header{Name: "../escape.txt", Typeflag: tar.TypeReg, Mode: 0o644}, Data: []byte("x")})
	case "bad-zarf-yaml":
		a.Get("zarf.yaml").Data = []byte("kind: [unclosed\n")
	case "aggregate-mismatch":
		m := a.Get("checksums.txt")
		m.Data = append(m.Data, '\n')
	case "member-modified":
		m := firstComponent(a)
		m.Data = append(append([]byte(nil), m.Data...), 'x')
	case "member-missing":
		a.Remove(firstComponent(a).Header.Name)
	case "member-unlisted":
		a.Set("components/extra.tar", []byte("not in checksums.txt"))
	case "zarf-yaml-modified":
		m := a.Get("zarf.yaml")
		m.Data = bytes.Replace(m.Data, []byte("description: "), []byte("description: TAMPERED "), 1)
	case "sbom-invalid":
		err = editSBOMs(a, func(t *testpkg.Archive) {
			for _, m := range t.Members {
				if strings.HasSuffix(m.Header.Name, ".json") {
					m.Data = []byte(`{"artifacts": "not an array"}`)
					return
				}
			}
		})
	case "sbom-missing-image":
		err = editSBOMs(a, func(t *testpkg.Archive) {
			for _, m := range t.Members {
				if strings.HasSuffix(m.Header.Name, ".json") && !strings.HasPrefix(m.Header.Name, "zarf-component-") {
					t.Remove(m.Header.Name)
					return
				}
			}
		})
	case "flux-layer-modified":
		m, err := fluxLayer(a)
		if err != nil {
			return err
		}
		m.Data = append(append([]byte(nil), m.Data...), 0)
	case "sbom-absent":
		a.Remove("sboms.tar")
		cs := a.Get("checksums.txt")
		var keep []string
		for _, l := range strings.Split(string(cs.Data), "\n") {
			if !strings.HasSuffix(l, " sboms.tar") {
				keep = append(keep, l)
			}
		}
		old := testpkg.SHA256(cs.Data)
		cs.Data = []byte(strings.Join(keep, "\n"))
		zy := a.Get("zarf.yaml")
		zy.Data = bytes.ReplaceAll(zy.Data, []byte(old), []byte(testpkg.SHA256(cs.Data)))
	default:
		return fmt.Errorf("unknown tamper kind %q", kind)
	}
	if err != nil {
		return err
	}
	return a.WriteFile(out)
}

// editSBOMs rewrites the nested sboms.tar with edit and makes the outer
// checksums consistent again, so that only the SBOM check can fail.
func editSBOMs(a *testpkg.Archive, edit func(*testpkg.Archive)) error {
	sb := a.Get("sboms.tar")
	t, err := testpkg.Read(sb.Data)
	if err != nil {
		return err
	}
	edit(t)
	if sb.Data, err = t.Bytes(); err != nil {
		return err
	}
	return a.Rechecksum("sboms.tar")
}

func firstComponent(a *testpkg.Archive) *testpkg.Member {
	for _, m := range a.Members {
		if strings.HasPrefix(m.Header.Name, "components/") && m.Header.Typeflag == tar.TypeReg {
			return m
		}
	}
	panic("package has no component tarball")
}
