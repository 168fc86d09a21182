package fakes

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"

	"github.com/kubectl-bundle/kubectl-bundle/internal/runner"
)

// newMachine is a fake machine for the fakes' own tests; unlike Setup it
// does not fail the test on rejected calls, which these tests make on
// purpose.
func newMachine(t *testing.T) *Machine {
	t.Helper()
	m, err := NewMachine(filepath.Join(t.TempDir(), "fakes"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRejects: each kind of input a fake does not imitate exits non-zero
// with "fake PROG: unsupported ...", and is kept in rejected.
func TestRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		prog string
		args []string
		want string
	}{
		{"docker unknown subcommand", "docker", []string{"pull", "nginx"}, `fake docker: unsupported subcommand "pull"`},
		{"docker no subcommand", "docker", nil, "fake docker: unsupported docker without a subcommand"},
		{"docker unknown network subcommand", "docker", []string{"network", "create", "kind"}, `fake docker: unsupported subcommand "network create"`},
		{"docker unknown flag", "docker", []string{"run", "-d", "--memory=1g", "--name", "x", "img"}, "fake docker: unsupported flag --memory of docker run"},
		{"docker flag of another subcommand", "docker", []string{"ps", "--no-stream"}, "fake docker: unsupported flag --no-stream of docker ps"},
		{"docker value on a boolean flag", "docker", []string{"rm", "-f=true", "x"}, "fake docker: unsupported flag -f=true with a value"},
		{"docker unknown format", "docker", []string{"ps", "-a", "--format", "{{.ID}}"}, `fake docker: unsupported --format template "{{.ID}}" of docker ps`},
		{"docker format where none is imitated", "docker", []string{"info"}, `fake docker: unsupported --format template "" of docker info`},
		{"docker format of another subcommand", "docker", []string{"inspect", "--format", formatPS, "x"}, `fake docker: unsupported --format template "{{.Names}}\t{{.Ports}}" of docker inspect`},
		{"zarf unknown subcommand", "zarf", []string{"package", "create", "."}, `fake zarf: unsupported subcommand "package create"`},
		{"zarf unknown flag", "zarf", []string{"package", "deploy", "p.tar.zst", "--confirm", "--skip-signature-validation"}, "fake zarf: unsupported flag --skip-signature-validation of zarf package deploy"},
		{"unknown program", "kubectl", []string{"get", "pods"}, "fake kubectl: unsupported program kubectl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMachine(t)
			r := Runner{Env: []string{EnvDir + "=" + m.Dir, EnvFail + "="}}
			_, err := r.Run(context.Background(), tc.prog, tc.args...)
			var re *runner.RunError
			if !errors.As(err, &re) {
				t.Fatalf("want a *runner.RunError, got %v", err)
			}
			if got := strings.TrimSpace(string(re.Stderr)); got != tc.want {
				t.Errorf("stderr %q, want %q", got, tc.want)
			}
			if re.Err.Error() != "exit status 125" {
				t.Errorf("exit: %v, want status 125", re.Err)
			}
			rej := m.Rejected()
			if len(rej) != 1 || !strings.HasSuffix(rej[0], tc.want) {
				t.Errorf("rejected %q, want one line ending in %q", rej, tc.want)
			}
		})
	}
}

