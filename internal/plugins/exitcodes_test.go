package plugins_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/plugins"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// TestExitCodeTable drives each row of docs/exit-codes.md that a binary has
// through the binary's real entry point (kcli.Main with plugins.All()'s
// command) and checks the exit code and the message. The cases marked
// "regression" disagreed with the table before it was one table.
func TestExitCodeTable(t *testing.T) {
	testdata, err := filepath.Abs("../../testdata")
	if err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(testdata, "packages", "zarf-package-demo-amd64-1.0.0.tar.zst")
	tampered := filepath.Join(testdata, "packages", "tampered", "member-modified.tar.zst")
	key := filepath.Join(testdata, "keys", "cosign.pub")

	type setup func(t *testing.T, stateDir string)
	locked := func(t *testing.T, stateDir string) {
		d, err := state.Open(stateDir)
		if err != nil {
			t.Fatal(err)
		}
		l, err := d.Lock()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Unlock() })
	}
	withSlotA := func(t *testing.T, stateDir string) {
		d, err := state.Open(stateDir)
		if err != nil {
			t.Fatal(err)
		}
		if err := slot.Save(d, &slot.Record{Name: "a", Provider: slot.ProviderExisting, Context: "a", State: slot.StateReady}); err != nil {
			t.Fatal(err)
		}
	}
	// A state dir that is a file: the state does not allow any step.
	notADir := "<file>"
	tests := []struct {
		plugin string
		name   string
		setup  setup
		args   []string
		code   int
		msg    string // a regexp on stdout+stderr
	}{
		{"kubectl-bundle-verify", "verified", nil, []string{pkg, "--key", key}, 0, `(?m)^VERIFIED`},
		{"kubectl-bundle-verify", "tampered", nil, []string{tampered, "--key", key}, 1, `error: .* is NOT verified: `},
		{"kubectl-bundle-verify", "unknown flag", nil, []string{"--no-such-flag", pkg}, 2, `^error: .*no-such-flag`},
		{"kubectl-bundle-verify", "no material", nil, []string{pkg}, 2, `error: no verification material`},
		{"kubectl-bundle-verify", "key not PEM", nil, []string{pkg, "--key", pkg}, 2, `error: --key .* is not a PEM public key`},
		{"kubectl-bundle-verify", "regression: missing --key", nil, []string{pkg, "--key", "nosuch.pub"}, 2, `^error: reading --key: open nosuch.pub: no such file or directory\n$`},
		{"kubectl-bundle-verify", "regression: missing package", nil, []string{"nosuch.tar.zst", "--key", key}, 2, `^error: opening package: open nosuch.tar.zst: no such file or directory\n$`},
		{"kubectl-bundle-verify", "state dir unusable", nil, []string{"--stage", "--state-dir", notADir, pkg, "--key", key}, 3, `^error: `},
		{"kubectl-bundle-verify", "locked", locked, []string{"--stage", pkg, "--key", key}, 4, `error: state dir is locked by pid \d+`},

		{"kubectl-bundle-slot", "list", nil, []string{"list"}, 0, ``},
		{"kubectl-bundle-slot", "unverified package", withSlotA, []string{"deploy", "a", pkg}, 1, `error: package .* has not been verified and staged`},
		{"kubectl-bundle-slot", "unknown slot", nil, []string{"describe", "nosuch"}, 2, `error: slot "nosuch" does not exist`},
		{"kubectl-bundle-slot", "missing package", withSlotA, []string{"deploy", "a", "nosuch.tar.zst"}, 2, `^error: .*"nosuch.tar.zst" is neither a sha256 digest nor a readable file: open nosuch.tar.zst: no such file or directory\n$`},
		{"kubectl-bundle-slot", "state dir unusable", nil, []string{"--state-dir", notADir, "destroy", "a"}, 3, `^error: `},
		{"kubectl-bundle-slot", "locked", locked, []string{"destroy", "a"}, 4, `error: state dir is locked by pid \d+`},

		{"kubectl-bundle-gate", "print default", nil, []string{"--print-default"}, 0, `kind: Gate`},
		{"kubectl-bundle-gate", "bad gate file", nil, []string{"-f", pkg}, 2, `^error: gate file `},
		{"kubectl-bundle-gate", "regression: missing --kubeconfig", nil, []string{"--kubeconfig", "nothere.kubeconfig"}, 2, `^error: loading the kubeconfig: stat nothere.kubeconfig: no such file or directory`},
		{"kubectl-bundle-gate", "unreachable", nil, []string{"--kubeconfig", "<unreachable>", "--once"}, 3, `error: .*cluster at https://127.0.0.1:1 is unreachable`},

		{"kubectl-bundle-switch", "status", nil, []string{"status"}, 0, ``},
		{"kubectl-bundle-switch", "no gate", withSlotA, []string{"to", "a"}, 1, `error: .*gate`},
		{"kubectl-bundle-switch", "unknown slot", nil, []string{"to", "c"}, 2, `error: slot "c" does not exist`},
		{"kubectl-bundle-switch", "state dir unusable", nil, []string{"--state-dir", notADir, "to", "a"}, 3, `^error: `},
		{"kubectl-bundle-switch", "nothing to go back to", nil, []string{"back"}, 4, `^error: `},

		{"kubectl-bundle-journal", "status", nil, []string{"status"}, 0, `no transaction in progress`},
		{"kubectl-bundle-journal", "a step's check failed", begun, []string{"run", "VERIFIED", "--", "sh", "-c", "exit 1"}, 1, `error: VERIFIED failed: sh exited 1`},
		{"kubectl-bundle-journal", "a step's foreign code", begun, []string{"run", "VERIFIED", "--", "sh", "-c", "exit 7"}, 3, `error: VERIFIED failed: sh exited 7`},
		{"kubectl-bundle-journal", "bad step status", begun, []string{"step", "PROVISIONING", "maybe"}, 2, `^error: `},
		{"kubectl-bundle-journal", "missing package", nil, []string{"begin", "--strategy", "in-place", "--package", "nosuchfile"}, 2, `^error: --package: .*"nosuchfile" is neither a sha256 digest nor a readable file`},
		{"kubectl-bundle-journal", "damaged journal", damaged, []string{"status"}, 3, `error: .*transaction.json is unreadable`},
		{"kubectl-bundle-journal", "no transaction", nil, []string{"run", "VERIFIED", "--", "true"}, 4, `error: no transaction in progress`},
	}
	all := map[string]plugins.Plugin{}
	for _, p := range plugins.All() {
		all[p.Name] = p
	}
	seen := map[string]map[int]bool{}
	for _, tc := range tests {
		t.Run(strings.TrimPrefix(tc.plugin, "kubectl-bundle-")+"/"+tc.name, func(t *testing.T) {
			work := t.TempDir()
			stateDir := filepath.Join(work, "state")
			t.Setenv("KUBECTL_BUNDLE_STATE_DIR", stateDir)
			t.Setenv("KUBECONFIG", filepath.Join(work, "no-kubeconfig"))
			t.Chdir(work)
			if tc.setup != nil {
				tc.setup(t, stateDir)
			}
			args := append([]string{tc.plugin}, tc.args...)
			for i, a := range args {
				switch a {
				case notADir:
					args[i] = filepath.Join(work, "file")
					if err := os.WriteFile(args[i], []byte("not a dir\n"), 0o644); err != nil {
						t.Fatal(err)
					}
				case "<unreachable>":
					args[i] = filepath.Join(work, "unreachable.kubeconfig")
					if err := os.WriteFile(args[i], []byte(unreachableKubeconfig), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			p, ok := all[tc.plugin]
			if !ok {
				t.Fatalf("no plugin %s", tc.plugin)
			}
			var out, errOut bytes.Buffer
			code := kcli.Main(context.Background(), kcli.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, args, p.Build)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out.String(), errOut.String())
			}
			msg := errOut.String()
			if code == 0 || tc.name == "verified" {
				msg = out.String()
			}
			if !regexp.MustCompile(tc.msg).MatchString(msg) {
				t.Errorf("output %q does not match %q", msg, tc.msg)
			}
			if seen[tc.plugin] == nil {
				seen[tc.plugin] = map[int]bool{}
			}
			seen[tc.plugin][code] = true
		})
	}
	for _, p := range plugins.All() {
		for code := 0; code <= 4; code++ {
			if p.Name == "kubectl-bundle-gate" && (code == 1 || code == 4) {
				// A failed check, and a slot changed under the gate, need a
				// cluster: e2e/testdata/script/gate_site.txtar.
				continue
			}
			if !seen[p.Name][code] {
				t.Errorf("%s: no case exits %d", p.Name, code)
			}
		}
	}
}

