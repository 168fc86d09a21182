// Package fakes holds the stand-ins for what a test machine cannot run:
// docker and zarf as programs (for testscript.Main, or in-process through
// Runner), kind as an in-process slot cluster provider, and the registry
// probe.
//
// They share one fake machine, a directory named by $FAKES: its state in
// state.json (containers, images, zarf inits and deploys) and every call,
// one per line, in calls. $FAKE_FAIL names the steps that fail on request,
// comma separated: docker-<subcommand>, zarf-init, zarf-deploy, kind-create,
// kind-delete. $FAKE_DOCKER_MEM sets the memory docker info reports.
//
// $FAKE_KILL names, the same way, the steps inside which the caller dies
// (U4: a power cut or a killed shell in the middle of a step). Reaching
// such a step, a fake does part of the work, appends "FAKE_KILL STEP" to
// calls, and SIGKILLs its own process group: the fake program, the plugin
// that ran it and the script that ran the plugin (plugins and fakes run in
// the script's group, so start the script in a group of its own:
// SysProcAttr.Setpgid). What each step has done when it dies:
//
//	docker-run      the container is created, not started (docker ps -a only; no port answers)
//	docker-rm       the first named container is removed, the others are left
//	docker-network  disconnect: disconnected; connect: connected without the aliases
//	                (in a switch: after the kubeconfig alias moved, before the registry alias did)
//	docker-load     the image is loaded (the caller never sees the answer)
//	docker-...      the read-only subcommands (info, ps, stats, inspect, image inspect, port): nothing
//	zarf-init       a partial init is recorded (State.PartialInits), no init
//	zarf-deploy     a deploy is recorded with Partial set: some resources, no finished deploy
//	kind-create     the node container exists; no kube context was written
//	kind-delete     the node container is gone; the kube context is left
//
// "STEP@N" kills only the N-th time STEP is reached on the machine
// (counted in $FAKES/reached while FAKE_KILL names it with a count), e.g.
// docker-network@2 for the connect that follows a disconnect. The
// in-process Runner cannot kill its caller (the test): it does the same
// part of the step and returns the error exec gives for a killed child.
//
// A fake rejects what it does not imitate (a subcommand, a flag, a --format
// template): it exits non-zero with "fake docker: unsupported ..." and
// appends the call to rejected, which Setup turns into a test failure, so a
// caller that ignores the error cannot hide it. What each fake imitates is
// listed in one place: dockerCommands and zarfCommands.
package fakes

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// Environment variables the fakes read.
const (
	EnvDir       = "FAKES"
	EnvFail      = "FAKE_FAIL"
	EnvHang      = "FAKE_HANG"
	EnvDockerMem = "FAKE_DOCKER_MEM"
)

