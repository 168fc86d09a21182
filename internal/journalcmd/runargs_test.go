package journalcmd

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/plan"
)

func TestParseRunArgs(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	pkg := "zarf-package-x-amd64-1.0.0.tar.zst"
	if err := os.WriteFile(pkg, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	abs := func(p string) string { return filepath.Join(dir, p) }
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	t.Run("flags made absolute for every use", func(t *testing.T) {
		r, err := parseRunArgs([]string{"in-place", "apply", pkg, "--key", "k.pub", "--gate", "g.yaml", "--gate-timeout", "1m", "--log", "run.log"}, "/s/in-place.sh", env())
		if err != nil {
			t.Fatal(err)
		}
		if r.pkg != abs(pkg) {
			t.Errorf("package %q, want %q", r.pkg, abs(pkg))
		}
		want := []string{"--key", abs("k.pub")}
		for name, got := range map[string][]string{"verify": r.verify, "deploy": plan.Commands{Verify: r.verify}.Deploy("a", "D").Argv[5:]} {
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s %q, want %q", name, got, want)
			}
		}
		if want := []string{"--key", abs("k.pub"), "--gate", abs("g.yaml"), "--gate-timeout", "1m", "--log", abs("run.log")}; !reflect.DeepEqual(r.rerun, want) {
			t.Errorf("rerun %q, want %q", r.rerun, want)
		}
		if want := []string{"-f", abs("g.yaml"), "--timeout", "1m"}; !reflect.DeepEqual(r.gate, want) {
			t.Errorf("gate %q, want %q", r.gate, want)
		}
	})
	t.Run("ZARF_VERIFY_KEY only without flags, first in the re-run line", func(t *testing.T) {
		r, err := parseRunArgs([]string{"in-place", "apply", pkg, "--yes"}, "/s/in-place.sh", env("ZARF_VERIFY_KEY", "env.pub"))
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"--key", abs("env.pub"), "--yes"}; !reflect.DeepEqual(r.rerun, want) {
			t.Errorf("rerun %q, want %q", r.rerun, want)
		}
		r, err = parseRunArgs([]string{"in-place", "apply", pkg, "--certificate-identity", "id", "--certificate-oidc-issuer", "iss"}, "/s/in-place.sh", env("ZARF_VERIFY_KEY", "env.pub"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(strings.Join(r.verify, " "), "env.pub") {
			t.Errorf("the flags' signer must win over ZARF_VERIFY_KEY: %q", r.verify)
		}
	})
	t.Run("the site's AIRGAP_VERIFY_* signer", func(t *testing.T) {
		r, err := parseRunArgs([]string{"in-place", "apply", pkg}, "/s/in-place.sh", env("AIRGAP_VERIFY_REPO", "o/r"))
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"--certificate-identity", "https://github.com/o/r/.github/workflows/air-gapped.yml@refs/heads/main", "--certificate-oidc-issuer", githubActionsIssuer}
		if !reflect.DeepEqual(r.verify, want) || !reflect.DeepEqual(r.begin, want) {
			t.Errorf("verify %q begin %q, want %q", r.verify, r.begin, want)
		}
	})
	for _, tc := range []struct {
		name string
		args []string
		env  func(string) string
		msg  string
	}{
		{"ref without repo", []string{"in-place", "apply", pkg}, env("AIRGAP_VERIFY_REF", "refs/tags/v1"), "AIRGAP_VERIFY_REF needs AIRGAP_VERIFY_REPO"},
		{"-o without --dry-run", []string{"in-place", "apply", pkg, "-o", "json"}, env(), "-o json is the output of --dry-run"},
		{"unknown option", []string{"in-place", "apply", pkg, "--nope"}, env(), "unknown option --nope"},
		{"--force outside revert", []string{"blue-green", "apply", pkg, "--force"}, env(), "unknown option --force"},
		{"two packages", []string{"in-place", "apply", pkg, pkg}, env(), "one PACKAGE only"},
		{"missing package", []string{"in-place", "apply", "nope.tar.zst"}, env(), "package nope.tar.zst not found"},
		{"missing value", []string{"in-place", "apply", pkg, "--gate"}, env(), "--gate needs a value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseRunArgs(tc.args, "/s/x.sh", tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.msg) || kcli.ExitCode(err) != kcli.ExitUsage {
				t.Fatalf("error %v (exit %d), want exit 2 saying %q", err, kcli.ExitCode(err), tc.msg)
			}
		})
	}
	// A run's calls after its check: the package may be gone (staged).
	if r, err := parseArgs([]string{"in-place", "apply", "/gone/p.tar.zst"}, "/s/x.sh", env(), false); err != nil || r.pkg != "/gone/p.tar.zst" {
		t.Fatalf("a run's later call with its package gone: %+v, %v", r, err)
	}
	r, err := parseRunArgs([]string{"blue-green", "revert", "--force", "--yes"}, "/s/blue-green.sh", env())
	if err != nil || !r.force || !r.yes {
		t.Fatalf("revert --force --yes: %+v, %v", r, err)
	}
}
