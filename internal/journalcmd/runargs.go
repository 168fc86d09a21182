package journalcmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/plan"
)

// runArgs are a strategy script's arguments as its run takes them: the
// verification material (the flags, else $ZARF_VERIFY_KEY, else the
// $AIRGAP_VERIFY_* signer; else the site's policy in config.yaml), the
// gate, --log, one PACKAGE. Every path is absolute, so that a printed
// command runs from anywhere.
type runArgs struct {
	strategy journal.Strategy
	op       string
	// script is the script's absolute path.
	script string
	pkg    string
	// verify are verify's flags (deploy takes their key: plan.Commands);
	// begin what journal begin records for the next command; rerun this
	// run's options for the printed re-run lines; gate the gate's flags.
	verify, begin, rerun, gate   []string
	gateFile, gateTimeout        string
	yes, force, dryRun           bool
	log, offlineWait, switchMode string
	output                       string
}

// githubActionsIssuer is the issuer of GitHub Actions' OIDC tokens, which
// sign the site's packages keyless.
const githubActionsIssuer = "https://token.actions.githubusercontent.com"

// parseRunArgs reads args (STRATEGY OP SCRIPT-ARGS...) as the script was
// given them, checking that the PACKAGE is there.
func parseRunArgs(args []string, script string, getenv func(string) string) (*runArgs, error) {
	return parseArgs(args, script, getenv, true)
}

