package verify

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Report API identity: the JSON report is a typed object of the project's own.
const (
	ReportAPIVersion = "kubectl-bundle.dev/v1alpha1"
	ReportKind       = "VerificationReport"
)

// Check names, in the order they appear in a report.
const (
	CheckSplit             = "split"
	CheckContainer         = "container"
	CheckMembers           = "members"
	CheckZarfYAML          = "zarf.yaml"
	CheckAggregateChecksum = "aggregate-checksum"
	CheckChecksums         = "checksums"
	CheckSignature         = "signature"
	CheckSBOM              = "sbom"
	CheckDigests           = "digests"
)

// CheckOrder lists every check a report names.
var CheckOrder = []string{CheckSplit, CheckContainer, CheckMembers, CheckZarfYAML,
	CheckAggregateChecksum, CheckChecksums, CheckSignature, CheckSBOM, CheckDigests}

// Status of one check.
type Status string

// Check statuses.
const (
	Pass Status = "pass"
	Fail Status = "fail"
	Skip Status = "skip"
)

// Check is the outcome of one named check.
type Check struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// PackageInfo identifies the package a report is about, as its zarf.yaml says.
type PackageInfo struct {
	Name         string `json:"name,omitempty"`
	Version      string `json:"version,omitempty"`
	Architecture string `json:"architecture,omitempty"`
	Kind         string `json:"kind,omitempty"`
	APIVersion   string `json:"apiVersion,omitempty"`
}

// Signer says who signed the package, as far as the signature check established it.
type Signer struct {
	// Method is "key", "keyless" or "none".
	Method         string `json:"method"`
	Format         string `json:"format,omitempty"` // "bundle" or "legacy"
	KeyFingerprint string `json:"keyFingerprint,omitempty"`
	Identity       string `json:"identity,omitempty"`
	Issuer         string `json:"issuer,omitempty"`
}

// SBOMInfo summarises the SBOM documents read.
type SBOMInfo struct {
	Documents int `json:"documents"`
	// Artifacts are the images that are OCI artifacts, not container
	// images: zarf makes no SBOM for them and none is expected.
	Artifacts []SBOMArtifact `json:"artifacts,omitempty"`
}

// Staged records where a verified package was staged.
type Staged struct {
	Dir           string `json:"dir"`
	Path          string `json:"path"`
	AlreadyStaged bool   `json:"alreadyStaged"`
	// Replaced says why an earlier staged copy of this digest was replaced.
	Replaced string `json:"replaced,omitempty"`
}

// Report is the result of verifying one package.
type Report struct {
	APIVersion string      `json:"apiVersion"`
	Kind       string      `json:"kind"`
	Path       string      `json:"path"`
	Verified   bool        `json:"verified"`
	Package    PackageInfo `json:"package"`
	SHA256     string      `json:"sha256,omitempty"`
	Bytes      int64       `json:"bytes"`
	Seconds    float64     `json:"seconds"`
	Signer     Signer      `json:"signer"`
	// TrustedRoot is the root keyless material was checked against.
	TrustedRoot *TrustedRootInfo `json:"trustedRoot,omitempty"`
	SBOM        SBOMInfo         `json:"sbom"`
	// Digests is what the digest-pin check found; nil when not required.
	Digests *DigestReport `json:"digests,omitempty"`
	// SignatureSkipped is true when --insecure-skip-signature was given: the
	// package was checked for integrity only, and nobody vouches for it.
	SignatureSkipped bool    `json:"signatureSkipped,omitempty"`
	Checks           []Check `json:"checks"`
	// Staged says where --stage put the package; nil when not staged.
	Staged *Staged `json:"staged,omitempty"`
	// DeployActions are the commands the package runs at deploy, outside
	// Zarf's record (zarf.yaml's actions.onDeploy).
	DeployActions []DeployAction `json:"deployActions,omitempty"`
	// Warnings are what the operator should know even when the package verifies.
	Warnings    []string `json:"warnings,omitempty"`
	ToolVersion string   `json:"toolVersion,omitempty"`
	VerifiedAt  string   `json:"verifiedAt,omitempty"`
}

