// Package verifycmd is the kubectl-bundle-verify command: flag parsing,
// staging and output around the verify library.
package verifycmd

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v3"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/session"
	"github.com/kubectl-bundle/kubectl-bundle/internal/stage"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
	"github.com/kubectl-bundle/kubectl-bundle/internal/verify"
)

const description = `Verifies a Zarf package offline, in one streaming pass over the archive,
and optionally stages it into the state dir in that same pass.

PACKAGE is a .tar.zst, an uncompressed .tar, or the .part000 of a split package
(the parts are read in order as one stream, never joined on disk). The input is
opened read-only and never changed.

Checks, in the order of the chain of trust (each is named in the report):
  split               .part000 count, bytes and sha256 match the parts
  container           zstd and tar well formed; truncation is a failure
  members             regular files and directories only, clean relative paths, no duplicates
  zarf.yaml           size-capped, parsed (v1alpha1, or the two-document v1beta1 form)
  aggregate-checksum  sha256(checksums.txt) = the aggregate checksum in zarf.yaml
  checksums           every listed member present with that sha256; no unlisted member
  signature           zarf.bundle.sig (Sigstore bundle; --key or keyless) or legacy zarf.yaml.sig (--key)
  sbom                sboms.tar holds Syft JSON documents, one per image and file component
  digests             with --require-digests: every image in zarf.yaml (images and imageArchives)
                      is pinned repo:tag@sha256:<64 hex>, one pin per repo:tag, and the package's
                      OCI layout stores under that name what the digest names (an index for an
                      index pin, a manifest for a manifest pin); offenders are listed

Keyless signatures are checked offline against --trusted-root, else against
the Sigstore public-good trusted root that the pinned zarf embeds (embedded
here; the report names the root used and warns when a signature is younger
than the root, which may then be stale).

The site's policy can live in <state-dir>/config.yaml, so that the strategy
scripts need no flags; a flag overrides its setting (--key or
--insecure-skip-signature overrides the whole keyless policy):
  verify:
    certificateIdentity: https://github.com/ORG/REPO/.github/workflows/air-gapped.yml@refs/heads/main
    certificateOIDCIssuer: https://token.actions.githubusercontent.com
    trustedRoot: trusted_root.json        # optional; relative to the state dir
    requireDigests: true
    digestExemptions: [localhost:5001/krops-airgap:latest]
--policy prints the policy in effect (and exits 2 when there is none).

Examples:
  kubectl bundle verify zarf-package-app-amd64-1.0.0.tar.zst --key cosign.pub
  kubectl bundle verify pkg.tar.zst.part000 --key cosign.pub --stage -o json
  kubectl bundle verify pkg.tar.zst --trusted-root trusted_root.json \
      --certificate-identity ci@example.com --certificate-oidc-issuer https://issuer.example.com
  kubectl bundle verify pkg.tar.zst --require-digests \
      --certificate-identity https://github.com/ORG/REPO/.github/workflows/air-gapped.yml@refs/heads/main \
      --certificate-oidc-issuer https://token.actions.githubusercontent.com`

// exitCodes is this binary's part of the suite's exit-code table.
var exitCodes = kcli.ExitCodesHelp("verified", map[errkind.Kind]string{
	errkind.Negative:    "verification failed (the report names the check)",
	errkind.Usage:       "no verification material, a --key that is not a PEM public key, a package or --key that does not exist, a bad config.yaml",
	errkind.Environment: "the package cannot be read, the state dir cannot be written (--stage)",
	errkind.Conflict:    "the state dir is locked by another command (--stage)",
})

// Command builds the kubectl-bundle-verify command.
func Command(streams kcli.IOStreams) *cli.Command {
	return kcli.Root(streams, &cli.Command{
		Name:        "kubectl-bundle-verify",
		Usage:       "verify a Zarf package offline (container, checksums, signature, SBOMs) and optionally stage it",
		ArgsUsage:   "PACKAGE",
		Description: description + "\n\n" + exitCodes,
		Flags:       flags(),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			return run(ctx, streams, cmd)
		},
	})

}

