package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// invSite is the prepared site every sequence of TestInvariant starts from
// (a fresh copy of base), with the two API servers that back slots a and b
// (started once per test run) and a kubectl that dispatches to the
// plugins on PATH the way kubectl does, so printed commands run verbatim.
type invSite struct {
	t       *testing.T
	base    *switchSite
	servers map[string]*kubernetes.Clientset
	bin     string // holds the kubectl shim
}

const kubectlShim = `#!/usr/bin/env bash
# kubectl's plugin dispatch: kubectl bundle-NAME ARGS / kubectl bundle NAME ARGS.
if [ "$1" = bundle ] && [ $# -ge 2 ]; then n="kubectl-bundle-$2"; shift 2
else n="kubectl-$1"; shift; fi
exec "$n" "$@"
`

func newInvSite(t *testing.T) *invSite {
	t.Helper()
	base := newStrategySite(t)
	s := &invSite{t: t, base: base, servers: map[string]*kubernetes.Clientset{}}
	for _, sl := range []string{"a", "b"} {
		cfg, err := clientConfig(filepath.Join(base.root, "airgap-mgmt-"+sl+".kubeconfig"))
		if err != nil {
			t.Fatal(err)
		}
		s.servers[sl] = kubernetes.NewForConfigOrDie(cfg)
	}
	s.bin = t.TempDir()
	if err := os.WriteFile(filepath.Join(s.bin, "kubectl"), []byte(kubectlShim), 0o755); err != nil {
		t.Fatal(err)
	}
	return s
}

