package model_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/fakes"
	"github.com/kubectl-bundle/kubectl-bundle/internal/gate"
	"github.com/kubectl-bundle/kubectl-bundle/internal/gatecmd"
	"github.com/kubectl-bundle/kubectl-bundle/internal/invariant"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journalcmd"
	"github.com/kubectl-bundle/kubectl-bundle/internal/runner"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slotcmd"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
	"github.com/kubectl-bundle/kubectl-bundle/internal/switchcmd"
	"github.com/kubectl-bundle/kubectl-bundle/internal/testenv"
	"github.com/kubectl-bundle/kubectl-bundle/internal/verifycmd"
)

// The machine the model runs on: one directory (on tmpfs when there is
// one) holding the state dir, the fake Docker/zarf machine ($FAKES), the
// kubeconfig, the archives and the gate files; every plugin runs
// in-process (its package's Main), docker and zarf are fakes.Runner, kind
// is fakes.Kind, and the gate's cluster reads are answered from the
// model's health table (gate.WithReader). The process environment is the
// model's: the test is never parallel.

// repoRoot is found from the package's directory, where go test starts
// (before the model changes the working directory; -trimpath leaves no
// absolute source path to start from).
var repoRoot = testenv.RepoRoot()

// repo is a path in the repository.
func repo(elem ...string) string {
	return filepath.Join(append([]string{repoRoot}, elem...)...)
}

const (
	// clusterHost is the API server a fake cluster's context names:
	// nothing listens there; the path says which cluster it is.
	clusterHost = invariant.FakeServer
	gateOK      = "apiVersion: kubectl-bundle.dev/v1alpha1\nkind: Gate\nmetadata: {name: marker}\nspec:\n  checks:\n  - name: healthy\n    resource: {apiVersion: v1, kind: ConfigMap, namespace: default, name: healthy}\n"
	gateFails   = "apiVersion: kubectl-bundle.dev/v1alpha1\nkind: Gate\nmetadata: {name: fails}\nspec:\n  checks:\n  - name: absent\n    resource: {apiVersion: v1, kind: ConfigMap, namespace: default, name: absent}\n"
)

// killed is what a FAKE_KILL step panics with in-process: the whole
// "process" (the plugin and a journal run around it) dies there; the
// model recovers it at the top, as the kernel would close its files.
type killed struct{ step string }

type machine struct {
	root string
	// bases are the prepared sites a sequence starts from, by name ("":
	// kind slots; siteExisting), and site the one the current sequence
	// started from.
	bases  map[string]map[string]snapFile
	site   string
	health map[string]bool   // cluster name -> its workload passes the site's gate
	env    map[string]string // the environment every operation starts with
	calls  int               // plugin calls made (counted for the rate)
	// relative: the state dir is named relatively ($KUBECTL_BUNDLE_STATE_DIR=state
	// from root/work), the "cwd" operation's change.
	relative bool
	// processes: each command runs in a process of its own (this test
	// binary as the plugin: childMain), as the binaries run; the
	// benchmark's baseline.
	processes bool
	// files reads the site for the checks; cluster reads the fake
	// machine for the gate, while a command runs.
	files, cluster *invariant.Files
}

type snapFile struct {
	mode os.FileMode
	data []byte
}