// flags are PolicyFlags with verify's own, in the order --help lists them.
func flags() []cli.Flag {
	pf := PolicyFlags()
	return append(append(append([]cli.Flag{}, pf[:6]...),
		&cli.BoolFlag{Name: "insecure-skip-signature", Usage: "check integrity only, no signature (loudly reported; nobody vouches for the package)"}),
		append(pf[6:],
			&cli.BoolFlag{Name: "stage", Usage: "copy the package into the state dir in the same pass, kept only if every check passes"},
			&cli.BoolFlag{Name: "policy", Usage: "print the verification policy in effect (flags, config.yaml, trusted root) and exit, without a PACKAGE"})...)
}

// PolicyFlags are the flags that say what a package's signature must be
// (a key, or a keyless identity and issuer under a trusted root) and its
// SBOM and digest-pin policies, over config.yaml's verify: section. A
// command that verifies a package as kubectl bundle-verify does takes them
// and calls VerifyAndStage.
func PolicyFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "key", Usage: "PEM public key (ECDSA, Ed25519 or RSA) as written by zarf tools gen-key or cosign", TakesFile: true},
		&cli.StringFlag{Name: "certificate-identity", Usage: "keyless: the signing certificate's identity (SAN), exact"},
		&cli.StringFlag{Name: "certificate-identity-regexp", Usage: "keyless: the signing certificate's identity (SAN), as a regexp"},
		&cli.StringFlag{Name: "certificate-oidc-issuer", Usage: "keyless: the OIDC issuer in the certificate, exact"},
		&cli.StringFlag{Name: "certificate-oidc-issuer-regexp", Usage: "keyless: the OIDC issuer in the certificate, as a regexp"},
		&cli.StringFlag{Name: "trusted-root", Usage: "keyless: Sigstore trusted_root.json (default: the public-good root the pinned zarf embeds; verification is offline)", TakesFile: true},
		&cli.StringFlag{Name: "sbom", Usage: "require | if-present | skip (default: require when the package has images, files or data injections)"},
		&cli.BoolFlag{Name: "require-digests", Usage: "every image pinned repo:tag@sha256:<digest>, stored as pinned (default: config.yaml's verify.requireDigests)"},
	}
}

// VerifyAndStage verifies the package at path as kubectl bundle-verify
// --stage does, with cmd's PolicyFlags over the site's config, and stages
// it in dir (whose lock the caller holds). A package that fails a check is
// an error of kind Negative naming the check; the report is returned
// either way once verification ran.
func VerifyAndStage(ctx context.Context, cmd *cli.Command, common *kcli.Common, dir *state.Dir, path string) (*verify.Report, error) {
	name := strings.TrimSuffix(filepath.Base(path), ".part000")
	if err := stage.ValidName(name); err != nil {
		return nil, kcli.Usage("%v", err)
	}
	opts, _, err := options(cmd, common)
	if err != nil {
		return nil, err
	}
	if opts.Signature.InsecureSkip {
		return nil, kcli.Usage("the package's signature must be checked: give --key, or the keyless identity and issuer (or set them in config.yaml's verify:)")
	}
	v, err := verify.New(opts)
	if err != nil {
		return nil, err
	}
	stager, err := stage.Begin(dir)
	if err != nil {
		return nil, kcli.Environment(err)
	}
	defer stager.Abort()
	v.CopyTo(stager.Writer())
	rep, err := v.Verify(ctx, path)
	if err != nil {
		return nil, err
	}
	rep.ToolVersion = kcli.ToolVersion()
	if !rep.Verified {
		c, _ := rep.FirstFailure()
		return rep, kcli.Negative(fmt.Errorf("%s is NOT verified: %s: %s", path, c.Name, c.Detail))
	}
	if err := commit(stager, rep, opts, name, path); err != nil {
		return rep, err
	}
	return rep, nil
}

