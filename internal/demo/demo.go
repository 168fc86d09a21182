// Package demo runs the blue/green flow on the real parts a machine
// without Docker has: local API servers as slots a and b (existing
// provider), packages built, signed and deployed by the real zarf, the
// built-in gate against statuses a simulated controller step writes, and
// the switch followed by the real kubectl. make demo and the end-to-end
// test both run it.
package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"k8s.io/client-go/rest"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/gate"
	"github.com/kubectl-bundle/kubectl-bundle/internal/runner"
	"github.com/kubectl-bundle/kubectl-bundle/internal/sitesim"
	"github.com/kubectl-bundle/kubectl-bundle/internal/testenv"
)

// Options configure a run.
type Options struct {
	// Root is the repository (scripts/, testdata/keys, testdata/crds).
	Root string
	// Path is prepended to PATH: where the plugins, the real zarf and
	// kubectl are found.
	Path []string
	// Work is a scratch directory (state dir, kubeconfig, packages).
	Work string
	Out  io.Writer
	// AllStrategies also runs in-place.sh and recreate.sh on the real
	// parts after the blue/green flow, and each strategy's --dry-run and
	// failed update (v3, which fails the gate) with its rollback (the
	// end-to-end test does).
	AllStrategies bool
	// Shown receives, by name, the output of each run docs/runs.md shows,
	// as the operator saw it (the "$ command" line first); nil keeps none.
	Shown func(name string, run ShownRun)
}

// ShownRun is one run docs/runs.md shows: Merged is its output as the
// operator saw it (the "$ command" line, then both streams, line by line,
// as they came), Stdout and Stderr each stream alone, in its own order
// (how the two interleave can differ from one run to the next).
type ShownRun struct{ Merged, Stdout, Stderr string }

// lineTee passes what it is given on, keeps it, and adds each whole line
// to a merged buffer shared with the other stream's lineTee.
type lineTee struct {
	mu      *sync.Mutex
	merged  *bytes.Buffer
	own     bytes.Buffer
	pass    io.Writer
	pending []byte
}

func (w *lineTee) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = w.pass.Write(p)
	w.own.Write(p)
	w.pending = append(w.pending, p...)
	if i := bytes.LastIndexByte(w.pending, '\n'); i >= 0 {
		w.merged.Write(w.pending[:i+1])
		w.pending = append([]byte(nil), w.pending[i+1:]...)
	}
	return len(p), nil
}

func (w *lineTee) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.merged.Write(w.pending)
	w.pending = nil
}

type run struct {
	o   Options
	env []string
}

func (r *run) say(format string, args ...any) {
	if kcli.UseColor(r.o.Out) {
		fmt.Fprintf(r.o.Out, "\n\033[1m### "+format+"\033[0m\n", args...)
		return
	}
	fmt.Fprintf(r.o.Out, "\n### "+format+"\n", args...)
}

// sh runs one command with its output shown, as the operator would type it.
func (r *run) sh(ctx context.Context, name string, args ...string) error {
	return r.shExit(ctx, 0, name, args...)
}

// show runs one command as sh does, ending with exit code want, and hands
// its output to Options.Shown as the run docs/runs.md shows under title.
func (r *run) show(ctx context.Context, title string, want int, name string, args ...string) error {
	var mu sync.Mutex
	var merged bytes.Buffer
	fmt.Fprintf(&merged, "$ %s %s\n", name, strings.Join(args, " "))
	so := &lineTee{mu: &mu, merged: &merged, pass: r.o.Out}
	se := &lineTee{mu: &mu, merged: &merged, pass: r.o.Out}
	err := r.run(ctx, want, so, se, name, args...)
	so.flush()
	se.flush()
	if r.o.Shown != nil {
		r.o.Shown(title, ShownRun{Merged: merged.String(), Stdout: so.own.String(), Stderr: se.own.String()})
	}
	return err
}

// shExit runs one command as sh does; it must end with exit code want.
func (r *run) shExit(ctx context.Context, want int, name string, args ...string) error {
	return r.run(ctx, want, r.o.Out, r.o.Out, name, args...)
}