// Container is a fake Docker container.
type Container struct {
	Image   string            `json:"image"`
	Network string            `json:"network,omitempty"`
	Ports   []string          `json:"ports,omitempty"` // 127.0.0.1:5002->5000/tcp
	Aliases []string          `json:"aliases,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	Memory  int64             `json:"memory"`
	Health  string            `json:"health,omitempty"`
	// Status is "" for a running container, StatusCreated for one created
	// but never started (docker run killed half way).
	Status string `json:"status,omitempty"`
	// Restart is the container's restart policy (docker run --restart).
	Restart string `json:"restart,omitempty"`
	// Connects counts docker network connect calls: Docker's IPAM
	// allocates a network's addresses serially, so a container
	// disconnected and connected again gets another address.
	Connects int `json:"connects,omitempty"`
}

// StatusCreated is a container docker created but did not start: docker ps
// shows it only with -a, and it publishes no port.
const StatusCreated = "created"

// Deploy is one zarf package deploy.
type Deploy struct {
	Context string `json:"context"`
	// Server is the API server the context names: the cluster the deploy
	// reached, whatever the context is called.
	Server    string   `json:"server,omitempty"`
	Package   string   `json:"package"`
	Variables []string `json:"variables,omitempty"`
	// Partial: the deploy was killed half way (FAKE_KILL zarf-deploy):
	// some of the package's resources exist, the deploy did not finish.
	Partial bool `json:"partial,omitempty"`
}

// State is the fake machine: Docker's containers and images, and what
// zarf initialised (kube contexts) and deployed.
type State struct {
	MemTotal   int64                 `json:"memTotal"`
	Containers map[string]*Container `json:"containers"`
	Images     []string              `json:"images"`
	Inits      []string              `json:"inits"`
	// PartialInits are the contexts where zarf init was killed half way.
	PartialInits []string `json:"partialInits,omitempty"`
	Deploys      []Deploy `json:"deploys"`
}

// env is how a fake reads its environment: the process's, or a Runner's
// overlay on it.
type env func(string) string

func (e env) dir() string { return e(EnvDir) }

func (e env) fails(step string) bool { return listed(e(EnvFail), step) }

// hangs reports whether $FAKE_HANG names step: the fake then sleeps until
// it is killed, as a hung tool does.
func (e env) hangs(step string) bool { return listed(e(EnvHang), step) }

// listed reports whether step is in the comma-separated list. A command
// that names no step is never listed: strings.Split of an unset variable is
// [""], which would match it (a fake zarf asked for a digest hung for an hour).
func listed(list, step string) bool {
	if step == "" {
		return false
	}
	for _, s := range strings.Split(list, ",") {
		if strings.TrimSpace(s) == step {
			return true
		}
	}
	return false
}

func (e env) memTotal(s *State) int64 {
	var m int64
	if _, err := fmt.Sscan(e(EnvDockerMem), &m); err == nil && m > 0 {
		return m
	}
	return s.MemTotal
}

// withState runs fn on the machine's state under an exclusive flock, and
// saves it when fn succeeds.
func withState(dir string, fn func(s *State) error) error {
	if dir == "" {
		return fmt.Errorf("%s is not set", EnvDir)
	}
	lf, err := os.OpenFile(filepath.Join(dir, "state.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	p := filepath.Join(dir, "state.json")
	s := &State{MemTotal: 16 << 30, Containers: map[string]*Container{}}
	if data, err := state.ReadFile(p, -1, false); err == nil {
		if err := json.Unmarshal(data, s); err != nil {
			return fmt.Errorf("fake state %s: %w", p, err)
		}
	}
	if s.Containers == nil {
		s.Containers = map[string]*Container{}
	}
	if err := fn(s); err != nil {
		return err
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o644)
}

func appendLine(dir, file, line string) {
	f, err := os.OpenFile(filepath.Join(dir, file), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		fmt.Fprintln(f, line)
		f.Close()
	}
}

func (e env) call(line string) { appendLine(e.dir(), "calls", line) }

func sortedNames(s *State) []string {
	names := make([]string, 0, len(s.Containers))
	for n := range s.Containers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Machine is one fake machine's directory ($FAKES).
type Machine struct {
	Dir string
}

// NewMachine prepares dir as a fake machine (its ports/ folder, where a
// test writes what docker port answers for a container).
func NewMachine(dir string) (*Machine, error) {
	if err := os.MkdirAll(filepath.Join(dir, "ports"), 0o755); err != nil {
		return nil, err
	}
	return &Machine{Dir: dir}, nil
}

// Setup gives t a fresh fake machine: $FAKES names it, $FAKE_FAIL,
// $FAKE_KILL and $FAKE_DOCKER_MEM are cleared, and when the test ends it fails if a fake
// rejected a call. It uses t.Setenv, so the test cannot be parallel.
func Setup(t testing.TB) *Machine {
	t.Helper()
	m, err := NewMachine(filepath.Join(t.TempDir(), "fakes"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvDir, m.Dir)
	t.Setenv(EnvFail, "")
	t.Setenv(EnvKill, "")
	t.Setenv(EnvDockerMem, "")
	t.Cleanup(func() {
		if r := m.Rejected(); len(r) > 0 {
			t.Errorf("the fakes rejected calls they do not imitate:\n%s", strings.Join(r, "\n"))
		}
	})
	return m
}

// State reads the machine's state.
func (m *Machine) State() (*State, error) {
	var st *State
	err := withState(m.Dir, func(s *State) error { st = s; return nil })
	return st, err
}

// Calls is every call so far, one line each, in order.
func (m *Machine) Calls() []string { return m.lines("calls") }

// Edit changes the fake daemon's state (a test's site that docker run
// cannot make, e.g. a container that names no image).
func (m *Machine) Edit(fn func(s *State)) error {
	return withState(m.Dir, func(s *State) error { fn(s); return nil })
}

// Rejected is every call a fake rejected.
func (m *Machine) Rejected() []string { return m.lines("rejected") }

// ResetCalls forgets the calls so far.
func (m *Machine) ResetCalls() error {
	err := os.Remove(filepath.Join(m.Dir, "calls"))
	if os.IsNotExist(err) {
		return nil
	}
	return err
}

// Port records what docker port answers for container.
func (m *Machine) Port(container, answer string) error {
	return os.WriteFile(filepath.Join(m.Dir, "ports", container), []byte(answer), 0o644)
}

func (m *Machine) lines(file string) []string {
	b, err := state.ReadFile(filepath.Join(m.Dir, file), -1, false)
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n")
}