// TestDockerImitates: what the library does with docker works on the fake
// and changes its state; nothing is rejected.
func TestDockerImitates(t *testing.T) {
	m := Setup(t)
	r := Runner{}
	ctx := context.Background()
	run := func(args ...string) string {
		t.Helper()
		out, err := r.Run(ctx, "docker", args...)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	run("run", "-d", "--name", "reg", "--network", "kind", "-p", "127.0.0.1:5002:5000", "--label", "dev.kubectl-bundle.slot=a",
		"registry:2", "serve", "-x")
	if got := run("ps", "-a", "--format", formatPS); got != "reg\t127.0.0.1:5002->5000/tcp\n" {
		t.Errorf("ps: %q", got)
	}
	if got := run("image", "inspect", "--format", formatID, "registry:2"); got != FakeImageID("registry:2")+"\n" || !strings.HasPrefix(got, "sha256:") {
		t.Errorf("image inspect: %q", got)
	}
	// The image a container runs: its reference and the ID docker image
	// inspect gives for it.
	if got := run("inspect", "--format", formatImage, "reg"); got != "registry:2\t"+FakeImageID("registry:2")+"\n" {
		t.Errorf("inspect image: %q", got)
	}
	run("network", "disconnect", "kind", "reg")
	run("network", "connect", "--alias", "registry", "kind", "reg")
	// Reconnected, the container has another address (Docker's serial IPAM).
	if got := run("inspect", "--format", formatNetworks, "reg"); got != `{"kind":{"Aliases":["reg","registry"],"IPAddress":"172.18.9.206"}}`+"\n" {
		t.Errorf("inspect networks: %q", got)
	}
	if err := Probe(ctx, "http://127.0.0.1:5002/v2/"); err != nil {
		t.Errorf("probe of a published port: %v", err)
	}
	// The port is taken now.
	if _, err := r.Run(ctx, "docker", "run", "-d", "--name", "other", "-p", "127.0.0.1:5002:80", "nginx"); err == nil || !strings.Contains(err.Error(), "port is already allocated (held by reg)") {
		t.Errorf("second bind of 5002: %v", err)
	}
	st, err := m.State()
	if err != nil {
		t.Fatal(err)
	}
	c := st.Containers["reg"]
	if c == nil || c.Image != "registry:2" || c.Labels["dev.kubectl-bundle.slot"] != "a" {
		t.Errorf("container: %+v", c)
	}
	run("rm", "-f", "reg", "gone")
	if got := run("ps"); got != "" {
		t.Errorf("ps after rm: %q", got)
	}
	if err := Probe(ctx, "http://127.0.0.1:5002/v2/"); err == nil {
		t.Error("probe answers after the registry is gone")
	}
	// docker port answers what the test recorded for the container.
	if err := m.Port("wl-lb", "0.0.0.0:40001\n"); err != nil {
		t.Fatal(err)
	}
	if got := run("port", "wl-lb", "6443/tcp"); got != "0.0.0.0:40001\n" {
		t.Errorf("port: %q", got)
	}
	if _, err := r.Run(ctx, "docker", "port", "other-lb", "6443/tcp"); err == nil || !strings.Contains(err.Error(), "No such container: other-lb") {
		t.Errorf("port of an unknown container: %v", err)
	}
	calls := m.Calls()
	if len(calls) == 0 || calls[0] != "docker run -d --name reg --network kind -p 127.0.0.1:5002:5000 --label dev.kubectl-bundle.slot=a registry:2 serve -x" {
		t.Errorf("calls: %q", calls)
	}
}

// TestFailOnRequest: $FAKE_FAIL fails the named step, and only it.
func TestFailOnRequest(t *testing.T) {
	m := Setup(t)
	t.Setenv(EnvFail, "docker-info,zarf-deploy")
	r := Runner{}
	ctx := context.Background()
	if _, err := r.Run(ctx, "docker", "info", "--format", formatJSON); err == nil || !strings.Contains(err.Error(), "(FAKE_FAIL)") {
		t.Errorf("docker info: %v", err)
	}
	if _, err := r.Run(ctx, "docker", "ps"); err != nil {
		t.Errorf("docker ps: %v", err)
	}
	pkg := filepath.Join(t.TempDir(), "p.tar.zst")
	if err := os.WriteFile(pkg, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(ctx, "zarf", "init", pkg, "--confirm"); err != nil {
		t.Errorf("zarf init: %v", err)
	}
	if _, err := r.Run(ctx, "zarf", "package", "deploy", pkg, "--confirm"); err == nil || !strings.Contains(err.Error(), "(FAKE_FAIL)") {
		t.Errorf("zarf deploy: %v", err)
	}
	st, _ := m.State()
	if len(st.Inits) != 1 || len(st.Deploys) != 0 {
		t.Errorf("state: inits %v deploys %v", st.Inits, st.Deploys)
	}
}

// TestImplementedIsTheTable: the list names every imitated subcommand.
func TestImplementedIsTheTable(t *testing.T) {
	got := strings.Join(Implemented(), "\n")
	for name := range dockerCommands {
		if !strings.Contains(got, "docker "+name+" [") {
			t.Errorf("Implemented lacks docker %s", name)
		}
	}
	for name := range zarfCommands {
		if !strings.Contains(got, "zarf "+name+" [") {
			t.Errorf("Implemented lacks zarf %s", name)
		}
	}
	// Steps (what FAKE_FAIL and FAKE_KILL take) is exactly the imitated steps.
	want := map[string]bool{"zarf-init": true, "zarf-deploy": true, "kind-create": true, "kind-delete": true}
	for name := range dockerCommands {
		want["docker-"+strings.Fields(name)[0]] = true
	}
	for _, s := range Steps {
		if !want[s] {
			t.Errorf("Steps names %s, which no fake has", s)
		}
		delete(want, s)
	}
	if len(want) > 0 {
		t.Errorf("Steps lacks %v", want)
	}
	if !strings.Contains(got, `docker stats [--format= --no-stream] formats ["{{.Name}}\t{{.MemUsage}}"]`) {
		t.Errorf("stats line:\n%s", got)
	}
}

// envProgram makes the test binary one of the fakes (or a caller of the
// in-process kind), so the kill tests can run them as real processes.
const envProgram = "FAKES_TEST_PROGRAM"

func TestMain(m *testing.M) {
	switch os.Getenv(envProgram) {
	case "docker":
		Docker()
	case "zarf":
		Zarf()
	case "kind-create", "kind-delete":
		os.Exit(kindProgram(os.Getenv(envProgram), os.Args[1]))
	}
	os.Exit(m.Run())
}

// kindProgram is the in-process kind as a caller would run it: create or
// delete cluster name; its exit status, as kind's (1 on an error).
func kindProgram(what, name string) int {
	cfg := &v1alpha4.Cluster{Nodes: []v1alpha4.Node{{Role: v1alpha4.ControlPlaneRole, Image: "kindest/node:v1.31.0"}}}
	var err error
	if what == "kind-create" {
		err = Kind{}.Create(context.Background(), name, cfg, "")
	} else {
		err = Kind{}.Delete(context.Background(), name, "")
	}
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 1
	}
	return 0
}

// caller runs PROG ARGS... the way a strategy script runs a plugin: from a
// shell in a process group of its own that goes on after the call (and
// writes $FAKES/after). It reports whether the shell was SIGKILLed.
func caller(t *testing.T, m *Machine, kill, prog string, args ...string) (killed bool, out string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", `FAKES_TEST_PROGRAM="$0" "$@"; echo "exit $?" > "$FAKES/after"`, prog, self)
	cmd.Args = append(cmd.Args, args...)
	cmd.Env = append(os.Environ(), EnvDir+"="+m.Dir, EnvFail+"=", EnvKill+"="+kill,
		"KUBECONFIG="+filepath.Join(m.Dir, "kubeconfig"), "WORK="+m.Dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	b, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			killed = true
		}
	}
	_, afterErr := os.Stat(filepath.Join(m.Dir, "after"))
	if killed == (afterErr == nil) {
		t.Fatalf("killed %v but the shell went on: %v", killed, afterErr)
	}
	_ = os.Remove(filepath.Join(m.Dir, "after"))
	return killed, string(b)
}