// run prints the command line, then runs it with its streams on stdout and
// stderr; it must end with exit code want.
func (r *run) run(ctx context.Context, want int, stdout, stderr io.Writer, name string, args ...string) error {
	fmt.Fprintf(r.o.Out, "$ %s %s\n", name, strings.Join(args, " "))
	// Resolved here: the child's PATH does not decide which program starts.
	for _, dir := range r.o.Path {
		if p := filepath.Join(dir, name); !strings.Contains(name, "/") && isExec(p) {
			name = p
			break
		}
	}
	code, err := runner.Exec{Env: r.env, Dir: r.o.Work}.RunAttached(ctx, nil, stdout, stderr, name, args...)
	if err != nil {
		return err
	}
	if code != want {
		return fmt.Errorf("%s %s exited %d, not %d", name, strings.Join(args, " "), code, want)
	}
	return nil
}

// Run runs the demo: v1 into slot a, blue-green apply of v2 into slot b,
// the switch, then revert. It stops the API servers before it returns.
func Run(ctx context.Context, o Options) (err error) {
	if e := testenv.Missing(); e != nil {
		return e
	}
	r := &run{o: o}
	kubeconfig := filepath.Join(o.Work, "kubeconfig")
	r.env = []string{
		"PATH=" + strings.Join(append(append([]string{}, o.Path...), os.Getenv("PATH")), string(os.PathListSeparator)),
		"KUBECONFIG=" + kubeconfig,
		"KUBECTL_BUNDLE_STATE_DIR=" + filepath.Join(o.Work, "state"),
		"ZARF_VERIFY_KEY=" + filepath.Join(o.Root, "testdata", "keys", "cosign.pub"),
		"NO_COLOR=1",
		// The strategy scripts check that the site is offline before
		// they change anything (on by default): skipped here, and said.
		"SKIP_OFFLINE_CHECK=1",
	}
	fmt.Fprintln(o.Out, "demo: the offline check is skipped (SKIP_OFFLINE_CHECK=1): this machine's uplink is not the site's")

	r.say("starting four local API servers: the management clusters of slots a and b, and a CAPD workload cluster for each")
	crds := filepath.Join(o.Root, "testdata", "crds")
	cfgs := map[string]*rest.Config{}
	for _, name := range []string{"site-a", "site-a-wl", "site-b", "site-b-wl"} {
		cfg, stop, e := testenv.StartServer(crds)
		if e != nil {
			return e
		}
		defer func() { err = errors.Join(err, stop()) }()
		cfgs[name] = cfg
		fmt.Fprintf(o.Out, "%s: %s\n", name, cfg.Host)
	}
	kc, err := testenv.Kubeconfigs(map[string]*rest.Config{"site-a": cfgs["site-a"], "site-b": cfgs["site-b"]})
	if err != nil {
		return err
	}
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return err
	}
	r.say("simulated controllers: Flux, Cluster API, kubelet and Zarf statuses of a healthy site, in both slots")
	for _, s := range []string{"a", "b"} {
		// S2: each slot's workload cluster is named after its slot, as the
		// package names it (airgap-wl-###ZARF_VAR_SLOT###).
		if err := sitesim.Healthy(ctx, cfgs["site-"+s], cfgs["site-"+s+"-wl"], sitesim.Site{WorkloadCluster: "airgap-wl-" + s}); err != nil {
			return err
		}
	}
	if err := r.files(); err != nil {
		return err
	}
	key := filepath.Join(o.Root, "testdata", "keys", "cosign.key")
	r.say("building and signing v1 and v2 of the site package with the real zarf")
	versions := []string{"v1", "v2"}
	if o.AllStrategies {
		versions = append(versions, "v3")
	}
	for _, v := range versions {
		if err := r.sh(ctx, "zarf", "package", "create", filepath.Join(o.Work, "src-"+v), "--confirm", "--signing-key", key,
			"--signing-key-pass", "testpass", "-o", o.Work, "--skip-sbom", "--no-color", "--log-level", "warn"); err != nil {
			return err
		}
	}
	v1 := filepath.Join(o.Work, "zarf-package-site-amd64-1.0.0.tar.zst")
	v2 := filepath.Join(o.Work, "zarf-package-site-amd64-2.0.0.tar.zst")
	pub := filepath.Join(o.Root, "testdata", "keys", "cosign.pub")
	gateFile := filepath.Join(o.Work, "gate.yaml")

	r.say("today's site: v1 in slot a, gated, active")
	for _, c := range [][]string{
		{"kubectl-bundle-slot", "create", "a"},
		{"kubectl-bundle-verify", "--stage", v1, "--key", pub},
		{"kubectl-bundle-slot", "deploy", "a", v1, "--key", pub},
		{"kubectl-bundle-gate", "--slot", "a", "--record", "-f", gateFile, "--timeout", "1m"},
		{"kubectl-bundle-switch", "to", "a"},
		{"kubectl", "--context", "kind-airgap-mgmt", "get", "configmap", "marker", "-n", "site", "-o", "jsonpath={.data.version}{\"\\n\"}"},
	} {
		if err := r.sh(ctx, c[0], c[1:]...); err != nil {
			return err
		}
	}
	bg := filepath.Join(o.Root, "scripts", "blue-green.sh")
	r.say("is v2 fit for blue/green (S2)? every name it puts on the shared Docker daemon or network is derived from SLOT")
	if err := r.sh(ctx, "kubectl-bundle-slot", "preflight", "b", "--package", v2, "--blue-green"); err != nil {
		return err
	}
	if o.AllStrategies {
		r.say("what blue-green.sh apply v2 would do here, without doing it")
		if err := r.show(ctx, "blue-green-dry-run", 0, bg, "apply", "--dry-run", v2, "--gate", gateFile); err != nil {
			return err
		}
	}
	r.say("the update: blue-green.sh apply v2 (slot b is built, deployed, gated, switched to; slot a is not touched)")
	if err := r.show(ctx, "blue-green-apply", 0, bg, "apply", v2, "--gate", gateFile, "--log", filepath.Join(o.Work, "blue-green.log")); err != nil {
		return err
	}
	r.say("the operators' names follow the switch")
	for _, c := range [][]string{
		{"kubectl", "--context", "kind-airgap-mgmt", "get", "configmap", "marker", "-n", "site", "-o", "jsonpath={.data.version}{\"\\n\"}"},
		{"kubectl-bundle-switch", "status"},
		{"kubectl-bundle-slot", "list"},
	} {
		if err := r.sh(ctx, c[0], c[1:]...); err != nil {
			return err
		}
	}
	r.say("the whole site while slot b soaks")
	if err := r.show(ctx, "blue-green-soaking-site", 0, "kubectl-bundle-journal", "site"); err != nil {
		return err
	}
	r.say("a regression found while soaking: revert")
	if err := r.show(ctx, "blue-green-revert", 0, bg, "revert"); err != nil {
		return err
	}
	for _, c := range [][]string{
		{"kubectl", "--context", "kind-airgap-mgmt", "get", "configmap", "marker", "-n", "site", "-o", "jsonpath={.data.version}{\"\\n\"}"},
		{"kubectl-bundle-switch", "status"},
		{"kubectl-bundle-journal", "log"},
	} {
		if err := r.sh(ctx, c[0], c[1:]...); err != nil {
			return err
		}
	}
	if o.AllStrategies {
		if err := r.allStrategies(ctx, gateFile, v1, v2, filepath.Join(o.Work, "zarf-package-site-amd64-3.0.0.tar.zst")); err != nil {
			return err
		}
	}
	r.say("done: stopping the API servers")
	return nil
}