func newMachine(tb testing.TB) *machine {
	tb.Helper()
	parent := ""
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		parent = "/dev/shm"
	}
	root, err := os.MkdirTemp(parent, "kb-model-")
	if err != nil {
		tb.Fatal(err)
	}
	if os.Getenv("KB_MODEL_KEEPROOT") == "1" {
		tb.Logf("KB_MODEL_KEEPROOT=1: the machine's root %s is kept", root)
	} else {
		tb.Cleanup(func() { _ = os.RemoveAll(root) })
	}
	// Every command's garbage is short-lived and the heap small (a few
	// MB): collecting at four times the live heap, not twice, halves the
	// collector's share of the model's CPU time.
	gc := debug.SetGCPercent(400)
	tb.Cleanup(func() { debug.SetGCPercent(gc) })
	m := &machine{root: root, health: map[string]bool{}, files: &invariant.Files{Root: root}, cluster: &invariant.Files{Root: root}}
	m.env = map[string]string{
		"KUBECTL_BUNDLE_STATE_DIR":    filepath.Join(root, "state"),
		"KUBECONFIG":                  filepath.Join(root, "kubeconfig"),
		"KUBECTL_BUNDLE_ARCHIVES":     filepath.Join(root, "archives"),
		"FAKES":                       filepath.Join(root, "fakes"),
		"ZARF_VERIFY_KEY":             repo("testdata/keys/cosign.pub"),
		"WORK":                        root,
		"HOME":                        filepath.Join(root, "home"),
		"XDG_STATE_HOME":              filepath.Join(root, "home", ".local", "state"),
		"NO_COLOR":                    "1",
		"KUBECTL_BUNDLE_GATE":         filepath.Join(root, "gate.yaml"),
		"KUBECTL_BUNDLE_GATE_TIMEOUT": "1s",
		"KUBECTL_BUNDLE_SOAK_WINDOW":  "24h",
		"KUBECTL_BUNDLE_STEP":         "",
		"KUBECTL_BUNDLE_SCRIPTS_DIR":  repo("scripts"),
		"KUBECTL_BUNDLE_RUN_FD":       "",
		"FAKE_FAIL":                   "",
		"FAKE_KILL":                   "",
		"FAKE_HANG":                   "",
	}
	for k, v := range m.env {
		setenv(tb, k, v)
	}
	wd, _ := os.Getwd()
	tb.Cleanup(func() { _ = os.Chdir(wd) })
	m.bases = map[string]map[string]snapFile{}
	for _, site := range []string{"", siteExisting} {
		if err := m.prepare(site); err != nil {
			tb.Fatalf("preparing the site %q: %v", site, err)
		}
	}
	return m
}

// siteExisting is the model's second site: both slots of the existing
// provider, each an operator's cluster on the fake machine (config.yaml
// provider: existing), where issue 32's class 2 lives. The default site
// ("") has kind slots.
const siteExisting = "existing"

// The operator's contexts on the existing site, one per cluster, named
// after neither slot (a copy-paste in config.yaml is one of them twice).
const (
	ctxEast = "mgmt-east" // slot a's cluster, airgap-mgmt-a
	ctxWest = "mgmt-west" // slot b's cluster, airgap-mgmt-b
)

// prepare builds site from an empty root (slot a created, its package
// staged, deployed and gated, and switched to: active and known-good)
// and keeps it as the base every sequence of that site starts from.
func (m *machine) prepare(site string) error {
	if err := m.clear(); err != nil {
		return err
	}
	root := m.root
	for _, d := range []string{"fakes/ports", "archives", "home", "work", "elsewhere"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	files := map[string]string{
		"archives/zarf-init-amd64-v0.84.0.tar.zst": "fake",
		"gate.yaml":       gateOK,
		"gate-fails.yaml": gateFails,
	}
	for _, sl := range invariant.Slots {
		name := invariant.SlotCluster(sl)
		files[name+".kubeconfig"] = fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: %s\n  cluster: {server: %q, insecure-skip-tls-verify: true}\nusers:\n- name: %s\n  user: {token: fake}\ncontexts:\n- name: %s\n  context: {cluster: %s, user: %s}\ncurrent-context: %s\n",
			name, clusterHost+name, name, name, name, name, name)
	}
	if site == siteExisting {
		if err := m.operatorClusters(); err != nil {
			return err
		}
		files["kubeconfig"] = operatorKubeconfig
		if err := os.Mkdir(filepath.Join(root, "state"), 0o700); err != nil {
			return err
		}
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	if site == siteExisting {
		if err := m.writeConfig(ctxEast, ctxWest); err != nil {
			return err
		}
	}
	m.health[invariant.SlotCluster("a")], m.health[invariant.SlotCluster("b")] = true, true
	if err := os.Chdir(filepath.Join(root, "work")); err != nil {
		return err
	}
	for _, line := range []string{
		"kubectl-bundle-slot create a -q",
		"kubectl-bundle-verify --stage -q $V1 --key $KEY",
		"kubectl-bundle-slot deploy a $V1 -q",
		"kubectl-bundle-gate --slot a --record -f $GATE --once -q",
		"kubectl-bundle-switch to a -q",
	} {
		if r := m.run(m.Expand(strings.Fields(line)), nil); r.Code != 0 {
			return fmt.Errorf("%s: %s\n%s", line, r, r.Out)
		}
	}
	base := map[string]snapFile{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			base[rel] = snapFile{mode: fi.Mode()}
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		base[rel] = snapFile{mode: fi.Mode(), data: b}
		return nil
	})
	m.bases[site] = base
	return err
}