// TestKillInsideAStep: FAKE_KILL=STEP does part of the step, then SIGKILLs
// the whole process group of its caller (the shell after the call never
// runs), and leaves "FAKE_KILL STEP" as the last call.
func TestKillInsideAStep(t *testing.T) {
	pkg := filepath.Join(t.TempDir(), "zarf-package-demo-amd64-1.0.0.tar.zst")
	if err := os.WriteFile(pkg, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	kubeContexts := func(m *Machine) string {
		kc, err := clientcmd.LoadFromFile(filepath.Join(m.Dir, "kubeconfig"))
		if err != nil {
			return ""
		}
		var names []string
		for n := range kc.Contexts {
			names = append(names, n)
		}
		return strings.Join(names, ",")
	}
	for _, tc := range []struct {
		step  string
		setup [][]string // calls made unkilled first: program, args...
		call  []string
		check func(t *testing.T, m *Machine, st *State)
	}{
		{"docker-run", nil, []string{"docker", "run", "-d", "--name", "reg", "--network", "kind", "-p", "127.0.0.1:5002:5000", "registry:2"},
			func(t *testing.T, m *Machine, st *State) {
				c := st.Containers["reg"]
				if c == nil || c.Status != StatusCreated || c.Image != "registry:2" {
					t.Fatalf("container: %+v, want created, not started", c)
				}
				if err := Probe(context.Background(), "http://127.0.0.1:5002/v2/"); err == nil {
					t.Error("a container never started answers on its port")
				}
				r := Runner{Env: []string{EnvDir + "=" + m.Dir}}
				if out, _ := r.Run(context.Background(), "docker", "ps"); len(out) != 0 {
					t.Errorf("docker ps shows a created container: %q", out)
				}
				if out, _ := r.Run(context.Background(), "docker", "ps", "-a"); string(out) != "reg\t\n" {
					t.Errorf("docker ps -a: %q", out)
				}
			}},
		{"docker-rm", [][]string{{"docker", "run", "-d", "--name", "x", "img"}, {"docker", "run", "-d", "--name", "y", "img"}},
			[]string{"docker", "rm", "-f", "x", "y"},
			func(t *testing.T, _ *Machine, st *State) {
				if st.Containers["x"] != nil || st.Containers["y"] == nil {
					t.Errorf("containers %v: want x removed, y left", sortedNames(st))
				}
			}},
		{"docker-network", [][]string{{"docker", "run", "-d", "--name", "reg", "--network", "kind", "img"}},
			[]string{"docker", "network", "disconnect", "kind", "reg"},
			func(t *testing.T, _ *Machine, st *State) {
				if n := st.Containers["reg"].Network; n != "" {
					t.Errorf("still on network %q: want the disconnect done", n)
				}
			}},
		{"docker-load", nil, []string{"docker", "load", "-i", pkg},
			func(t *testing.T, _ *Machine, st *State) {
				if len(st.Images) != 1 {
					t.Errorf("images %v", st.Images)
				}
			}},
		{"zarf-init", nil, []string{"zarf", "init", pkg, "--confirm"},
			func(t *testing.T, _ *Machine, st *State) {
				if len(st.Inits) != 0 || len(st.PartialInits) != 1 {
					t.Errorf("inits %v, partial %v: want one partial init", st.Inits, st.PartialInits)
				}
			}},
		{"zarf-deploy", nil, []string{"zarf", "package", "deploy", pkg, "--confirm"},
			func(t *testing.T, _ *Machine, st *State) {
				if len(st.Deploys) != 1 || !st.Deploys[0].Partial || st.Deploys[0].Package != filepath.Base(pkg) {
					t.Errorf("deploys %+v: want one partial deploy record", st.Deploys)
				}
			}},
		{"kind-create", nil, []string{"kind-create", "c1"},
			func(t *testing.T, m *Machine, st *State) {
				if st.Containers["c1-control-plane"] == nil {
					t.Error("no node container")
				}
				if got := kubeContexts(m); got != "" {
					t.Errorf("contexts %q: want none written", got)
				}
			}},
		{"kind-delete", [][]string{{"kind-create", "c1"}}, []string{"kind-delete", "c1"},
			func(t *testing.T, m *Machine, st *State) {
				if st.Containers["c1-control-plane"] != nil {
					t.Error("the node container is left")
				}
				if got := kubeContexts(m); got != "kind-c1" {
					t.Errorf("contexts %q: want kind-c1 left", got)
				}
			}},
	} {
		t.Run(tc.step, func(t *testing.T) {
			m := newMachine(t)
			for _, s := range tc.setup {
				if killed, out := caller(t, m, tc.step+"@9", s[0], s[1:]...); killed {
					t.Fatalf("setup %v killed: %s", s, out)
				}
			}
			killed, out := caller(t, m, "docker-info,"+tc.step, tc.call[0], tc.call[1:]...)
			if !killed {
				t.Fatalf("FAKE_KILL=%s: %v was not killed:\n%s", tc.step, tc.call, out)
			}
			calls := m.Calls()
			if last := calls[len(calls)-1]; last != "FAKE_KILL "+tc.step {
				t.Errorf("last call %q", last)
			}
			st, err := m.State()
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, m, st)
		})
	}
}

