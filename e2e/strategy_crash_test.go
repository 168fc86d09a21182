package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-bundle/kubectl-bundle/internal/testenv"
)

// U4 of the seed for every strategy: the script is killed (SIGKILL to its
// process group) after each of its plugin calls in turn, then re-run; it
// must always converge on the same end, and blue/green must not have
// touched the active slot before its switch.

const (
	pkgV1 = "testdata/packages/zarf-package-demo-amd64-1.0.0.tar.zst"
	pkgV2 = "testdata/packages/v1beta1/zarf-package-demo-beta-amd64-1.0.0.tar.zst"
)

// newStrategySite: kind slot a (backed by a real API server) with v1,
// active and gated; a second server waits for slot b.
func newStrategySite(t *testing.T) *switchSite {
	t.Helper()
	if _, err := exec.LookPath("kubectl-bundle-slot"); err != nil {
		t.Fatalf("the binaries testscript.Main registers are not on PATH: %v", err)
	}
	root := t.TempDir()
	for _, d := range []string{"fakes/ports", "archives", "home"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"archives/zarf-init-amd64-v0.84.0.tar.zst": "fake",
		"gate-fails.yaml":                          "apiVersion: kubectl-bundle.dev/v1alpha1\nkind: Gate\nmetadata: {name: fails}\nspec:\n  checks:\n  - name: absent\n    resource: {apiVersion: v1, kind: ConfigMap, namespace: default, name: absent}\n",
		"gate.yaml":                                "apiVersion: kubectl-bundle.dev/v1alpha1\nkind: Gate\nmetadata: {name: marker}\nspec:\n  checks:\n  - name: healthy\n    resource: {apiVersion: v1, kind: ConfigMap, namespace: default, name: healthy}\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"airgap-mgmt-a", "airgap-mgmt-b"} {
		cfg := testenv.Start(t)
		kc, err := testenv.Kubeconfig(cfg, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name+".kubeconfig"), kc, 0o600); err != nil {
			t.Fatal(err)
		}
		cs := kubernetes.NewForConfigOrDie(cfg)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "healthy", Namespace: "default"}}
		if _, err := cs.CoreV1().ConfigMaps("default").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s := &switchSite{t: t, root: root, env: append(os.Environ(),
		"KUBECTL_BUNDLE_STATE_DIR="+filepath.Join(root, "state"),
		"KUBECONFIG="+filepath.Join(root, "kubeconfig"),
		"KUBECTL_BUNDLE_ARCHIVES="+filepath.Join(root, "archives"),
		"FAKES="+filepath.Join(root, "fakes"),
		"ZARF_VERIFY_KEY="+repo("testdata/keys/cosign.pub"),
		"WORK="+root, "HOME="+filepath.Join(root, "home"), "NO_COLOR=1",
		"FAKE_FAIL=", "FAKE_KILL=", "KB_TEST_KILL_AFTER=",
		// The tests skip the offline check (on by default): this
		// machine's uplink is not a site's.
		"SKIP_OFFLINE_CHECK=1")}
	v1 := repo(pkgV1)
	s.must("kubectl-bundle-slot", "create", "a", "-q")
	s.must("kubectl-bundle-verify", "--stage", "-q", v1, "--key", repo("testdata/keys/cosign.pub"))
	s.must("kubectl-bundle-slot", "deploy", "a", v1, "-q")
	s.must("kubectl-bundle-gate", "--slot", "a", "--record", "-f", filepath.Join(root, "gate.yaml"), "--once", "-q")
	s.must("kubectl-bundle-switch", "to", "a", "-q")
	return s
}

// script runs a strategy script; with killAfter > 0 it is killed after
// that many plugin calls. It reports whether the kill happened.
func (s *switchSite) script(killAfter int, script string, args ...string) (out string, killed bool, code int) {
	s.t.Helper()
	cmd := exec.Command(repo("scripts", script), args...)
	cmd.Env = append(append([]string{}, s.env...), "KB_TEST_COUNTER="+filepath.Join(s.root, "kill-counter"))
	if killAfter > 0 {
		cmd.Env = append(cmd.Env, fmt.Sprintf("KB_TEST_KILL_AFTER=%d", killAfter))
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Dir = s.root
	b, err := cmd.CombinedOutput()
	s.lastCalls = 0
	if c, rerr := os.ReadFile(filepath.Join(s.root, "kill-counter")); rerr == nil {
		s.lastCalls, _ = strconv.Atoi(strings.TrimSpace(string(c)))
	}
	_ = os.Remove(filepath.Join(s.root, "kill-counter"))
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(b), false, 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return string(b), true, -1
		}
		return string(b), false, ee.ExitCode()
	}
	s.t.Fatalf("running %s: %v", script, err)
	return "", false, 0
}

