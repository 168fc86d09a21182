// Command release signs a release's checksums file into a Sigstore bundle
// with a cosign-format key (what `cosign generate-key-pair` and `zarf tools
// gen-key` write), verifies such a bundle, and checks a whole release
// directory, all without a network. goreleaser runs `sign` for the
// checksums file (see .goreleaser.yaml); `make release-snapshot` runs
// `check` on what goreleaser wrote.
//
//	go run ./hack/release gen-key DIR
//	go run ./hack/release sign --key cosign.key [--bundle OUT] FILE
//	go run ./hack/release verify --key cosign.pub [--bundle B] FILE
//	go run ./hack/release check --key cosign.pub DIST
//
// The private key's password is read from $COSIGN_PASSWORD, as cosign does.
package main

import (
	"crypto"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/renameio/v2"

	"github.com/kubectl-bundle/kubectl-bundle/internal/plugins"
	"github.com/kubectl-bundle/kubectl-bundle/internal/release"
	"github.com/kubectl-bundle/kubectl-bundle/internal/releasefmt"
)

const usage = `usage:
  release gen-key DIR                                 write DIR/cosign.key (encrypted with $COSIGN_PASSWORD) and DIR/cosign.pub
  release sign --key cosign.key [--bundle OUT] FILE   sign FILE into a Sigstore bundle (default FILE.sigstore.json)
  release verify --key cosign.pub [--bundle B] FILE   check the bundle (default FILE.sigstore.json) against FILE
  release check --key cosign.pub DIST                 check a release directory: signed checksums, archives, SBOMs, krew manifests
`

func main() {
	if err := run(os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		var u usageError
		if errors.As(err, &u) {
			fmt.Fprint(os.Stderr, usage)
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError string

func (u usageError) Error() string { return string(u) }

func run(stdout io.Writer, args []string) error {
	if len(args) == 0 {
		return usageError("no command")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	key := fs.String("key", "", "private key (sign) or public key (verify), PEM")
	bundlePath := fs.String("bundle", "", "the Sigstore bundle (default FILE.sigstore.json)")
	if err := fs.Parse(args[1:]); err != nil {
		return usageError(err.Error())
	}
	if fs.NArg() != 1 {
		return usageError(fmt.Sprintf("%s takes exactly one argument", args[0]))
	}
	arg := fs.Arg(0)
	if *bundlePath == "" {
		*bundlePath = arg + ".sigstore.json"
	}
	switch args[0] {
	case "gen-key":
		priv, pub, err := release.GenerateKey([]byte(os.Getenv("COSIGN_PASSWORD")))
		if err != nil {
			return err
		}
		if err := os.MkdirAll(arg, 0o755); err != nil {
			return err
		}
		if err := renameio.WriteFile(filepath.Join(arg, "cosign.key"), priv, 0o600); err != nil {
			return err
		}
		if err := renameio.WriteFile(filepath.Join(arg, "cosign.pub"), pub, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s and %s\n", filepath.Join(arg, "cosign.key"), filepath.Join(arg, "cosign.pub"))
	case "sign":
		if *key == "" {
			return usageError("sign needs --key PATH (a cosign-format private key; its password in $COSIGN_PASSWORD)")
		}
		pemBytes, err := os.ReadFile(*key)
		if err != nil {
			return err
		}
		k, err := release.LoadPrivateKey(pemBytes, []byte(os.Getenv("COSIGN_PASSWORD")))
		if err != nil {
			return fmt.Errorf("--key %s: %w", *key, err)
		}
		content, err := os.ReadFile(arg)
		if err != nil {
			return err
		}
		b, err := release.SignBlob(content, k)
		if err != nil {
			return err
		}
		if err := renameio.WriteFile(*bundlePath, b, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "signed %s into %s\n", arg, *bundlePath)
	case "verify":
		if *key == "" {
			return usageError("verify needs --key PATH (the PEM public key)")
		}
		pub, err := readPublicKey(*key)
		if err != nil {
			return err
		}
		content, err := os.ReadFile(arg)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(*bundlePath)
		if err != nil {
			return err
		}
		fp, err := release.VerifyBlob(content, b, pub)
		if err != nil {
			return fmt.Errorf("%s: %w", *bundlePath, err)
		}
		fmt.Fprintf(stdout, "Verified OK: %s signed by key %s\n", arg, fp)
	case "check":
		if *key == "" {
			return usageError("check needs --key PATH (the PEM public key the checksums were signed with)")
		}
		pub, err := readPublicKey(*key)
		if err != nil {
			return err
		}
		var names []string
		for _, p := range plugins.All() {
			names = append(names, releasefmt.KrewName(p.Name))
		}
		c, err := release.CheckRelease(arg, pub, names)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "checksums.txt signed by key %s; %d files match it\n", c.KeyFingerprint, c.Files)
		for _, p := range c.Plugins {
			fmt.Fprintf(stdout, "%s %s: %s\n", p.Name, p.Version, strings.Join(p.Platforms, " "))
		}
		fmt.Fprintf(stdout, "strategy scripts: %s\n", c.Scripts)
	default:
		return usageError(fmt.Sprintf("unknown command %q", args[0]))
	}
	return nil
}

// readPublicKey reads the PEM public key --key names.
func readPublicKey(path string) (crypto.PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pub, err := release.ParsePublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("--key %s: %w", path, err)
	}
	return pub, nil
}