// parseArgs is parseRunArgs; with statPackage false the PACKAGE is not
// looked at: the calls of a run after its check (advance --check) read
// the arguments again, and the package is read only by its verification,
// which stages it; the medium it came on may be gone by then.
func parseArgs(args []string, script string, getenv func(string) string, statPackage bool) (*runArgs, error) {
	if len(args) < 2 {
		return nil, kcli.Usage("want STRATEGY OP [ARGS...]")
	}
	st, err := journal.ParseStrategy(args[0])
	if err != nil {
		return nil, kcli.Usage("%v", err)
	}
	r := &runArgs{strategy: st, op: args[1], script: script}
	abs := func(p string) string {
		if p == "-" || filepath.IsAbs(p) {
			return p
		}
		wd, _ := os.Getwd()
		return filepath.Join(wd, p)
	}
	rest := args[2:]
	for len(rest) > 0 {
		a := rest[0]
		switch a {
		case "--key", "--certificate-identity", "--certificate-oidc-issuer", "--certificate-identity-regexp", "--certificate-oidc-issuer-regexp",
			"--trusted-root", "--gate", "--gate-timeout", "--log", "--offline-wait", "--switch-mode", "-o":
			if len(rest) < 2 {
				return nil, kcli.Usage("%s needs a value (see --help)", a)
			}
		}
		switch a {
		case "--key":
			k := abs(rest[1])
			r.verify = append(r.verify, a, k)
			r.rerun = append(r.rerun, a, k)
			r.begin = append(r.begin, a, k)
		case "--trusted-root":
			k := abs(rest[1])
			r.verify = append(r.verify, a, k)
			r.rerun = append(r.rerun, a, k)
			r.begin = append(r.begin, a, k)
		case "--certificate-identity", "--certificate-oidc-issuer":
			r.verify = append(r.verify, a, rest[1])
			r.rerun = append(r.rerun, a, rest[1])
			r.begin = append(r.begin, a, rest[1])
		case "--certificate-identity-regexp", "--certificate-oidc-issuer-regexp":
			// (journal begin records no pattern: the staged record's
			// signer names it in the next command once it is verified.)
			r.verify = append(r.verify, a, rest[1])
			r.rerun = append(r.rerun, a, rest[1])
		case "--yes":
			r.yes = true
			r.rerun = append(r.rerun, a)
		case "--force":
			if st != journal.BlueGreen || r.op != plan.Revert {
				return nil, kcli.Usage("unknown option %s (see --help)", a)
			}
			r.force = true
		case "--gate":
			r.gateFile = abs(rest[1])
			r.gate = append(r.gate, "-f", r.gateFile)
			r.rerun = append(r.rerun, a, r.gateFile)
			r.begin = append(r.begin, a, r.gateFile)
		case "--gate-timeout":
			r.gateTimeout = rest[1]
			r.gate = append(r.gate, "--timeout", rest[1])
			r.rerun = append(r.rerun, a, rest[1])
			r.begin = append(r.begin, a, rest[1])
		case "--log":
			r.log = abs(rest[1])
			r.rerun = append(r.rerun, a, r.log)
		case "--offline-wait":
			r.offlineWait = rest[1]
			r.rerun = append(r.rerun, a, rest[1])
		case "--switch-mode":
			r.switchMode = rest[1]
			r.rerun = append(r.rerun, a, rest[1])
		case "--dry-run":
			r.dryRun = true
		case "-o":
			r.output = rest[1]
		default:
			if strings.HasPrefix(a, "-") {
				return nil, kcli.Usage("unknown option %s (see --help)", a)
			}
			if r.pkg != "" {
				return nil, kcli.Usage("one PACKAGE only (got %s and %s)", r.pkg, a)
			}
			if fi, err := os.Stat(a); statPackage && (err != nil || fi.IsDir()) {
				return nil, kcli.Usage("package %s not found", a)
			}
			// Absolute, so that a re-run from anywhere resumes the same transaction.
			r.pkg = abs(a)
			rest = rest[1:]
			continue
		}
		switch a {
		case "--yes", "--force", "--dry-run":
			rest = rest[1:]
		default:
			rest = rest[2:]
		}
	}
	if len(r.verify) == 0 && getenv("ZARF_VERIFY_KEY") != "" {
		k := abs(getenv("ZARF_VERIFY_KEY"))
		r.verify = append(r.verify, "--key", k)
		r.begin = append(r.begin, "--key", k)
		// In the printed command too, so that it runs without the
		// variable, first (as journal status prints it): the command that
		// verifies a PACKAGE (accept and revert verify nothing).
		if r.pkg != "" {
			r.rerun = append([]string{"--key", k}, r.rerun...)
		}
	}
	if g := getenv("KUBECTL_BUNDLE_GATE"); r.gateFile == "" && g != "" && r.op != "accept" {
		// The site's gate, as --gate names one: absolute, checked before
		// the first step, recorded and named in the printed commands, so
		// that a re-run from another directory gates with the same file.
		r.gateFile = abs(g)
		r.gate = append(r.gate, "-f", r.gateFile)
		r.rerun = append(r.rerun, "--gate", r.gateFile)
		r.begin = append(r.begin, "--gate", r.gateFile)
	}
	identity, err := airgapIdentity(getenv)
	if err != nil {
		return nil, err
	}
	if len(r.verify) == 0 && identity != "" {
		id := []string{"--certificate-identity", identity, "--certificate-oidc-issuer", githubActionsIssuer}
		r.verify = append(r.verify, id...)
		r.rerun = append(r.rerun, id...)
		r.begin = append(r.begin, id...)
	}
	if !r.dryRun && r.output != "" {
		return nil, kcli.Usage("-o %s is the output of --dry-run (see --help)", r.output)
	}
	return r, nil
}

// airgapIdentity is the keyless signer the site's own variables name, as
// offline-run.sh composes it: $AIRGAP_VERIFY_WORKFLOW_REF (GitHub's
// workflow_ref), else $AIRGAP_VERIFY_REPO with $AIRGAP_VERIFY_REF (default
// refs/heads/main) and the air-gapped.yml workflow; "" when none is set.
func airgapIdentity(getenv func(string) string) (string, error) {
	switch {
	case getenv("AIRGAP_VERIFY_WORKFLOW_REF") != "":
		return "https://github.com/" + strings.TrimPrefix(getenv("AIRGAP_VERIFY_WORKFLOW_REF"), "https://github.com/"), nil
	case getenv("AIRGAP_VERIFY_REPO") != "":
		ref := getenv("AIRGAP_VERIFY_REF")
		if ref == "" {
			ref = "refs/heads/main"
		}
		return fmt.Sprintf("https://github.com/%s/.github/workflows/air-gapped.yml@%s", getenv("AIRGAP_VERIFY_REPO"), ref), nil
	case getenv("AIRGAP_VERIFY_REF") != "":
		return "", kcli.Usage("AIRGAP_VERIFY_REF needs AIRGAP_VERIFY_REPO (OWNER/REPO), or set AIRGAP_VERIFY_WORKFLOW_REF")
	}
	return "", nil
}
