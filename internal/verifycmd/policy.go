package verifycmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v3"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
	"github.com/kubectl-bundle/kubectl-bundle/internal/verify"
)

// Where a setting of the policy in effect came from.
const (
	fromFlag   = "flag"
	fromConfig = "config.yaml"
)

// Policy is the verification policy in effect, as --policy prints it.
type Policy struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Method is key, keyless or none (--insecure-skip-signature).
	Method string `json:"method"`
	Key    string `json:"key,omitempty"`
	// Identity and Issuer are the keyless policy, "regexp:" before a regexp.
	Identity       string                  `json:"identity,omitempty"`
	IdentityFrom   string                  `json:"identityFrom,omitempty"`
	Issuer         string                  `json:"issuer,omitempty"`
	IssuerFrom     string                  `json:"issuerFrom,omitempty"`
	TrustedRoot    *verify.TrustedRootInfo `json:"trustedRoot,omitempty"`
	RequireDigests bool                    `json:"requireDigests"`
	DigestsFrom    string                  `json:"requireDigestsFrom,omitempty"`
	Exemptions     []string                `json:"digestExemptions,omitempty"`
	Config         string                  `json:"config,omitempty"`
}

// siteConfig reads the state dir's config.yaml for its verify: section,
// without creating the state dir; a state dir that others can write is
// refused, since its policy would decide who may sign.
func siteConfig(common *kcli.Common) (slot.VerifyPolicy, string, error) {
	dir, err := state.Resolve(common.StateDir)
	if err != nil {
		return slot.VerifyPolicy{}, "", kcli.Environment(err)
	}
	file := filepath.Join(dir, "config.yaml")
	if _, err := os.Stat(file); err != nil {
		return slot.VerifyPolicy{}, "", nil
	}
	if err := state.CheckDir(dir); err != nil {
		return slot.VerifyPolicy{}, "", kcli.Environment(err)
	}
	cfg, err := slot.LoadConfig(file, os.Getenv, nil)
	if err != nil {
		return slot.VerifyPolicy{}, "", err
	}
	p := cfg.Verify
	if p.TrustedRoot != "" && !filepath.IsAbs(p.TrustedRoot) {
		p.TrustedRoot = filepath.Join(dir, p.TrustedRoot)
	}
	return p, file, nil
}

// options merges the flags over the site's config: --key or
// --insecure-skip-signature replaces the keyless policy, each
// --certificate-* pair (exact or regexp) and --trusted-root replaces its
// setting, --require-digests (true or false) replaces requireDigests.
func options(cmd *cli.Command, common *kcli.Common) (verify.Options, *Policy, error) {
	site, file, err := siteConfig(common)
	if err != nil {
		return verify.Options{}, nil, err
	}
	sig := verify.SignatureOptions{
		KeyPath:              cmd.String("key"),
		CertIdentity:         cmd.String("certificate-identity"),
		CertIdentityRegexp:   cmd.String("certificate-identity-regexp"),
		CertOIDCIssuer:       cmd.String("certificate-oidc-issuer"),
		CertOIDCIssuerRegexp: cmd.String("certificate-oidc-issuer-regexp"),
		TrustedRootPath:      cmd.String("trusted-root"),
		InsecureSkip:         cmd.Bool("insecure-skip-signature"),
	}
	pol := &Policy{APIVersion: verify.ReportAPIVersion, Kind: "VerificationPolicy", Config: file}
	pol.IdentityFrom, pol.IssuerFrom = fromFlag, fromFlag
	if sig.KeyPath == "" && !sig.InsecureSkip {
		if sig.CertIdentity == "" && sig.CertIdentityRegexp == "" && (site.CertificateIdentity != "" || site.CertificateIdentityRegexp != "") {
			sig.CertIdentity, sig.CertIdentityRegexp, pol.IdentityFrom = site.CertificateIdentity, site.CertificateIdentityRegexp, fromConfig
		}
		if sig.CertOIDCIssuer == "" && sig.CertOIDCIssuerRegexp == "" && (site.CertificateOIDCIssuer != "" || site.CertificateOIDCIssuerRegexp != "") {
			sig.CertOIDCIssuer, sig.CertOIDCIssuerRegexp, pol.IssuerFrom = site.CertificateOIDCIssuer, site.CertificateOIDCIssuerRegexp, fromConfig
		}
		if sig.TrustedRootPath == "" && sig.Keyless() {
			sig.TrustedRootPath = site.TrustedRoot
		}
	}
	digests := verify.DigestPolicy{Require: site.RequireDigests, Exempt: site.DigestExemptions}
	pol.DigestsFrom = fromConfig
	if cmd.IsSet("require-digests") {
		digests.Require, pol.DigestsFrom = cmd.Bool("require-digests"), fromFlag
	}
	if file == "" && !cmd.IsSet("require-digests") {
		pol.DigestsFrom = ""
	}
	switch {
	case sig.InsecureSkip:
		pol.Method = "none"
	case sig.KeyPath != "":
		pol.Method, pol.Key = "key", sig.KeyPath
	case sig.Keyless():
		pol.Method = "keyless"
		pol.Identity = orRegexp(sig.CertIdentity, sig.CertIdentityRegexp)
		pol.Issuer = orRegexp(sig.CertOIDCIssuer, sig.CertOIDCIssuerRegexp)
	}
	if pol.Method != "keyless" {
		pol.IdentityFrom, pol.IssuerFrom = "", ""
	}
	pol.RequireDigests, pol.Exemptions = digests.Require, digests.Exempt
	return verify.Options{Signature: sig, SBOM: verify.SBOMPolicy(cmd.String("sbom")), Digests: digests}, pol, nil
}

func orRegexp(exact, re string) string {
	if re != "" {
		return "regexp:" + re
	}
	return exact
}

func writePolicy(streams kcli.IOStreams, common *kcli.Common, p *Policy) error {
	if common.Output == kcli.OutputJSON {
		return kcli.Environment(kcli.WriteJSON(streams.Out, p))
	}
	if common.Quiet {
		return nil
	}
	var b strings.Builder
	from := func(f string) string {
		if f == "" {
			return ""
		}
		return " (" + f + ")"
	}
	fmt.Fprintf(&b, "method    %s\n", p.Method)
	switch p.Method {
	case "key":
		fmt.Fprintf(&b, "key       %s\n", p.Key)
	case "keyless":
		fmt.Fprintf(&b, "identity  %s%s\n", p.Identity, from(p.IdentityFrom))
		fmt.Fprintf(&b, "issuer    %s%s\n", p.Issuer, from(p.IssuerFrom))
		fmt.Fprintf(&b, "root      %s\n", p.TrustedRoot)
	}
	digests := "not required"
	if p.RequireDigests {
		digests = "required"
		if n := len(p.Exemptions); n > 0 {
			digests += fmt.Sprintf(", exempt: %s", strings.Join(p.Exemptions, ", "))
		}
	}
	fmt.Fprintf(&b, "digests   %s%s\n", digests, from(p.DigestsFrom))
	if p.Config != "" {
		fmt.Fprintf(&b, "config    %s\n", p.Config)
	}
	_, err := fmt.Fprint(streams.Out, b.String())
	return kcli.Environment(err)
}