// TestKillTheNthTime: STEP@N kills only the N-th time the step is reached;
// the other steps and the earlier calls run to the end.
func TestKillTheNthTime(t *testing.T) {
	m := newMachine(t)
	const kill = "docker-network@2,zarf-deploy"
	if killed, out := caller(t, m, kill, "docker", "run", "-d", "--name", "reg", "--network", "kind", "img"); killed {
		t.Fatalf("docker run killed: %s", out)
	}
	if killed, out := caller(t, m, kill, "docker", "network", "disconnect", "kind", "reg"); killed {
		t.Fatalf("the first docker network call killed: %s", out)
	}
	if killed, _ := caller(t, m, kill, "docker", "network", "connect", "--alias", "registry", "kind", "reg"); !killed {
		t.Fatal("the second docker network call was not killed")
	}
	st, _ := m.State()
	if c := st.Containers["reg"]; c.Network != "kind" || len(c.Aliases) != 0 {
		t.Errorf("reg: %+v, want connected without its alias", c)
	}
	if killed, out := caller(t, m, kill, "docker", "network", "connect", "kind", "reg"); !killed && !strings.Contains(out, "already exists") {
		t.Errorf("the third call: %s", out)
	}
}

// TestKillInProcess: the in-process Runner cannot kill its caller (the
// test): it does the same half of the step and returns what exec reports
// for a child killed by SIGKILL.
func TestKillInProcess(t *testing.T) {
	m := newMachine(t)
	r := Runner{Env: []string{EnvDir + "=" + m.Dir, EnvKill + "=docker-run"}}
	_, err := r.Run(context.Background(), "docker", "run", "-d", "--name", "reg", "img")
	var re *runner.RunError
	if !errors.As(err, &re) || !strings.Contains(re.Err.Error(), "signal: killed") {
		t.Fatalf("got %v, want a RunError for a killed child", err)
	}
	st, _ := m.State()
	if c := st.Containers["reg"]; c == nil || c.Status != StatusCreated {
		t.Errorf("reg: %+v", c)
	}
}

func TestAStepNobodyNamedIsNeverListed(t *testing.T) {
	for _, c := range []struct {
		list, step string
		want       bool
	}{
		{"", "", false},
		{"", "zarf-deploy", false},
		{"zarf-init, zarf-deploy", "zarf-deploy", true},
		{"zarf-init,", "", false},
	} {
		if got := listed(c.list, c.step); got != c.want {
			t.Errorf("listed(%q, %q) = %v, want %v", c.list, c.step, got, c.want)
		}
	}
}
