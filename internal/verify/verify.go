// Package verify checks a Zarf package offline in one streaming pass: the
// container, every member, zarf.yaml, the checksum chain, the signature and
// the SBOMs, without extracting anything or changing the input.
package verify

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// SBOMPolicy says how strictly SBOMs are required.
type SBOMPolicy string

// SBOM policies. The zero value means SBOMRequire for packages with images,
// files or data injections and SBOMIfPresent otherwise.
const (
	SBOMAuto      SBOMPolicy = ""
	SBOMRequire   SBOMPolicy = "require"
	SBOMIfPresent SBOMPolicy = "if-present"
	SBOMSkip      SBOMPolicy = "skip"
)

// Options configure a Verifier.
type Options struct {
	Signature SignatureOptions
	SBOM      SBOMPolicy
	// Digests is the digest-pin policy (--require-digests).
	Digests DigestPolicy
	// Copy, when set, receives every byte of the archive as it is read:
	// staging writes its copy in the same pass as verification.
	Copy io.Writer
	// Progress, when set, is called as bytes are read.
	Progress func(read, total int64)
}

// CopyTo sends the archive's bytes to w during the next Verify: staging
// writes its copy in the verifying pass.
func (v *Verifier) CopyTo(w io.Writer) { v.opts.Copy = w }

// Verifier verifies packages with one set of options.
type Verifier struct {
	opts Options
	sig  *signatureVerifier
}

// New validates opts and loads the verification material. Its errors are
// usage errors (*UsageError) or I/O errors reading the key or trusted root.
func New(opts Options) (*Verifier, error) {
	switch opts.SBOM {
	case SBOMAuto, SBOMRequire, SBOMIfPresent, SBOMSkip:
	default:
		return nil, usagef("--sbom %q: use require, if-present or skip", opts.SBOM)
	}
	sv, err := newSignatureVerifier(opts.Signature)
	if err != nil {
		return nil, err
	}
	return &Verifier{opts: opts, sig: sv}, nil
}

// TrustedRoot is the root keyless signatures are checked against, nil
// when the material is a key or the signature is skipped.
func (v *Verifier) TrustedRoot() *TrustedRootInfo { return v.sig.rootInfo }

// Verify reads the package at path once and returns the report. The error
// is non-nil only when the package could not be read (an *IOError); a bad
// package is a report with Verified false.
func (v *Verifier) Verify(ctx context.Context, path string) (*Report, error) {
	start := time.Now()
	r := newReport(path, v.opts.Digests.Require)
	src, splitErr, err := openSource(path)
	if err != nil {
		return nil, err
	}
	if splitErr != nil {
		r.set(CheckSplit, Fail, "%v", splitErr)
		r.finish(start)
		return r, nil
	}
	defer src.Close()
	r.Bytes = src.size

	fan := newFanout(src.reader, v.opts.Copy, src.size, v.opts.Progress)
	br := bufio.NewReaderSize(fan, 64<<10)
	a := readArchive(ctx, br)
	if errors.Is(a.containerErr, context.Canceled) || errors.Is(a.containerErr, context.DeadlineExceeded) {
		fan.abort()
		return nil, a.containerErr
	}
	// Whatever the archive held, every byte of the input is hashed: finish
	// drains what the archive reader did not consume.
	sum, read, srcErr, copyErr := fan.finish()
	var ioe *IOError
	switch {
	case srcErr != nil:
		return nil, &IOError{Err: fmt.Errorf("reading package: %w", srcErr)}
	case errors.As(a.containerErr, &ioe):
		return nil, ioe
	case copyErr != nil:
		return nil, &IOError{Err: copyErr}
	}
	r.SHA256 = sum
	r.Bytes = read

	if src.split != nil {
		if sum != src.split.Sha256Sum {
			r.set(CheckSplit, Fail, "parts 001..%03d hash to sha256 %s, part000 says %s", src.split.Count, sum, src.split.Sha256Sum)
		} else {
			r.set(CheckSplit, Pass, "%d parts, %d bytes, sha256 matches part000", src.split.Count, src.split.Bytes)
		}
	} else {
		r.set(CheckSplit, Skip, "not a split package")
	}

	v.evaluate(r, a)
	r.finish(start)
	return r, nil
}