func (s *switchSite) field(name string, args ...string) string {
	s.t.Helper()
	return strings.TrimSpace(s.must(name, args...))
}

func (s *switchSite) calls() string {
	b, _ := os.ReadFile(filepath.Join(s.root, "fakes", "calls"))
	return string(b)
}

// killEveryStep runs the script unkilled to count its plugin calls, then,
// for each N of them, killed after call N (each N a parallel subtest on its
// own copy of the site); after each kill, check(afterKill) and a re-run
// that must exit wantCode and pass final.
func killEveryStep(t *testing.T, base *switchSite, wantCode int, script string, args []string, afterKill, final func(s *switchSite, n int)) {
	t.Helper()
	ref := base.snapshotTo(t)
	out, killed, code := ref.script(1<<30, script, args...) // counts its calls, never killed
	if killed || code != wantCode {
		t.Fatalf("unkilled run exited %d (killed %v):\n%s", code, killed, out)
	}
	calls := ref.lastCalls
	if calls < 4 {
		t.Fatalf("only %d plugin calls: the kill hook does not reach the steps", calls)
	}
	if calls > 30 {
		t.Fatalf("%d plugin calls: no end to them", calls)
	}
	for n := 1; n <= calls; n++ {
		t.Run(fmt.Sprintf("kill after call %d", n), func(t *testing.T) {
			t.Parallel()
			s := base.snapshotTo(t)
			_ = os.Remove(filepath.Join(s.root, "fakes", "calls")) // only this run's calls count
			first, killed, code := s.script(n, script, args...)
			if !killed {
				t.Fatalf("not killed after call %d of %d (exit %d):\n%s", n, calls, code, first)
			}
			afterKill(s, n)
			out, killed, code := s.script(0, script, args...)
			if killed || code != wantCode {
				// The killed run's output too: a step that failed before
				// the kill (seen once under load) shows there.
				t.Fatalf("killed after call %d, the re-run exited %d:\n%s\n--- the killed run:\n%s", n, code, out, first)
			}
			final(s, n)
		})
	}
	t.Logf("%s: killed after each of %d plugin calls, in parallel subtests", script, calls)
}

func TestStrategiesConvergeAfterAKillAtEveryStep(t *testing.T) {
	t.Parallel()
	site := newStrategySite(t)
	v2 := repo(pkgV2)
	gate := filepath.Join(site.root, "gate.yaml")

	t.Run("blue-green", func(t *testing.T) {
		t.Parallel()
		killEveryStep(t, site, 0, "blue-green.sh", []string{"apply", v2, "--gate", gate},
			func(s *switchSite, n int) {
				// Before the switch, nothing may have touched slot a.
				calls := s.calls()
				if strings.Contains(calls, "context kind-airgap-mgmt-a]") || strings.Contains(calls, "--name airgap-mgmt-a") {
					s.t.Errorf("kill %d: a call against the active slot a:\n%s", n, calls)
				}
				if got := s.field("kubectl-bundle-slot", "describe", "a", "-o", "jsonpath={.package.name}"); got != "demo" {
					s.t.Errorf("kill %d: slot a holds %q", n, got)
				}
			},
			func(s *switchSite, n int) {
				if got := s.field("kubectl-bundle-switch", "status", "-o", "jsonpath={.active}/{.consistent}"); got != "b/true" {
					s.t.Errorf("kill %d then re-run: switch %s", n, got)
				}
				if got := s.field("kubectl-bundle-slot", "describe", "b", "-o", "jsonpath={.package.name}"); got != "demo-beta" {
					s.t.Errorf("kill %d then re-run: slot b holds %q", n, got)
				}
				if got := s.field("kubectl-bundle-journal", "status", "-o", "jsonpath={.transaction.phase}"); got != "SOAKING" {
					s.t.Errorf("kill %d then re-run: phase %q", n, got)
				}
				if strings.Count(s.calls(), "kind create cluster --name airgap-mgmt-b") > 2 {
					s.t.Errorf("kill %d: slot b created more than twice", n)
				}
			})
	})
	t.Run("in-place", func(t *testing.T) {
		t.Parallel()
		killEveryStep(t, site, 0, "in-place.sh", []string{v2, "--gate", gate}, func(*switchSite, int) {},
			func(s *switchSite, n int) {
				if got := s.field("kubectl-bundle-slot", "describe", "a", "-o", "jsonpath={.package.name}"); got != "demo-beta" {
					s.t.Errorf("kill %d then re-run: slot a holds %q", n, got)
				}
				if got := s.field("kubectl-bundle-journal", "status", "-o", "jsonpath={.transaction.id}"); got != "" {
					s.t.Errorf("kill %d then re-run: transaction %s still open", n, got)
				}
			})
	})
	t.Run("recreate", func(t *testing.T) {
		t.Parallel()
		killEveryStep(t, site, 0, "recreate.sh", []string{v2, "--gate", gate}, func(*switchSite, int) {},
			func(s *switchSite, n int) {
				if got := s.field("kubectl-bundle-slot", "describe", "a", "-o", "jsonpath={.package.name}/{.state}"); got != "demo-beta/ready" {
					s.t.Errorf("kill %d then re-run: slot a is %q", n, got)
				}
				if got := s.field("kubectl-bundle-journal", "log", "-o", "jsonpath={[*].phase}"); !strings.Contains(got, "COMMITTED") {
					s.t.Errorf("kill %d then re-run: no COMMITTED in %s", n, got)
				}
			})
	})
}