// newReport starts a report naming every check but digests, which a report
// names only when the digest-pin policy is required.
func newReport(path string, digests bool) *Report {
	r := &Report{APIVersion: ReportAPIVersion, Kind: ReportKind, Path: path, Signer: Signer{Method: "none"}}
	for _, n := range CheckOrder {
		if n == CheckDigests && !digests {
			continue
		}
		r.Checks = append(r.Checks, Check{Name: n, Status: Skip, Detail: "not checked"})
	}
	return r
}

func (r *Report) set(name string, s Status, format string, args ...any) {
	for i := range r.Checks {
		if r.Checks[i].Name == name {
			r.Checks[i].Status = s
			r.Checks[i].Detail = fmt.Sprintf(format, args...)
			return
		}
	}
	panic("unknown check " + name)
}

// Check returns the named check.
func (r *Report) Check(name string) Check {
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	return Check{Name: name, Status: Skip}
}

// FirstFailure returns the first failed check, if any.
func (r *Report) FirstFailure() (Check, bool) {
	for _, c := range r.Checks {
		if c.Status == Fail {
			return c, true
		}
	}
	return Check{}, false
}

func (r *Report) finish(start time.Time) {
	r.Seconds = time.Since(start).Seconds()
	r.VerifiedAt = time.Now().UTC().Format(time.RFC3339)
	_, failed := r.FirstFailure()
	r.Verified = !failed
}

// WriteText writes the human report: one ✔/✗/- line per check, then the verdict.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "package   %s\n", r.Path)
	if r.Package.Name != "" {
		fmt.Fprintf(&b, "name      %s %s (%s)\n", r.Package.Name, r.Package.Version, r.Package.Architecture)
	}
	if r.SHA256 != "" {
		fmt.Fprintf(&b, "sha256    %s\n", r.SHA256)
	}
	switch r.Signer.Method {
	case "key":
		fmt.Fprintf(&b, "signer    key %s (%s)\n", r.Signer.KeyFingerprint, r.Signer.Format)
	case "keyless":
		fmt.Fprintf(&b, "signer    %s via %s\n", r.Signer.Identity, r.Signer.Issuer)
	}
	if r.TrustedRoot != nil {
		fmt.Fprintf(&b, "root      %s\n", r.TrustedRoot)
	}
	for _, c := range r.Checks {
		mark := "-"
		switch c.Status {
		case Pass:
			mark = "✔"
		case Fail:
			mark = "✗"
		}
		fmt.Fprintf(&b, "%s %-19s %s\n", mark, c.Name, c.Detail)
		if c.Name == CheckDigests && r.Digests != nil {
			for _, o := range r.Digests.Offenders {
				fmt.Fprintf(&b, "    ✗ %s (%s): %s\n", o.Image, strings.Join(o.Components, ", "), o.Problem)
			}
		}
		if c.Name == CheckSBOM {
			for _, a := range r.SBOM.Artifacts {
				fmt.Fprintf(&b, "    · %s: %s %s (config %s, layers %s), not a container image: no SBOM expected\n",
					a.Image, a.Kind, a.Digest, a.ConfigMediaType, strings.Join(a.LayerMediaTypes, ", "))
			}
		}
	}
	if r.Staged != nil {
		switch {
		case r.Staged.AlreadyStaged:
			fmt.Fprintf(&b, "staged    %s (already staged; existing copy kept)\n", r.Staged.Path)
		case r.Staged.Replaced != "":
			fmt.Fprintf(&b, "staged    %s (replaced the staged copy, which was %s)\n", r.Staged.Path, r.Staged.Replaced)
		default:
			fmt.Fprintf(&b, "staged    %s\n", r.Staged.Path)
		}
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "WARNING: %s\n", w)
	}
	switch {
	case !r.Verified:
		c, _ := r.FirstFailure()
		fmt.Fprintf(&b, "NOT VERIFIED: %s: %s\n", c.Name, c.Detail)
	case r.SignatureSkipped:
		fmt.Fprintf(&b, "VERIFIED WITHOUT SIGNATURE (--insecure-skip-signature): integrity only, nobody vouches for this package (%d bytes in %.2fs)\n", r.Bytes, r.Seconds)
	default:
		fmt.Fprintf(&b, "VERIFIED (%d bytes in %.2fs)\n", r.Bytes, r.Seconds)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