// operatorKubeconfig is the operator's kubeconfig on the existing site:
// a context per cluster (configEdit points one at the other cluster).
var operatorKubeconfig = fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster: {server: %[3]q, insecure-skip-tls-verify: true}
- name: %[2]s
  cluster: {server: %[4]q, insecure-skip-tls-verify: true}
users:
- name: operator
  user: {token: fake}
contexts:
- name: %[1]s
  context: {cluster: %[1]s, user: operator}
- name: %[2]s
  context: {cluster: %[2]s, user: operator}
current-context: %[1]s
`, ctxEast, ctxWest, clusterHost+invariant.SlotCluster("a"), clusterHost+invariant.SlotCluster("b"))

// operatorClusters puts the existing site's two clusters on the fake
// machine: node containers (what the gate, the identity and the ground
// truth read) labelled as the operator's, each with the UID of its
// kube-system namespace.
func (m *machine) operatorClusters() error {
	st := fakes.State{MemTotal: 16 << 30, Containers: map[string]*fakes.Container{}}
	for _, sl := range invariant.Slots {
		name := invariant.SlotCluster(sl)
		st.Containers[name+"-control-plane"] = &fakes.Container{Image: "operator/cluster", Memory: 1536 << 20,
			Labels: map[string]string{invariant.LabelOperatorCluster: "true", invariant.LabelKubeSystemUID: "6b1c0f3e-0000-4000-8000-00000000000" + sl}}
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(m.root, "fakes", "state.json"), b, 0o644)
}

// writeConfig writes the existing site's config.yaml: slot a's context
// and slot b's.
func (m *machine) writeConfig(a, b string) error {
	c := fmt.Sprintf("provider: existing\nexisting:\n  a: {context: %s}\n  b: {context: %s}\n", a, b)
	return os.WriteFile(filepath.Join(m.root, "state", "config.yaml"), []byte(c), 0o600)
}

// clear empties the root, from the root (the working directory may go).
func (m *machine) clear() error {
	if err := os.Chdir(m.root); err != nil {
		return err
	}
	entries, err := os.ReadDir(m.root)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(m.root, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// setenv sets a variable for the test's whole run.
func setenv(tb testing.TB, k, v string) {
	if t, ok := tb.(interface{ Setenv(k, v string) }); ok {
		t.Setenv(k, v)
		return
	}
	_ = os.Setenv(k, v)
}

// reset makes the machine the prepared site again (site: "" or
// siteExisting), with both workloads healthy and the environment as
// prepared.
func (m *machine) reset(site, soak string) error {
	base, ok := m.bases[site]
	if !ok {
		return fmt.Errorf("no site %q", site)
	}
	if err := m.clear(); err != nil {
		return err
	}
	// Directories first (WalkDir order: a parent before its children).
	paths := make([]string, 0, len(base))
	for p := range base {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		f := base[p]
		full := filepath.Join(m.root, p)
		if f.mode.IsDir() {
			if p != "." {
				if err := os.Mkdir(full, f.mode.Perm()); err != nil {
					return err
				}
			}
			continue
		}
		if err := os.WriteFile(full, f.data, f.mode.Perm()); err != nil {
			return err
		}
	}
	m.site = site
	m.health[invariant.SlotCluster("a")], m.health[invariant.SlotCluster("b")] = true, true
	m.relative = false
	for k, v := range m.env {
		_ = os.Setenv(k, v)
	}
	_ = os.Setenv("KUBECTL_BUNDLE_SOAK_WINDOW", soak)
	return os.Chdir(filepath.Join(m.root, "work"))
}

// Expand replaces the placeholders of an operation with the site's files.
func (m *machine) Expand(argv []string) []string {
	rep := invariant.Placeholders(m.root, repoRoot)
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = rep.Replace(a)
	}
	return out
}

// run runs argv in-process with env added (KEY=VALUE); a FAKE_KILL step
// ends it as killed.
func (m *machine) run(argv []string, env []string) (res invariant.Result) {
	var buf bytes.Buffer
	restore := applyEnv(env)
	defer restore()
	defer func() {
		if p := recover(); p != nil {
			k, ok := p.(killed)
			if !ok {
				panic(p)
			}
			buf.WriteString("(killed inside " + k.step + ")\n")
			res = invariant.Result{Out: buf.String(), Code: -1, Killed: true}
		}
	}()
	if m.processes {
		return m.runProcess(argv, env)
	}
	code := m.dispatch(m.context(), nil, &buf, &buf, argv)
	return invariant.Result{Out: buf.String(), Code: code}
}

// envChild makes this test binary run one plugin command (childMain).
const envChild = "KB_MODEL_CHILD"

// runProcess runs argv in a child process: this test binary, which runs
// the plugin as run does (the fakes in it, the gate's reads answered from
// the health table it is given).
func (m *machine) runProcess(argv []string, env []string) invariant.Result {
	var health []string
	for name, ok := range m.health {
		if ok {
			health = append(health, name)
		}
	}
	cmd := exec.Command(os.Args[0], argv...)
	cmd.Env = append(append(os.Environ(), envChild+"="+m.root, "KB_MODEL_HEALTHY="+strings.Join(health, ",")), env...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	m.calls++
	var ee *exec.ExitError
	switch {
	case err == nil:
		return invariant.Result{Out: buf.String()}
	case errors.As(err, &ee) && ee.ExitCode() == killedCode:
		return invariant.Result{Out: buf.String(), Code: -1, Killed: true}
	case errors.As(err, &ee):
		return invariant.Result{Out: buf.String(), Code: ee.ExitCode()}
	}
	return invariant.Result{Out: buf.String() + err.Error(), Code: 127}
}

// killedCode is a child's exit status for a command killed inside a step.
const killedCode = 137

// childMain runs the command of a child process (runProcess) and exits.
func childMain() {
	root := os.Getenv(envChild)
	m := &machine{root: root, health: map[string]bool{}, files: &invariant.Files{Root: root}, cluster: &invariant.Files{Root: root}}
	for _, name := range strings.Split(os.Getenv("KB_MODEL_HEALTHY"), ",") {
		m.health[name] = true
	}
	res := m.run(os.Args[1:], nil)
	os.Stdout.WriteString(res.Out)
	if res.Killed {
		os.Exit(killedCode)
	}
	os.Exit(res.Code)
}

func applyEnv(env []string) func() {
	type old struct {
		k, v string
		set  bool
	}
	var olds []old
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		ov, set := os.LookupEnv(k)
		olds = append(olds, old{k, ov, set})
		_ = os.Setenv(k, v)
	}
	return func() {
		for i := len(olds) - 1; i >= 0; i-- {
			if olds[i].set {
				_ = os.Setenv(olds[i].k, olds[i].v)
			} else {
				_ = os.Unsetenv(olds[i].k)
			}
		}
	}
}

func die(step string) { panic(killed{step}) }

func (m *machine) context() context.Context {
	ctx := runner.NewContext(context.Background(), modelRunner{m: m, Runner: fakes.Runner{OnKill: die}})
	return slot.WithIdentifier(gate.WithReader(ctx, m.readCluster), m.identify)
}

// modelRunner is the fakes' docker and zarf, and journal run's step
// command run in-process.
type modelRunner struct {
	fakes.Runner
	m *machine
}

func (r modelRunner) WithEnv(env ...string) runner.Runner {
	return modelRunner{m: r.m, Runner: fakes.Runner{Env: append(append([]string{}, r.Env...), env...), OnKill: die}}
}

func (r modelRunner) RunAttached(ctx context.Context, env []string, stdin io.Reader, stdout, stderr io.Writer, name string, args ...string) (int, error) {
	restore := applyEnv(env)
	defer restore()
	return r.m.dispatch(ctx, stdin, stdout, stderr, append([]string{name}, args...)), nil
}

// dispatch runs one plugin in-process (os.Args form); 127 for a program
// the model does not run in-process.
func (m *machine) dispatch(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, argv []string) int {
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	streams := kcli.IOStreams{In: stdin, Out: stdout, ErrOut: stderr}
	name := filepath.Base(argv[0])
	if name == "kubectl" && len(argv) > 2 && argv[1] == "bundle" {
		argv = append([]string{"kubectl-bundle-" + argv[2]}, argv[3:]...)
	} else if name == "kubectl" && len(argv) > 1 && strings.HasPrefix(argv[1], "bundle-") {
		argv = append([]string{"kubectl-" + argv[1]}, argv[2:]...)
	}
	name = strings.ReplaceAll(filepath.Base(argv[0]), "_", "-")
	m.calls++
	switch name {
	case "kubectl-bundle-slot":
		return slotcmd.MainWith(ctx, streams, argv, slotcmd.Deps{Kind: fakes.Kind{OnKill: die}, Probe: fakes.Probe, Sleep: func(time.Duration) {}})
	case "kubectl-bundle-switch":
		return switchcmd.Main(ctx, streams, argv)
	case "kubectl-bundle-journal":
		return journalcmd.Main(ctx, streams, argv)
	case "kubectl-bundle-gate":
		return gatecmd.Main(ctx, streams, argv)
	case "kubectl-bundle-verify":
		return verifycmd.Main(ctx, streams, argv)
	case "blue-green.sh", "in-place.sh", "recreate.sh":
		return m.script(ctx, stdin, stdout, stderr, name, argv[1:])
	case "true":
		return 0
	case "false":
		return 1
	case "mv":
		if len(argv) == 3 {
			if err := os.Rename(argv[1], argv[2]); err != nil {
				fmt.Fprintln(stderr, err)
				return 1
			}
			return 0
		}
	case "rm":
		for _, a := range argv[1:] {
			if !strings.HasPrefix(a, "-") {
				if err := os.RemoveAll(a); err != nil {
					fmt.Fprintln(stderr, err)
					return 1
				}
			}
		}
		return 0
	}
	fmt.Fprintf(stderr, "model: %s does not run in-process\n", argv[0])
	return 127
}

// readCluster answers the gate for the cluster at host: each check passes
// while the cluster's node container exists and its workload is healthy,
// except the checks of the gate no workload passes (gate-fails.yaml).
func (m *machine) readCluster(_ context.Context, g *gate.Gate, host string) ([]gate.Result, error) {
	name := strings.TrimPrefix(host, clusterHost)
	if name == host {
		return nil, fmt.Errorf("no cluster at %s", host)
	}
	m.cluster.Forget() // read now: the command may have changed it
	gr, err := m.cluster.Ground()
	if err != nil {
		return nil, err
	}
	if _, ok := gr.Containers[name+"-control-plane"]; !ok {
		return nil, fmt.Errorf("dial tcp: connection refused (cluster %s is gone)", name)
	}
	ok := m.health[name] && g.Metadata.Name != "fails"
	var out []gate.Result
	for _, c := range g.Spec.Checks {
		r := gate.Result{Name: c.Name, Object: "ConfigMap/default/" + c.Name, Status: gate.Pass}
		if !ok {
			r.Status, r.Reason = gate.Fail, "NotFound"
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		out = append(out, gate.Result{Name: "healthy", Status: map[bool]gate.Status{true: gate.Pass, false: gate.Fail}[ok]})
	}
	return out, nil
}

// identify answers, in place of an API server, the identity of the
// cluster at cfg.Host (slot.WithIdentifier): a fake cluster answers while
// its node container exists, with the UID of its kube-system namespace
// (the existing site's clusters carry it; a kind cluster, which the
// existing provider never reaches, is given one from its name).
func (m *machine) identify(_ context.Context, cfg *rest.Config) (*slot.ClusterID, error) {
	name := invariant.ServerCluster(cfg.Host)
	if name == "" {
		return nil, fmt.Errorf("dial tcp %s: connect: connection refused", cfg.Host)
	}
	m.cluster.Forget() // read now: the command may have changed it
	gr, err := m.cluster.Ground()
	if err != nil {
		return nil, err
	}
	c, ok := gr.Containers[name+"-control-plane"]
	if !ok || c == nil {
		return nil, fmt.Errorf("dial tcp: connection refused (cluster %s is gone)", name)
	}
	uid := c.Labels[invariant.LabelKubeSystemUID]
	if uid == "" {
		uid = "kube-system-of-" + name
	}
	return &slot.ClusterID{Server: cfg.Host, KubeSystemUID: uid}, nil
}

// Healthy is the ground truth of whether slot sl passes the site's gate.
func (m *machine) Healthy(sl string) bool {
	gr, err := m.files.Ground()
	if err != nil {
		return false
	}
	_, ok := gr.Containers["airgap-mgmt-"+sl+"-control-plane"]
	return ok && m.health["airgap-mgmt-"+sl]
}

// SetHealth heals or breaks slot sl's workload.
func (m *machine) SetHealth(sl string, ok bool) error {
	m.health["airgap-mgmt-"+sl] = ok
	return nil
}

// Plugin runs a read-only plugin command in-process.
func (m *machine) Plugin(argv ...string) invariant.Result { return m.run(argv, nil) }

// script runs a strategy script in-process as scripts/*.sh do: a loop over
// journal advance (lib.sh's drive) that holds the run lock on a descriptor
// of this process for the whole run (a kill inside a step closes it, as
// the kernel closes a killed script's).
func (m *machine) script(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, name string, args []string) int {
	self := repo("scripts", name)
	call := func(out io.Writer, argv ...string) int { return m.dispatch(ctx, stdin, out, stderr, argv) }
	op := "apply"
	switch {
	case name == "blue-green.sh":
		if len(args) == 0 {
			fmt.Fprintln(stderr, "error: a command is required: apply, accept, revert or status (see --help)")
			return 2
		}
		op, args = args[0], args[1:]
		switch op {
		case "status":
			rc := call(stdout, "kubectl-bundle-journal", "status")
			if rc == 0 {
				rc = call(stdout, "kubectl-bundle-switch", "status")
			}
			if rc == 0 {
				rc = call(stdout, "kubectl-bundle-slot", "list")
			}
			return rc
		case "apply", "accept", "revert":
		default:
			fmt.Fprintf(stderr, "error: unknown command %q for \"blue-green.sh\" (see --help)\n", op)
			return 2
		}
	}
	strategy := strings.TrimSuffix(name, ".sh")
	run := append([]string{"--", strategy, op}, args...)
	advance := func(flags ...string) int {
		return call(stdout, append(append([]string{"kubectl-bundle-journal", "advance", "--script", self}, flags...), run...)...)
	}
	if rc := advance("--check"); rc != kcli.ExitMore {
		return rc
	}
	var path bytes.Buffer
	if rc := call(&path, "kubectl-bundle-journal", "lock-run", "--path"); rc != 0 {
		return rc
	}
	f, err := os.OpenFile(strings.TrimSpace(path.String()), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	defer f.Close()
	fd := strconv.Itoa(int(f.Fd()))
	defer applyEnv([]string{state.EnvRunFD + "=" + fd})()
	if rc := advance("--hold", fd); rc != 0 {
		return rc
	}
	for i := 0; i < maxRunSteps; i++ {
		if rc := advance(); rc != kcli.ExitMore {
			return rc
		}
	}
	fmt.Fprintf(stderr, "model: %s did not end after %d steps\n", name, maxRunSteps)
	return codeHung
}

// A run that has not ended after maxRunSteps calls of its loop hangs:
// codeHung, as a process killed by its time limit.
const (
	maxRunSteps = 400
	codeHung    = 124
)
