package e2e_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubectl-bundle/kubectl-bundle/internal/fakes"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
)

// U4 inside a step: the fakes kill the script's whole process group in
// the middle of a step (FAKE_KILL=STEP@N: a half-made container, a partial
// deploy, a node with no context, a context with no node, a registry off
// its network), for every call of a fake that changes the machine in an
// unkilled run. The command `journal status` prints is then run as
// printed, and must reach the same end as the unkilled run.

// mutatingSteps are the fakes' steps that change the machine; a kill inside
// a read-only one (docker ps, inspect, info) is a kill between two calls,
// which killEveryStep covers.
var mutatingSteps = map[string]bool{
	"docker-load": true, "docker-run": true, "docker-rm": true, "docker-network": true,
	"zarf-init": true, "zarf-deploy": true, "kind-create": true, "kind-delete": true,
}

// fakeStep is the FAKE_KILL step name of a line of $FAKES/calls.
func fakeStep(call string) string {
	f := strings.Fields(call)
	switch {
	case len(f) < 2:
		return ""
	case f[0] == "docker":
		return "docker-" + f[1]
	case f[0] == "zarf" && f[1] == "init":
		return "zarf-init"
	case f[0] == "zarf" && len(f) > 2 && f[2] == "deploy":
		return "zarf-deploy"
	case f[0] == "kind":
		return "kind-" + f[1]
	}
	return ""
}

// idempotent calls may be repeated at will: removing what may be gone
// (docker rm -f, kind delete of a missing cluster, a disconnect whose
// failure is ignored) changes nothing the second time.
func idempotent(call string) bool {
	return strings.HasPrefix(call, "docker rm -f ") || strings.HasPrefix(call, "kind delete cluster ") ||
		strings.HasPrefix(call, "docker network disconnect ")
}

// killPoint is the n-th call of a mutating step in an unkilled run.
// cached is fn's answer, computed once per site and key (a base site does
// not change while copies of it are killed).
func (s *switchSite) cached(key string, fn func() string) string {
	p := filepath.Join(s.root, ".cache-"+strings.ReplaceAll(key, " ", "-"))
	if b, err := os.ReadFile(p); err == nil {
		return string(b)
	}
	v := fn()
	if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
		s.t.Fatal(err)
	}
	return v
}

type killPoint struct {
	step  string
	n     int
	index int // in the unkilled run's calls
	call  string
}

func (k killPoint) spec() string { return fmt.Sprintf("%s@%d", k.step, k.n) }

func killPoints(calls []string) []killPoint {
	var out []killPoint
	seen := map[string]int{}
	for i, c := range calls {
		if s := fakeStep(c); mutatingSteps[s] {
			seen[s]++
			out = append(out, killPoint{s, seen[s], i, c})
		}
	}
	return out
}

func lines(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	return strings.Split(strings.TrimRight(s, "\n"), "\n")
}

// runScript runs a strategy script (or, with script "", the shell command
// in args[0] from the repository root) in a process group of its own with
// extra env; killed is true when it died of SIGKILL.
func (s *switchSite) runScript(env []string, script string, args ...string) (out string, killed bool, code int) {
	s.t.Helper()
	var cmd *exec.Cmd
	if script == "" {
		cmd = exec.Command("bash", "-c", args[0])
		cmd.Dir = repo()
	} else {
		cmd = exec.Command(repo("scripts", script), args...)
		cmd.Dir = s.root
	}
	cmd.Env = append(append([]string{}, s.env...), env...)
	cmd.SysProcAttr = newProcessGroup()
	b, err := cmd.CombinedOutput()
	killed, code = exitOf(s.t, err)
	return string(b), killed, code
}