// begun opens a transaction, as the strategy scripts do (blue-green, next
// to an active slot a).
func begun(t *testing.T, stateDir string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(stateDir, "slots"), 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(stateDir, "slots", "a.json"), []byte(`{"apiVersion":"kubectl-bundle.dev/v1alpha1","kind":"Slot","name":"a","provider":"existing","context":"a","state":"ready"}`+"\n"), 0o600)
	os.WriteFile(filepath.Join(stateDir, "active"), []byte("a\n"), 0o600)
	var out, errOut bytes.Buffer
	p := plugins.All()[4]
	args := []string{p.Name, "begin", "--strategy", "blue-green", "--package", strings.Repeat("0", 64), "--active", "a", "--candidate", "b", "-q"}
	if code := kcli.Main(context.Background(), kcli.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, args, p.Build); code != 0 {
		t.Fatalf("begin exited %d: %s", code, errOut.String())
	}
}

// damaged leaves the journal's transaction.json not JSON (the evidence
// directory's copy under transactions/ is not the one status reads).
func damaged(t *testing.T, stateDir string) {
	t.Helper()
	begun(t, stateDir)
	found := filepath.Join(stateDir, "journal", "transaction.json")
	if _, err := os.Stat(found); err != nil {
		t.Fatalf("no journal transaction after begin: %v", err)
	}
	if err := os.WriteFile(found, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
}

const unreachableKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: unreachable
  cluster:
    server: https://127.0.0.1:1
contexts:
- name: unreachable
  context:
    cluster: unreachable
    user: nobody
current-context: unreachable
users:
- name: nobody
  user:
    token: x
`
