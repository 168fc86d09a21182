package fakes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
		{"docker unknown flag", "docker", []string{"run", "-d", "--restart=always", "--name", "x", "img"}, "fake docker: unsupported flag --restart of docker run"},
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
		"--health-cmd", "wget --spider --quiet http://localhost:5000/v2/ || exit 1", "--health-interval=1s", "registry:2", "serve", "-x")
	if got := run("ps", "-a", "--format", formatPS); got != "reg\t127.0.0.1:5002->5000/tcp\n" {
		t.Errorf("ps: %q", got)
	}
	if got := run("inspect", "--format", formatHealth, "reg"); got != "healthy\n" {
		t.Errorf("inspect health: %q", got)
	}
	run("network", "disconnect", "kind", "reg")
	run("network", "connect", "--alias", "registry", "kind", "reg")
	if got := run("inspect", "--format", formatNetworks, "reg"); got != `{"kind":{"Aliases":["reg","registry"]}}`+"\n" {
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
	if len(calls) == 0 || calls[0] != "docker run -d --name reg --network kind -p 127.0.0.1:5002:5000 --label dev.kubectl-bundle.slot=a --health-cmd wget --spider --quiet http://localhost:5000/v2/ || exit 1 --health-interval=1s registry:2 serve -x" {
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
	if !strings.Contains(got, `docker stats [--format= --no-stream] formats ["{{.Name}}\t{{.MemUsage}}"]`) {
		t.Errorf("stats line:\n%s", got)
	}
}