// end is what a run leaves, for comparing a killed and re-run site with an
// unkilled one: the exit code, the open transaction (or the final phase
// of the last closed one), every slot, the switch, the fake machine's
// containers and the kube contexts.
func (s *switchSite) end(code int) string {
	s.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "exit %d\n", code)
	txn := s.field("kubectl-bundle-journal", "status", "-o", "jsonpath={.transaction.phase}/{.transaction.status}")
	if txn == "/" {
		var events []struct {
			Phase  journal.Phase `json:"phase"`
			Status string        `json:"status"`
		}
		if err := json.Unmarshal([]byte(s.must("kubectl-bundle-journal", "log", "-o", "json")), &events); err != nil {
			s.t.Fatal(err)
		}
		txn = "closed"
		for _, e := range events {
			if journal.IsFinal(e.Phase) && e.Status == journal.StatusDone {
				txn = "closed in " + string(e.Phase)
			}
		}
	}
	fmt.Fprintf(&b, "transaction %s\n", txn)
	var slots []struct {
		Name    string `json:"name"`
		State   string `json:"state"`
		Active  bool   `json:"active"`
		Package *struct {
			Name string `json:"name"`
		} `json:"package"`
	}
	if err := json.Unmarshal([]byte(s.must("kubectl-bundle-slot", "list", "-o", "json")), &slots); err != nil {
		s.t.Fatal(err)
	}
	for _, sl := range slots {
		pkg := "-"
		if sl.Package != nil {
			pkg = sl.Package.Name
		}
		fmt.Fprintf(&b, "slot %s %s %s active=%v\n", sl.Name, sl.State, pkg, sl.Active)
	}
	st := s.status()
	fmt.Fprintf(&b, "switch active=%s alias=%s registry=%s consistent=%v\n", st.Active, st.KubeconfigAlias, st.RegistryHolder, st.Consistent)
	m := &fakes.Machine{Dir: filepath.Join(s.root, "fakes")}
	ms, err := m.State()
	if err != nil {
		s.t.Fatal(err)
	}
	names := make([]string, 0, len(ms.Containers))
	for n := range ms.Containers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := ms.Containers[n]
		fmt.Fprintf(&b, "container %s %q net=%s aliases=%v\n", n, c.Status, c.Network, c.Aliases)
	}
	fmt.Fprintf(&b, "contexts %s\n", s.contexts())
	return b.String()
}

func (s *switchSite) contexts() string {
	kc, err := clientcmd.LoadFromFile(filepath.Join(s.root, "kubeconfig"))
	if err != nil {
		s.t.Fatalf("reading the kubeconfig: %v", err)
	}
	var c []string
	for n := range kc.Contexts {
		c = append(c, n)
	}
	sort.Strings(c)
	return strings.Join(c, ",")
}

func newProcessGroup() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// exitOf reads how a command ended: killed by SIGKILL, or its exit code.
func exitOf(t *testing.T, err error) (killed bool, code int) {
	t.Helper()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return false, 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true, -1
		}
		return false, ee.ExitCode()
	}
	t.Fatalf("running: %v", err)
	return false, 0
}

// slotUntouched: everything of slot sl is as in base: its record, its
// node container and registry (running, on the network, with its alias
// if it had it), its kube context.
func slotUntouched(t *testing.T, base, s *switchSite, sl string) string {
	t.Helper()
	var diffs []string
	for _, part := range []struct{ name, what string }{
		{"record", "jsonpath={.package.digest}/{.state}/{.cluster}/{.registry}"},
	} {
		if a, b := base.field("kubectl-bundle-slot", "describe", sl, "-o", part.what), s.field("kubectl-bundle-slot", "describe", sl, "-o", part.what); a != b {
			diffs = append(diffs, fmt.Sprintf("%s: %q, was %q", part.name, b, a))
		}
	}
	mine := func(x *switchSite) string {
		var out []string
		for _, l := range strings.Split(x.end(0), "\n") {
			if strings.HasPrefix(l, "container ") && strings.Contains(l, "-"+sl+" ") || strings.Contains(l, "airgap-mgmt-"+sl+"-control-plane") {
				out = append(out, l)
			}
		}
		return strings.Join(out, "\n")
	}
	if a, b := base.cached("slot "+sl, func() string { return mine(base) }), mine(s); a != b {
		diffs = append(diffs, fmt.Sprintf("containers:\n%s\nwere:\n%s", b, a))
	}
	if !strings.Contains(s.contexts(), "kind-airgap-mgmt-"+sl) {
		diffs = append(diffs, "its kube context is gone")
	}
	return strings.Join(diffs, "; ")
}

// killInsideEverySteps runs the command once unkilled on a copy of base,
// then, for every call of a mutating fake step in that run, on a fresh copy:
// killed inside that call, then the next command `journal status` prints
// run as printed (with the run's --gate options, which the transaction does
// not keep), which must reach the same end. afterKill checks the site as
// the kill left it. It returns the number of kill points.
func killInsideEveryStep(t *testing.T, base *switchSite, gateArgs []string, script string, args []string, afterKill func(s *switchSite, k killPoint, before []string)) int {
	t.Helper()
	ref := base.snapshotTo(t)
	_ = os.Remove(filepath.Join(ref.root, "fakes", "calls"))
	out, killed, code := ref.runScript(nil, script, args...)
	if killed {
		t.Fatalf("unkilled run killed:\n%s", out)
	}
	want := ref.end(code)
	refCalls := lines(ref.calls())
	points := killPoints(refCalls)
	if len(points) == 0 {
		t.Fatalf("the unkilled run made no mutating call:\n%s", ref.calls())
	}
	// Each kill point is a parallel subtest on its own copy of the site.
	for _, k := range points {
		t.Run(k.spec(), func(t *testing.T) {
			t.Parallel()
			killInside(t, base, ref, want, refCalls, gateArgs, script, args, k, afterKill)
		})
	}
	return len(points)
}