// evaluate turns what the pass collected into the named checks, in the
// order of the chain of trust.
func (v *Verifier) evaluate(r *Report, a *archiveResult) {
	if a.containerErr != nil {
		r.set(CheckContainer, Fail, "%v", a.containerErr)
		skipFrom(r, CheckMembers, "not checked: the container is not readable to its end")
		return
	}
	r.set(CheckContainer, Pass, "%s, %d members", a.format, len(a.members))
	if a.problemCount > 0 {
		more := ""
		if a.problemCount > len(a.problems) {
			more = fmt.Sprintf(" (and %d more)", a.problemCount-len(a.problems))
		}
		r.set(CheckMembers, Fail, "%s%s", strings.Join(a.problems, "; "), more)
		skipFrom(r, CheckZarfYAML, "not checked: the member list is not trustworthy")
		return
	}
	r.set(CheckMembers, Pass, "%d files, %d directories, clean unique paths", a.regular, len(a.members)-a.regular)

	pkg, ok := v.checkZarfYAML(r, a)
	if !ok {
		skipFrom(r, CheckAggregateChecksum, "not checked: zarf.yaml is not usable")
		return
	}
	v.checkChecksums(r, a, pkg)
	// A signature file over its size cap is a failure before any crypto.
	// Present members are never nil in control (an empty one is []byte{}).
	var st Status
	var detail string
	if err := errors.Join(a.controlErr[BundleSigName], a.controlErr[LegacySigName]); err != nil {
		st, detail = Fail, err.Error()
	} else {
		st, detail = v.sig.verify(a.control[controlZarfYAML], pkg.Signed, a.control[BundleSigName], a.control[LegacySigName], r)
	}
	r.set(CheckSignature, st, "%s", detail)
	v.checkSBOM(r, a, pkg)
	if v.opts.Digests.Require {
		v.checkDigests(r, a, pkg)
	}
}

func skipFrom(r *Report, from, why string) {
	on := false
	for _, c := range r.Checks {
		if c.Name == from {
			on = true
		}
		if on && c.Name != CheckSplit {
			r.set(c.Name, Skip, "%s", why)
		}
	}
}

func (v *Verifier) checkZarfYAML(r *Report, a *archiveResult) (*ZarfPackage, bool) {
	if err := a.controlErr[controlZarfYAML]; err != nil {
		r.set(CheckZarfYAML, Fail, "%v", err)
		return nil, false
	}
	b, ok := a.control[controlZarfYAML]
	if !ok {
		r.set(CheckZarfYAML, Fail, "the package has no zarf.yaml at its root")
		return nil, false
	}
	pkg, err := ParseZarfYAML(b)
	if err != nil {
		r.set(CheckZarfYAML, Fail, "%v", err)
		return nil, false
	}
	r.Package = PackageInfo{Name: pkg.Name, Version: pkg.Version, Architecture: pkg.Architecture, Kind: pkg.Kind, APIVersion: pkg.APIVersion}
	r.DeployActions = pkg.DeployActions
	if n := len(pkg.DeployActions); n > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d deploy action(s) run commands at deploy whose changes Zarf does not record (zarf package remove and a redeploy of another package leave them): %s", n, deployActionList(pkg.DeployActions)))
	}
	r.set(CheckZarfYAML, Pass, "%s %s %s %s (%s)", pkg.APIVersion, pkg.Kind, pkg.Name, pkg.Version, pkg.Architecture)
	return pkg, true
}

func (v *Verifier) checkChecksums(r *Report, a *archiveResult, pkg *ZarfPackage) {
	if err := a.controlErr[controlChecksumsTxt]; err != nil {
		r.set(CheckAggregateChecksum, Fail, "%v", err)
		r.set(CheckChecksums, Skip, "not checked: checksums.txt is not trusted")
		return
	}
	cs, ok := a.control[controlChecksumsTxt]
	if !ok {
		r.set(CheckAggregateChecksum, Fail, "the package has no checksums.txt")
		r.set(CheckChecksums, Skip, "not checked: checksums.txt is missing")
		return
	}
	field := "metadata.aggregateChecksum"
	if pkg.APIVersion == APIVersionV1Beta1 {
		field = "build.aggregateChecksum"
	}
	sum := sha256.Sum256(cs)
	got := hex.EncodeToString(sum[:])
	switch {
	case pkg.AggregateChecksum == "":
		r.set(CheckAggregateChecksum, Fail, "zarf.yaml has no %s", field)
	case got != pkg.AggregateChecksum:
		r.set(CheckAggregateChecksum, Fail, "sha256(checksums.txt) is %s, zarf.yaml %s says %s", got, field, pkg.AggregateChecksum)
	default:
		r.set(CheckAggregateChecksum, Pass, "sha256(checksums.txt) = %s = %s", got, field)
	}
	if r.Check(CheckAggregateChecksum).Status != Pass {
		r.set(CheckChecksums, Skip, "not checked: checksums.txt is not trusted")
		return
	}
	lines, err := ParseChecksums(cs)
	if err != nil {
		r.set(CheckChecksums, Fail, "%v", err)
		return
	}
	listed := map[string]bool{}
	for _, l := range lines {
		listed[l.Path] = true
		m, ok := a.members[l.Path]
		switch {
		case !ok:
			r.set(CheckChecksums, Fail, "%s is listed in checksums.txt but missing from the package", l.Path)
			return
		case m.dir:
			r.set(CheckChecksums, Fail, "%s is listed in checksums.txt but is a directory", l.Path)
			return
		case m.sha256 != l.SHA256:
			r.set(CheckChecksums, Fail, "%s has sha256 %s, checksums.txt says %s", l.Path, m.sha256, l.SHA256)
			return
		}
	}
	allowed := map[string]bool{controlZarfYAML: true, controlChecksumsTxt: true, BundleSigName: true, LegacySigName: true}
	for _, f := range pkg.ProvenanceFiles {
		allowed[f] = true
	}
	var unlisted []string
	for name, m := range a.members {
		if !m.dir && !listed[name] && !allowed[name] {
			unlisted = append(unlisted, name)
		}
	}
	if len(unlisted) > 0 {
		sort.Strings(unlisted)
		r.set(CheckChecksums, Fail, "member %s is not listed in checksums.txt (%d unlisted): nothing vouches for it", unlisted[0], len(unlisted))
		return
	}
	r.set(CheckChecksums, Pass, "%d members match checksums.txt, none unlisted", len(lines))
}