// TestRollbacksConvergeAfterAKillAtEveryStep: the same for the failure
// paths (U3 with U4): the update's gate fails, and the script is killed
// after each call of the update and of its rollback.
func TestRollbacksConvergeAfterAKillAtEveryStep(t *testing.T) {
	t.Parallel()
	site := newStrategySite(t)
	v2 := repo(pkgV2)
	gate := filepath.Join(site.root, "gate-fails.yaml")
	holds := func(s *switchSite, n int, slot, want string) {
		if got := s.field("kubectl-bundle-slot", "describe", slot, "-o", "jsonpath={.package.name}/{.state}"); got != want {
			s.t.Errorf("kill %d then re-run: slot %s is %q, want %q", n, slot, got, want)
		}
		if got := s.field("kubectl-bundle-journal", "status", "-o", "jsonpath={.transaction.id}"); got != "" {
			s.t.Errorf("kill %d then re-run: transaction %s still open", n, got)
		}
	}
	// The same gate fails on the active slot a: the rollback destroys b
	// and closes the transaction, but never says the previous deployment
	// is in place (exit 3, BROKEN).
	t.Run("blue-green", func(t *testing.T) {
		t.Parallel()
		killEveryStep(t, site, 3, "blue-green.sh", []string{"apply", v2, "--gate", gate, "--gate-timeout", "300ms"},
			func(s *switchSite, n int) {
				if calls := s.calls(); strings.Contains(calls, "context kind-airgap-mgmt-a]") || strings.Contains(calls, "--name airgap-mgmt-a") {
					s.t.Errorf("kill %d: a call against the active slot a:\n%s", n, calls)
				}
			},
			func(s *switchSite, n int) {
				holds(s, n, "a", "demo/ready")
				if got := s.field("kubectl-bundle-slot", "list", "-o", "jsonpath={[*].name}"); got != "a" {
					s.t.Errorf("kill %d then re-run: slots %q, want only a", n, got)
				}
			})
	})
	// The same gate fails on the restored slot: the run exits 3 with the
	// transaction open in the recovery phase and never records RESTORED;
	// re-run with a gate that passes, it closes as RESTORED (exit 1).
	restoredOnceGated := func(script string, recovery string) func(s *switchSite, n int) {
		return func(s *switchSite, n int) {
			if got := s.field("kubectl-bundle-journal", "status", "-o", "jsonpath={.transaction.phase}/{.transaction.status}"); got != recovery+"/done" {
				s.t.Errorf("kill %d then re-run: transaction in %q, want %s/done", n, got, recovery)
			}
			if got := s.field("kubectl-bundle-journal", "log", "-o", "jsonpath={[*].phase}"); strings.Contains(got, "RESTORED") {
				s.t.Errorf("kill %d then re-run: RESTORED recorded though the restored slot fails its gate: %s", n, got)
			}
			out, killed, code := s.script(0, script, v2, "--gate", filepath.Join(s.root, "gate.yaml"), "--gate-timeout", "300ms")
			if killed || code != 1 || !strings.Contains(out, "RESULT: FAIL (the previous deployment is in place)") {
				s.t.Fatalf("kill %d, then re-run with a passing gate: exit %d:\n%s", n, code, out)
			}
			holds(s, n, "a", "demo/ready")
		}
	}
	t.Run("in-place", func(t *testing.T) {
		t.Parallel()
		killEveryStep(t, site, 3, "in-place.sh", []string{v2, "--gate", gate, "--gate-timeout", "300ms"}, func(*switchSite, int) {},
			restoredOnceGated("in-place.sh", "RESTORING"))
	})
	t.Run("recreate", func(t *testing.T) {
		t.Parallel()
		killEveryStep(t, site, 3, "recreate.sh", []string{v2, "--gate", gate, "--gate-timeout", "300ms"}, func(*switchSite, int) {},
			restoredOnceGated("recreate.sh", "BUILDING_FALLBACK"))
	})
}