// killInside kills the script inside the step k names, checks afterKill,
// runs journal status's next command and compares the end with the
// unkilled run's (ref, want, refCalls).
func killInside(t *testing.T, base, ref *switchSite, want string, refCalls []string, gateArgs []string, script string, args []string, k killPoint, afterKill func(s *switchSite, k killPoint, before []string)) {
	s := base.snapshotTo(t)
	_ = os.Remove(filepath.Join(s.root, "fakes", "calls"))
	out, killed, _ := s.runScript([]string{"FAKE_KILL=" + k.spec()}, script, args...)
	if !killed {
		t.Errorf("%s (%s): not killed:\n%s", k.spec(), k.call, out)
		return
	}
	calls := lines(s.calls())
	if last := calls[len(calls)-1]; last != "FAKE_KILL "+k.step {
		t.Errorf("%s: the last call is %q, not the kill inside %s", k.spec(), last, k.step)
	}
	afterKill(s, k, calls[:len(calls)-1])
	next := s.field("kubectl-bundle-journal", "status", "-o", "jsonpath={.next.command}")
	if next == "" {
		// No transaction open: the script itself, as it was run.
		next = strings.Join(append([]string{repo("scripts", script)}, args...), " ")
	} else if !strings.Contains(next, ".sh accept") && !strings.Contains(next, ".sh revert") {
		next += " " + strings.Join(gateArgs, " ")
	}
	out, killed, code := s.runScript(nil, "", next)
	if killed {
		t.Fatalf("%s: the re-run %q was killed:\n%s", k.spec(), next, out)
	}
	if got := s.end(code); got != want {
		t.Errorf("%s (inside %q), then %q:\n%s\nends:\n%s\nan unkilled run ends:\n%s", k.spec(), k.call, next, out, got, want)
	}
	// Nothing is done twice beyond redoing the interrupted step: each
	// call that is not idempotent appears at most once more than in the
	// unkilled run.
	refCount := map[string]int{}
	for _, c := range refCalls {
		refCount[strings.ReplaceAll(c, ref.root, "$SITE")]++
	}
	count := map[string]int{}
	for _, c := range lines(s.calls()) {
		if mutatingSteps[fakeStep(c)] && !idempotent(c) {
			count[strings.ReplaceAll(c, s.root, "$SITE")]++
		}
	}
	for c, n := range count {
		if n > refCount[c]+1 {
			t.Errorf("%s: %q ran %d times, %d in an unkilled run", k.spec(), c, n, refCount[c])
		}
	}
}