// allStrategies: a bad release (v3, whose marker says it is not healthy,
// which the gate's site-marker check fails) rolled back by blue-green,
// then in-place.sh and recreate.sh, each planned, run, and failing with v3.
func (r *run) allStrategies(ctx context.Context, gateFile, v1, v2, v3 string) error {
	marker := []string{"kubectl", "--context", "kind-airgap-mgmt", "get", "configmap", "marker", "-n", "site", "-o", "jsonpath={.data.version}{\"\\n\"}"}
	bg := filepath.Join(r.o.Root, "scripts", "blue-green.sh")
	ip := filepath.Join(r.o.Root, "scripts", "in-place.sh")
	rc := filepath.Join(r.o.Root, "scripts", "recreate.sh")
	// 10s: the site-marker check cannot pass; the others pass at once
	// (10s, not less: a loaded machine must not fail them too).
	type step struct {
		title string // "": not shown in docs/runs.md
		exit  int
		cmd   []string
	}
	for _, part := range []struct {
		say   string
		steps []step
	}{
		{"a bad release: blue-green.sh apply v3, which fails its gate in slot b; slot b is destroyed and slot a never stopped serving v1", []step{
			{"blue-green-failed", 1, []string{bg, "apply", v3, "--gate", gateFile, "--gate-timeout", "10s"}},
			{"", 0, marker},
		}},
		{"in-place.sh: v2 into the active slot a, a bad release restored, then a regression rolled back by deploying v1 in place", []step{
			{"in-place-dry-run", 0, []string{ip, "--dry-run", v2, "--gate", gateFile}},
			{"in-place-apply", 0, []string{ip, v2, "--gate", gateFile}},
			{"", 0, marker},
			{"in-place-failed", 1, []string{ip, v3, "--gate", gateFile, "--gate-timeout", "10s"}},
			{"", 0, marker},
			{"", 0, []string{ip, v1, "--gate", gateFile}},
			{"", 0, marker},
		}},
		{"recreate.sh: slot a rebuilt with v2, then a bad release rebuilt with v2 again", []step{
			{"recreate-dry-run", 0, []string{rc, "--dry-run", v2, "--gate", gateFile}},
			{"recreate-apply", 0, []string{rc, v2, "--gate", gateFile}},
			{"", 0, marker},
			{"recreate-failed", 1, []string{rc, v3, "--gate", gateFile, "--gate-timeout", "10s"}},
			{"", 0, marker},
		}},
	} {
		r.say("%s", part.say)
		for _, st := range part.steps {
			var err error
			if st.title == "" {
				err = r.shExit(ctx, st.exit, st.cmd[0], st.cmd[1:]...)
			} else {
				err = r.show(ctx, st.title, st.exit, st.cmd[0], st.cmd[1:]...)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// files writes the slot config, the gate and the two package sources.
func (r *run) files() error {
	defaultGate := strings.Replace(string(gate.DefaultYAML()), "useDockerPort: true", "useDockerPort: false # no Docker here: the secret's server is reachable", 1) +
		`  # the demo's own check: the release's marker says it is healthy (v3's does not)
  - name: site-marker
    field:
      apiVersion: v1
      kind: ConfigMap
      namespace: site
      name: marker
      path: "{.data.healthy}"
      equals: "yes"
`
	files := map[string]string{
		"state/config.yaml": `kind: Config
provider: existing
existing:
  a: {context: site-a}
  b: {context: site-b}
`,
		"gate.yaml": defaultGate,
	}
	for _, v := range []string{"1", "2", "3"} {
		files["src-v"+v+"/zarf.yaml"] = fmt.Sprintf(`kind: ZarfPackageConfig
metadata:
  name: site
  version: %s.0.0
  yolo: true
variables:
  - name: SLOT
    default: none
components:
  - name: config
    required: true
    manifests:
      - name: config
        namespace: site
        files: [marker.yaml]
`, v)
		files["src-v"+v+"/marker.yaml"] = fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: marker
data:
  version: "v%s in slot ###ZARF_VAR_SLOT###"
  healthy: "%s"
`, v, map[bool]string{true: "no", false: "yes"}[v == "3"])
	}
	for name, content := range files {
		p := filepath.Join(r.o.Work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			return err
		}
	}
	return nil
}