// setHealth creates or deletes the ConfigMap the site's gate checks on
// slot sl's API server.
func (s *invSite) setHealth(sl string, healthy bool) error {
	cms := s.servers[sl].CoreV1().ConfigMaps("default")
	ctx := context.Background()
	if healthy {
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "healthy", Namespace: "default"}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	err := cms.Delete(ctx, "healthy", metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// healthy reads slot sl's health from its API server: the ground truth of
// whether it passes the site's gate.
func (s *invSite) healthy(sl string) bool {
	cli, ok := s.servers[sl]
	if !ok {
		return false
	}
	_, err := cli.CoreV1().ConfigMaps("default").Get(context.Background(), "healthy", metav1.GetOptions{})
	return err == nil
}

// fresh is a new copy of the prepared site with both workloads healthy.
func (s *invSite) fresh(dir string, soak string) *seqSite {
	s.t.Helper()
	for _, sl := range []string{"a", "b"} {
		if err := s.setHealth(sl, true); err != nil {
			s.t.Fatal(err)
		}
	}
	c := s.base.snapshot(dir)
	env := append(c.env,
		"PATH="+s.bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECTL_BUNDLE_GATE="+filepath.Join(c.root, "gate.yaml"),
		"KUBECTL_BUNDLE_GATE_TIMEOUT=500ms",
		"KUBECTL_BUNDLE_SOAK_WINDOW="+soak,
		"KB_TEST_COUNTER="+filepath.Join(c.root, "kill-counter"))
	return &seqSite{inv: s, root: c.root, env: env}
}

// seqSite is one sequence's copy of the site.
type seqSite struct {
	inv  *invSite
	root string
	env  []string
}

func (q *seqSite) state(elem ...string) string {
	return filepath.Join(append([]string{q.root, "state"}, elem...)...)
}

// result is how one process ended.
type result struct {
	out    string
	code   int // -1 when killed
	killed bool
	took   time.Duration
}

func (r result) String() string {
	if r.killed {
		return "killed"
	}
	return fmt.Sprintf("exit %d", r.code)
}

// exec runs argv (or, with shell set, a command line through bash from the
// repository's root, as an operator pastes it) in a process group of its
// own; killAfter > 0 SIGKILLs the group after that long.
func (q *seqSite) exec(argv []string, shell string, extraEnv []string, killAfter time.Duration, timeout time.Duration) result {
	var cmd *exec.Cmd
	if shell != "" {
		cmd = exec.Command("bash", "-c", shell)
		cmd.Dir = repo()
	} else {
		cmd = exec.Command(argv[0], argv[1:]...)
		cmd.Dir = q.root
	}
	cmd.Env = append(append([]string{}, q.env...), extraEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return result{out: err.Error(), code: 127, took: time.Since(start)}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var killTimer <-chan time.Time
	if killAfter > 0 {
		killTimer = time.After(killAfter)
	}
	hung := time.After(timeout)
	var err error
	timedOut := false
wait:
	for {
		select {
		case err = <-done:
			break wait
		case <-killTimer:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			killTimer = nil
		case <-hung:
			timedOut = true
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			hung = nil
		}
	}
	// Whatever the group started dies with it (a kill reaches every member).
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	r := result{out: buf.String(), took: time.Since(start)}
	_ = os.Remove(filepath.Join(q.root, "kill-counter"))
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			r.killed, r.code = true, -1
		} else {
			r.code = ee.ExitCode()
		}
	default:
		r.code = 127
		r.out += err.Error()
	}
	if timedOut {
		r.out += fmt.Sprintf("\n(hung: killed after %s)", timeout)
		r.killed = false
		r.code = 124
	}
	return r
}

// plugin runs a read-only plugin command and returns its output.
func (q *seqSite) plugin(argv ...string) result {
	return q.exec(argv, "", nil, 0, time.Minute)
}

// ground is the fake machine as read from $FAKES/state.json: the ground
// truth of which clusters exist and what was deployed where.
type ground struct {
	Containers map[string]json.RawMessage `json:"containers"`
	Deploys    []struct {
		Context string `json:"context"`
		Package string `json:"package"`
		Partial bool   `json:"partial"`
	} `json:"deploys"`
}

func (q *seqSite) ground() (*ground, error) {
	b, err := os.ReadFile(filepath.Join(q.root, "fakes", "state.json"))
	if err != nil {
		return nil, err
	}
	g := &ground{}
	return g, json.Unmarshal(b, g)
}

// slotPackage is what the machine says slot sl holds: "" when its cluster
// does not exist, else the package last deployed into its context
// ("partial:" when that deploy was cut off, "none" when nothing was).
func (g *ground) slotPackage(sl string) string {
	if _, ok := g.Containers["airgap-mgmt-"+sl+"-control-plane"]; !ok {
		return ""
	}
	p := "none"
	for _, d := range g.Deploys {
		if d.Context == "kind-airgap-mgmt-"+sl {
			p = d.Package
			if d.Partial {
				p = "partial:" + d.Package
			}
		}
	}
	return p
}

// aliases is where the kubeconfig alias context and the registry alias
// point on the machine ("" when nowhere or ambiguous).
func (q *seqSite) aliases() (kube, registry string) {
	b, err := os.ReadFile(filepath.Join(q.root, "kubeconfig"))
	if err == nil {
		// The alias context names the cluster of the slot it follows.
		var kc struct {
			Contexts []struct {
				Name    string `json:"name"`
				Context struct {
					Cluster string `json:"cluster"`
				} `json:"context"`
			} `json:"contexts"`
		}
		if yamlToJSON(b, &kc) == nil {
			for _, c := range kc.Contexts {
				if c.Name == "kind-airgap-mgmt" {
					kube = strings.TrimPrefix(c.Context.Cluster, "kind-airgap-mgmt-")
				}
			}
		}
	}
	g, err := q.ground()
	if err != nil {
		return kube, ""
	}
	for _, sl := range []string{"a", "b"} {
		raw, ok := g.Containers["krops-registry-airgap-"+sl]
		if !ok {
			continue
		}
		var c struct {
			Network string   `json:"network"`
			Aliases []string `json:"aliases"`
		}
		_ = json.Unmarshal(raw, &c)
		for _, a := range c.Aliases {
			if a == "krops-registry" && c.Network == "kind" {
				if registry != "" {
					return kube, "both"
				}
				registry = sl
			}
		}
	}
	return kube, registry
}

func clientConfig(kubeconfig string) (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", kubeconfig)
}

func yamlToJSON(b []byte, v any) error { return yaml.Unmarshal(b, v) }

// calls is what the fakes logged (FAKE_KILL STEP when one killed its caller).
func (q *seqSite) calls() string {
	b, _ := os.ReadFile(filepath.Join(q.root, "fakes", "calls"))
	return string(b)
}