// commit keeps the staged copy of a verified package with its record.
func commit(stager *stage.Stager, rep *verify.Report, opts verify.Options, name, path string) error {
	staged, err := stage.ReportOf(rep)
	if err != nil {
		return kcli.Environment(err)
	}
	res, err := stager.Commit(rep.SHA256, name, stage.Record{Report: staged, ToolVersion: kcli.ToolVersion(),
		Key: opts.Signature.KeyPath, TrustedRoot: opts.Signature.TrustedRootPath, Source: path,
		Unsigned: opts.Signature.InsecureSkip})
	if err != nil {
		return kcli.Environment(err)
	}
	rep.Staged = &verify.Staged{Dir: res.Dir, Path: res.Path, AlreadyStaged: res.AlreadyStaged, Replaced: res.Replaced}
	return nil
}

// Main runs the command with args (os.Args form) and returns the exit code.
func Main(ctx context.Context, streams kcli.IOStreams, args []string) int {
	return kcli.Main(ctx, streams, args, Command)
}

func run(ctx context.Context, streams kcli.IOStreams, cmd *cli.Command) error {
	common, err := kcli.ParseCommon(cmd)
	if err != nil {
		return err
	}
	showPolicy := cmd.Bool("policy")
	switch {
	case showPolicy && cmd.NArg() != 0:
		return kcli.Usage("--policy takes no PACKAGE argument (see --help)")
	case !showPolicy && cmd.NArg() != 1:
		return kcli.Usage("want exactly one PACKAGE argument, got %d (see --help)", cmd.NArg())
	}
	path := cmd.Args().First()
	opts, pol, err := options(cmd, common)
	if err != nil {
		return err
	}
	if !common.Quiet && kcli.IsTerminal(streams.ErrOut) {
		bar := kcli.NewProgress(streams.ErrOut, "verifying "+filepath.Base(path))
		opts.Progress = bar.Update
		defer bar.Done()
	}
	name := strings.TrimSuffix(filepath.Base(path), ".part000")

	// Flags are validated and the key or trusted root loaded before the
	// state dir is touched.
	v, err := verify.New(opts)
	if err != nil {
		return err
	}
	if showPolicy {
		pol.TrustedRoot = v.TrustedRoot()
		return writePolicy(streams, common, pol)
	}
	var stager *stage.Stager
	if cmd.Bool("stage") {
		if err := stage.ValidName(name); err != nil {
			return kcli.Usage("%v", err)
		}
		ss, err := session.Open(session.Options{StateDir: common.StateDir, Mutate: true, Log: common.Log(streams)})
		if err != nil {
			return err
		}
		defer ss.Close()
		stager, err = stage.Begin(ss.Dir)
		if err != nil {
			return kcli.Environment(err)
		}
		defer stager.Abort()
		v.CopyTo(stager.Writer())
	}
	if opts.Signature.InsecureSkip && !common.Quiet {
		fmt.Fprintln(streams.ErrOut, "WARNING: --insecure-skip-signature: the signature is NOT checked; integrity only, nobody vouches for this package")
	}
	rep, err := v.Verify(ctx, path)
	if err != nil {
		return err
	}
	rep.ToolVersion = kcli.ToolVersion()
	if rep.Verified && stager != nil {
		if err := commit(stager, rep, opts, name, path); err != nil {
			return err
		}
	}
	if err := writeReport(streams, common, rep); err != nil {
		return kcli.Environment(err)
	}
	if !rep.Verified {
		c, _ := rep.FirstFailure()
		return kcli.Negative(fmt.Errorf("%s is NOT verified: %s: %s", path, c.Name, c.Detail))
	}
	return nil
}

func writeReport(streams kcli.IOStreams, common *kcli.Common, rep *verify.Report) error {
	if common.Output == kcli.OutputJSON {
		return kcli.WriteJSON(streams.Out, rep)
	}
	if common.Quiet {
		return nil
	}
	return rep.WriteText(streams.Out)
}