func (v *Verifier) checkSBOM(r *Report, a *archiveResult, pkg *ZarfPackage) {
	policy := v.opts.SBOM
	if policy == SBOMAuto {
		policy = SBOMIfPresent
		if pkg.SBOMAble {
			policy = SBOMRequire
		}
	}
	switch {
	case policy == SBOMSkip:
		r.set(CheckSBOM, Skip, "skipped by --sbom skip")
		return
	case a.sbom == nil && policy == SBOMRequire:
		why := "--sbom require"
		if v.opts.SBOM == SBOMAuto {
			why = "the package has images, files or data injections"
		}
		r.set(CheckSBOM, Fail, "sboms.tar is missing and SBOMs are required (%s)", why)
		return
	case a.sbom == nil:
		r.set(CheckSBOM, Skip, "the package has no sboms.tar")
		return
	case a.sbom.err != nil:
		r.set(CheckSBOM, Fail, "%v", a.sbom.err)
		return
	}
	// Zarf's rule: an SBOM for each container image and each component with
	// files or data injections; none for an OCI artifact that is not a
	// container image (a Flux artifact, a Helm chart).
	r.SBOM.Artifacts = sbomFreeImages(pkg, a)
	free := map[string]bool{}
	for _, art := range r.SBOM.Artifacts {
		free[NormalizeImageRef(art.Image)] = true
	}
	r.SBOM.Documents = len(a.sbom.documents)
	missing := missingSBOMs(pkg, a.sbom.documents, free)
	artifacts := ""
	switch n := len(r.SBOM.Artifacts); {
	case n == 1:
		artifacts = "; 1 OCI artifact, not a container image, needs none"
	case n > 1:
		artifacts = fmt.Sprintf("; %d OCI artifacts, not container images, need none", n)
	}
	switch {
	case len(missing) > 0:
		r.set(CheckSBOM, Fail, "no SBOM document for %s", strings.Join(missing, ", "))
	case len(a.sbom.documents) == 0 && len(r.SBOM.Artifacts) == 0:
		r.set(CheckSBOM, Fail, "sboms.tar holds no Syft JSON document")
	case len(a.sbom.documents) == 0:
		r.set(CheckSBOM, Pass, "no Syft JSON document, and none is needed%s", artifacts)
	case artifacts != "":
		r.set(CheckSBOM, Pass, "%d Syft JSON documents; every container image and file component has one%s", len(a.sbom.documents), artifacts)
	default:
		r.set(CheckSBOM, Pass, "%d Syft JSON documents; every image and file component has one", len(a.sbom.documents))
	}
}

// deployActionList names each deploy action on one line: its component,
// when it runs and its command's first line.
func deployActionList(acts []DeployAction) string {
	parts := make([]string, 0, len(acts))
	for _, a := range acts {
		parts = append(parts, fmt.Sprintf("%s (%s): %s", a.Component, a.When, FirstLine(a.Cmd, 120)))
	}
	return strings.Join(parts, "; ")
}

// FirstLine is the first line of s, cut to max characters.
func FirstLine(s string, max int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " ..."
	}
	if len(s) > max {
		s = s[:max] + "..."
	}
	return s
}
