package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/invariant"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
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
	// the time the commands took, by kind, and how many ran
	took  map[string]time.Duration
	count map[string]int
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
	s := &invSite{t: t, base: base, servers: map[string]*kubernetes.Clientset{}, took: map[string]time.Duration{}, count: map[string]int{}}
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

// Healthy reads slot sl's health from its API server.
func (q *seqSite) Healthy(sl string) bool { return q.inv.healthy(sl) }

// SetHealth heals or breaks slot sl's workload on its API server.
func (q *seqSite) SetHealth(sl string, ok bool) error { return q.inv.setHealth(sl, ok) }

// Plugin runs a read-only plugin command and returns its output.
func (q *seqSite) Plugin(argv ...string) invariant.Result {
	return q.exec(argv, "", nil, 0, time.Minute)
}

// exec runs argv (or, with shell set, a command line through bash from the
// repository's root, as an operator pastes it) in a process group of its
// own; killAfter > 0 SIGKILLs the group after that long.
func (q *seqSite) exec(argv []string, shell string, extraEnv []string, killAfter time.Duration, timeout time.Duration) invariant.Result {
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
		return invariant.Result{Out: err.Error(), Code: 127, Took: time.Since(start)}
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
	r := invariant.Result{Out: buf.String(), Took: time.Since(start)}
	_ = os.Remove(filepath.Join(q.root, "kill-counter"))
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			r.Killed, r.Code = true, -1
		} else {
			r.Code = ee.ExitCode()
		}
	default:
		r.Code = 127
		r.Out += err.Error()
	}
	if timedOut {
		r.Out += fmt.Sprintf("\n(hung: killed after %s)", timeout)
		r.Killed = false
		r.Code = 124
	}
	return r
}

func clientConfig(kubeconfig string) (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", kubeconfig)
}

// calls is what the fakes logged (FAKE_KILL STEP when one killed its caller).
func (q *seqSite) calls() string {
	b, _ := os.ReadFile(filepath.Join(q.root, "fakes", "calls"))
	return string(b)
}