// TestStrategiesConvergeAfterAKillInsideAStep: every strategy script, its
// update and its rollbacks, killed inside every step that changes the
// machine (zarf deploy and init, kind create and delete, the registry's
// docker run and rm, the switch's network moves).
func TestStrategiesConvergeAfterAKillInsideAStep(t *testing.T) {
	t.Parallel()
	start := time.Now()
	site := newStrategySite(t)
	v2 := repo(pkgV2)
	// A passing gate ends at its first evaluation, so its timeout costs
	// nothing; 300ms was too short for one read of the API server on a
	// cold machine (a cold make test failed blue-green revert's
	// docker-network@1 on "context deadline exceeded").
	pass := []string{"--gate", filepath.Join(site.root, "gate.yaml"), "--gate-timeout", "10s"}
	fail := []string{"--gate", filepath.Join(site.root, "gate-fails.yaml"), "--gate-timeout", "300ms"}
	nothing := func(*switchSite, killPoint, []string) {}
	// Before its switch, blue-green changes nothing of the active slot a.
	aUntouched := func(s *switchSite, k killPoint, before []string) {
		for _, c := range before {
			if strings.Contains(c, "NetworkSettings.Networks") {
				return // the switch has begun: it moves a's aliases
			}
			if mutatingSteps[fakeStep(c)] && (strings.Contains(c, "airgap-mgmt-a") || strings.Contains(c, "airgap-a")) {
				s.t.Errorf("%s: a call against the active slot a before the switch: %q", k.spec(), c)
			}
		}
		if d := slotUntouched(s.t, site, s, "a"); d != "" {
			s.t.Errorf("%s: the active slot a changed before the switch: %s", k.spec(), d)
		}
	}
	// Every run below and every kill point in it is a parallel subtest.
	var mu sync.Mutex
	counts := map[string]int{}
	count := func(name string, n int) {
		mu.Lock()
		counts[name] = n
		mu.Unlock()
	}
	t.Cleanup(func() { t.Logf("kill points: %v (%s)", counts, time.Since(start).Round(time.Second)) })
	run := func(name, script string, gate []string, args []string, check func(*switchSite, killPoint, []string)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			n := killInsideEveryStep(t, site, gate, script, append(args, gate...), check)
			count(name, n)
			t.Logf("%s: killed inside each of %d mutating calls", name, n)
		})
	}
	run("blue-green apply", "blue-green.sh", pass, []string{"apply", v2}, aUntouched)
	run("blue-green rollback", "blue-green.sh", fail, []string{"apply", v2}, aUntouched)
	run("in-place", "in-place.sh", pass, []string{v2}, nothing)
	run("in-place restore", "in-place.sh", fail, []string{v2}, nothing)
	run("recreate", "recreate.sh", pass, []string{v2}, nothing)
	run("recreate rebuild", "recreate.sh", fail, []string{v2}, nothing)

	// U4's decision for in-place: killed inside the deploy once, the re-run
	// deploys the target again (the "in-place" row above ends COMMITTED);
	// killed inside it twice, the re-run restores the previous package.
	t.Run("in-place deploy interrupted twice", func(t *testing.T) {
		t.Parallel()
		s := site.snapshotTo(t)
		_ = os.Remove(filepath.Join(s.root, "fakes", "calls"))
		kill := []string{"FAKE_KILL=zarf-deploy"}
		if out, killed, _ := s.runScript(kill, "in-place.sh", append([]string{v2}, pass...)...); !killed {
			t.Fatalf("not killed inside the deploy:\n%s", out)
		}
		next := func(want string) string {
			t.Helper()
			why := s.field("kubectl-bundle-journal", "status", "-o", "jsonpath={.next.restore}|{.next.why}")
			if !strings.Contains(why, want) {
				t.Errorf("journal status: %q, want %q", why, want)
			}
			return s.field("kubectl-bundle-journal", "status", "-o", "jsonpath={.next.command}") + " " + strings.Join(pass, " ")
		}
		cmd := next("|DEPLOYING started but did not finish (the process was interrupted): re-running the orchestrator deploys the target again")
		if out, killed, _ := s.runScript(kill, "", cmd); !killed {
			t.Fatalf("the re-run %q was not killed inside the deploy:\n%s", cmd, out)
		}
		cmd = next("true|DEPLOYING was interrupted 2 times (the deploy itself may be what stops the process): re-running the orchestrator restores the previous package into slot a")
		out, killed, code := s.runScript(nil, "", cmd)
		if killed || code != 1 || !strings.Contains(out, "RESULT: FAIL (the previous deployment is in place)") {
			t.Fatalf("%q: exit %d:\n%s", cmd, code, out)
		}
		if got := s.field("kubectl-bundle-slot", "describe", "a", "-o", "jsonpath={.package.name}/{.state}"); got != "demo/ready" {
			t.Errorf("slot a is %q, want the previous package demo/ready", got)
		}
		if got := s.end(code); !strings.Contains(got, "transaction closed in RESTORED") {
			t.Errorf("end:\n%s", got)
		}
		var deploys []string
		for _, c := range lines(s.calls()) {
			if fakeStep(c) == "zarf-deploy" {
				deploys = append(deploys, filepath.Base(strings.Fields(c)[3]))
			}
		}
		if want := "zarf-package-demo-beta-amd64-1.0.0.tar.zst zarf-package-demo-beta-amd64-1.0.0.tar.zst zarf-package-demo-amd64-1.0.0.tar.zst"; strings.Join(deploys, " ") != want {
			t.Errorf("deploys %q, want the target twice (both killed), then the previous package once", deploys)
		}
	})

	soaking := site.snapshotTo(t)
	if out, killed, code := soaking.runScript(nil, "blue-green.sh", append([]string{"apply", v2}, pass...)...); killed || code != 0 {
		t.Fatalf("apply: %d\n%s", code, out)
	}
	for _, sub := range []string{"accept", "revert"} {
		t.Run("blue-green "+sub, func(t *testing.T) {
			t.Parallel()
			n := killInsideEveryStep(t, soaking, nil, "blue-green.sh", []string{sub}, nothing)
			count("blue-green "+sub, n)
			t.Logf("blue-green %s: killed inside each of %d mutating calls", sub, n)
		})
	}
}
