package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/fakes"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// switchSite is a state dir with slots a and b (kind provider, fake kind
// and docker), both with a recent passing gate, a active.
type switchSite struct {
	t    *testing.T
	root string
	env  []string
	// lastCalls is how many plugin calls the last script run made (counted
	// when it ran with a kill hook).
	lastCalls int
}

func newSwitchSite(t *testing.T) *switchSite {
	t.Helper()
	if _, err := exec.LookPath("kubectl-bundle-switch"); err != nil {
		t.Fatalf("the binaries testscript.Main registers are not on PATH: %v", err)
	}
	root := t.TempDir()
	for _, d := range []string{"fakes/ports", "archives", "home"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "archives", "zarf-init-amd64-v0.84.0.tar.zst"), []byte("fake"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &switchSite{t: t, root: root, env: append(os.Environ(),
		"KUBECTL_BUNDLE_STATE_DIR="+filepath.Join(root, "state"),
		"KUBECONFIG="+filepath.Join(root, "kubeconfig"),
		"KUBECTL_BUNDLE_ARCHIVES="+filepath.Join(root, "archives"),
		"FAKES="+filepath.Join(root, "fakes"),
		"WORK="+root, "HOME="+filepath.Join(root, "home"), "NO_COLOR=1",
		"FAKE_FAIL=", "FAKE_KILL=", state.EnvCrashAt+"=",
		// The tests skip the offline check (on by default): this
		// machine's uplink is not a site's.
		"SKIP_OFFLINE_CHECK=1")}
	for _, sl := range []string{"a", "b"} {
		s.must("kubectl-bundle-slot", "create", sl, "-q")
	}
	d, err := state.Open(filepath.Join(root, "state"))
	if err != nil {
		t.Fatal(err)
	}
	for _, sl := range []string{"a", "b"} {
		rec, err := slot.Load(d, sl)
		if err != nil {
			t.Fatal(err)
		}
		rec.Gate = &slot.GateResult{Gate: "default", Passed: true, Time: time.Now().UTC()}
		if err := slot.Save(d, rec); err != nil {
			t.Fatal(err)
		}
	}
	s.must("kubectl-bundle-switch", "to", "a", "-q")
	return s
}

func (s *switchSite) run(env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(append([]string{}, s.env...), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (s *switchSite) must(name string, args ...string) string {
	s.t.Helper()
	out, err := s.run(nil, name, args...)
	if err != nil {
		s.t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return out
}

// snapshot copies the whole site (state, kubeconfig, fake docker) so each
// crash starts from the same point.
func (s *switchSite) snapshot(dst string) *switchSite {
	s.t.Helper()
	return s.snapshotFor(s.t, dst)
}

// snapshotTo copies the site into a directory of t's and reports to t: a
// parallel subtest runs on its own copy (the API servers behind the site
// are only read by the steps).
func (s *switchSite) snapshotTo(t *testing.T) *switchSite {
	t.Helper()
	return s.snapshotFor(t, t.TempDir())
}

func (s *switchSite) snapshotFor(t *testing.T, dst string) *switchSite {
	t.Helper()
	if out, err := exec.Command("cp", "-a", s.root+"/.", dst).CombinedOutput(); err != nil {
		t.Fatalf("copying the site: %v %s", err, out)
	}
	env := make([]string, len(s.env))
	for i, e := range s.env {
		env[i] = strings.ReplaceAll(e, s.root, dst)
	}
	return &switchSite{t: t, root: dst, env: env}
}

type switchStatus struct {
	Active          string `json:"active"`
	Phase           string `json:"phase"`
	KubeconfigAlias string `json:"kubeconfigAlias"`
	RegistryHolder  string `json:"registryAliasSlot"`
	Consistent      bool   `json:"consistent"`
	Next            string `json:"next"`
}

func (s *switchSite) status() switchStatus {
	s.t.Helper()
	out := s.must("kubectl-bundle-switch", "status", "-o", "json")
	var st switchStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		s.t.Fatalf("status: %v\n%s", err, out)
	}
	return st
}

// registriesOnNetwork checks that both registries are on the kind network
// (an old slot's registry must never be left off it) and returns which
// holds the alias.
func (s *switchSite) registriesOnNetwork() string {
	s.t.Helper()
	m := &fakes.Machine{Dir: filepath.Join(s.root, "fakes")}
	st, err := m.State()
	if err != nil {
		s.t.Fatal(err)
	}
	holder := ""
	for _, sl := range []string{"a", "b"} {
		c := st.Containers["krops-registry-airgap-"+sl]
		if c == nil || c.Network != "kind" {
			s.t.Errorf("registry of slot %s is not on the kind network: %+v", sl, c)
			continue
		}
		for _, a := range c.Aliases {
			if a == "krops-registry" {
				if holder != "" {
					s.t.Errorf("both registries carry the alias")
				}
				holder = sl
			}
		}
	}
	return holder
}

// crashEveryPoint kills `kubectl-bundle-switch args...` at its N-th crash
// point for every N, then checks that status explains the state and that
// re-running the command converges on want.
func crashEveryPoint(t *testing.T, base *switchSite, want string, args ...string) {
	points := 0
	for n := 1; ; n++ {
		s := base.snapshot(t.TempDir())
		out, err := s.run([]string{fmt.Sprintf("%s=#%d", state.EnvCrashAt, n)}, "kubectl-bundle-switch", args...)
		if err == nil {
			points = n - 1
			t.Logf("%v: %d crash points, each converged", args, points)
			break
		}
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != -1 {
			t.Fatalf("crash #%d: want SIGKILL, got %v\n%s", n, err, out)
		}
		st := s.status()
		if !st.Consistent && st.Next == "" {
			t.Errorf("crash #%d: status is inconsistent and names no next command: %+v", n, st)
		}
		s.must("kubectl-bundle-switch", args...)
		st = s.status()
		if st.Active != want || st.KubeconfigAlias != want || st.RegistryHolder != want || !st.Consistent {
			t.Errorf("crash #%d then re-run: %+v, want everything on %s", n, st, want)
		}
		if h := s.registriesOnNetwork(); h != want {
			t.Errorf("crash #%d then re-run: the fake docker has the alias on %q", n, h)
		}
		if n > 50 {
			t.Fatal("no end to the crash points")
		}
	}
	if points < 6 {
		t.Errorf("only %d crash points: the test does not reach the writes", points)
	}
}

// TestSwitchCrashAtEveryWrite kills `to` and `back --force` (the fakes
// have no cluster for back's gate of the slot it returns to) at each of their
// writes in turn; a re-run always converges, and the alias never stays on
// a slot the active pointer does not name.
func TestSwitchCrashAtEveryWrite(t *testing.T) {
	t.Parallel()
	site := newSwitchSite(t)
	crashEveryPoint(t, site, "b", "to", "b")

	switched := site.snapshot(t.TempDir())
	switched.must("kubectl-bundle-switch", "to", "b", "-q")
	crashEveryPoint(t, switched, "a", "back", "--force") // no cluster to gate a against: forced
}

// TestSwitchKilledInsideTheAliasMove: `to` and `back` killed inside each
// docker network call (FAKE_KILL=docker-network@N: after the kubeconfig
// alias moved, with a registry disconnected or connected without its
// alias); switch status says so and names a command, and that command,
// run as printed, puts everything on the target.
func TestSwitchKilledInsideTheAliasMove(t *testing.T) {
	t.Parallel()
	site := newSwitchSite(t)
	switched := site.snapshot(t.TempDir())
	switched.must("kubectl-bundle-switch", "to", "b", "-q")
	for _, c := range []struct {
		base *switchSite
		args []string
		want string
	}{{site, []string{"to", "b"}, "b"}, {switched, []string{"back", "--force"}, "a"}} {
		points := 0
		for n := 1; ; n++ {
			s := c.base.snapshot(t.TempDir())
			cmd := exec.Command("kubectl-bundle-switch", c.args...)
			cmd.Env = append(append([]string{}, s.env...), fmt.Sprintf("FAKE_KILL=docker-network@%d", n))
			cmd.SysProcAttr = newProcessGroup()
			out, err := cmd.CombinedOutput()
			if killed, _ := exitOf(t, err); !killed {
				if err != nil {
					t.Fatalf("%v, kill %d: %v\n%s", c.args, n, err, out)
				}
				break
			}
			points++
			st := s.status()
			if st.KubeconfigAlias != c.want {
				t.Errorf("%v killed inside network call %d: the kubeconfig alias is on %q; it moves before the registry alias", c.args, n, st.KubeconfigAlias)
			}
			if st.Consistent || st.Next == "" {
				t.Errorf("%v killed inside network call %d: status %+v, want inconsistent with a next command", c.args, n, st)
			}
			// kubectl runs kubectl-bundle-switch for "kubectl bundle-switch".
			next := strings.Replace(st.Next, "kubectl bundle-switch", "kubectl-bundle-switch", 1)
			if out, err := s.run(nil, "bash", "-c", next); err != nil {
				t.Fatalf("%v killed inside network call %d, then %q: %v\n%s", c.args, n, next, err, out)
			}
			st = s.status()
			if st.Active != c.want || st.KubeconfigAlias != c.want || st.RegistryHolder != c.want || !st.Consistent {
				t.Errorf("%v killed inside network call %d, then %q: %+v, want everything on %s", c.args, n, next, st, c.want)
			}
			if h := s.registriesOnNetwork(); h != c.want {
				t.Errorf("%v killed inside network call %d, then %q: the alias is on %q", c.args, n, next, h)
			}
			if n > 10 {
				t.Fatal("no end to the network calls")
			}
		}
		t.Logf("%v: killed inside each of %d docker network calls; the printed command repaired each", c.args, points)
		if points < 2 {
			t.Errorf("%v: only %d network calls killed: the alias move is not reached", c.args, points)
		}
	}
}
