// The end-to-end suite: testscript drives the real binaries (registered
// below), the real zarf from bin/testbin and the real kubectl against the
// packages in the repository's testdata/packages. The scripts are in
// testdata/script here; UPDATE=1 rewrites the golden files in them.
package e2e_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"k8s.io/client-go/rest"

	"github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/fakes"
	"github.com/kubectl-bundle/kubectl-bundle/internal/gatecmd"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journalcmd"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slotcmd"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
	"github.com/kubectl-bundle/kubectl-bundle/internal/switchcmd"
	"github.com/kubectl-bundle/kubectl-bundle/internal/testenv"
	"github.com/kubectl-bundle/kubectl-bundle/internal/verifycmd"
)

func TestMain(m *testing.M) {
	setParallel()
	// The suite starts some ten thousand short plugin processes (built by
	// withFakeProgs): with the default GOGC their package initialisation
	// runs the collector several times. At 400 a process uses about a
	// fifth less CPU (measured on copies of this binary: 70 ms against 55
	// ms per call).
	if _, ok := os.LookupEnv("GOGC"); !ok {
		os.Setenv("GOGC", "400")
	}
	// The tests skip the strategies' offline check (on by default at a
	// site) unless a test sets the check up itself: this machine's uplink
	// is not a site's, and every process the Go tests start inherits this.
	os.Setenv("SKIP_OFFLINE_CHECK", "1")
	// The plugins, the scripts' and the Go tests' alike, name the
	// checkout's scripts.
	if _, ok := os.LookupEnv(journal.EnvScriptsDir); !ok {
		os.Setenv(journal.EnvScriptsDir, repo("scripts"))
	}
	// The suite's demo packages are management-only (a ConfigMap): the
	// suite runs as a site with slotVariable: optional, unless a test or
	// script sets it (the S2 scripts set required).
	if _, ok := os.LookupEnv(slotVariableEnv); !ok {
		os.Setenv(slotVariableEnv, "optional")
	}
	verify := func() { os.Exit(verifycmd.Main(context.Background(), cli.OSStreams(), os.Args)) }
	journalMain := func() { os.Exit(journalcmd.Main(context.Background(), cli.OSStreams(), os.Args)) }
	switchMain := func() { os.Exit(switchcmd.Main(context.Background(), cli.OSStreams(), os.Args)) }
	gateMain := func() { os.Exit(gatecmd.Main(context.Background(), cli.OSStreams(), os.Args)) }
	// The slot binary with the in-process kind fake; docker and zarf are
	// the fake programs, found on PATH as the real ones would be.
	slotMain := func() {
		os.Exit(slotcmd.MainWith(context.Background(), cli.OSStreams(), os.Args,
			slotcmd.Deps{Kind: fakes.Kind{}, Probe: fakes.Probe, Sleep: func(time.Duration) {}}))
	}
	testscript.Main(withFakeProgs{m}, map[string]func(){
		"kubectl-bundle-verify":  verify,
		"kubectl-bundle_verify":  verify,
		"kubectl-bundle-journal": journalMain,
		"kubectl-bundle_journal": journalMain,
		"kubectl-bundle-gate":    gateMain,
		"kubectl-bundle_gate":    gateMain,
		"journal-script":         journalScript,
		"kubectl-bundle-switch":  switchMain,
		"kubectl-bundle_switch":  switchMain,
		"kubectl-bundle-slot":    slotMain,
		"kubectl-bundle_slot":    slotMain,
	})
}

// withFakeProgs runs the tests with the plugins and the fake docker and
// zarf on PATH as programs of their own, built once here (buildProgs).
// testscript.Main calls Run only in the test process, after it has put its
// copies of this binary on PATH; these come first. A plugin call then costs
// what a plugin binary costs to start, not what this binary does: this one
// links every plugin and the test harness, Cluster API's packages among
// them, whose package initialisation doubles a process's start-up, and the
// suite starts some twelve thousand plugin processes.
type withFakeProgs struct{ m *testing.M }

func (w withFakeProgs) Run() int {
	dir := os.Getenv(envProgs)
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "kb-e2e-progs-"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "docker")); err != nil {
		if err := buildProgs(dir); err != nil {
			fmt.Fprintln(os.Stderr, "building the plugins and the fake docker and zarf:", err)
			return 1
		}
	}
	os.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	if sh := os.Getenv(envShell); sh != "" {
		root, err := makeShellRoot(sh)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s=%s: %v\n", envShell, sh, err)
			return 1
		}
		defer os.RemoveAll(root)
		shellRoot = root
		os.Setenv(journal.EnvScriptsDir, repo("scripts"))
		fmt.Fprintf(os.Stderr, "the strategy scripts run under %s (%s)\n", sh, repo("scripts"))
	}
	return w.m.Run()
}

// envShell names the shell the strategy scripts run under in this suite
// (KB_E2E_SH=dash, KB_E2E_SH="bash --posix"): they are POSIX sh, and
// #!/bin/sh is bash 3.2 on macOS, dash on Debian. Unset, they run as
// shipped (#!/bin/sh).
const envShell = "KB_E2E_SH"

// shellRoot is, under KB_E2E_SH, a copy of the checkout's root whose
// scripts/ name that shell on their first line (the rest are links to
// the checkout's); "" otherwise.
var shellRoot string

// makeShellRoot builds shellRoot for the shell command sh.
func makeShellRoot(sh string) (string, error) {
	f := strings.Fields(sh)
	bin, err := exec.LookPath(f[0])
	if err != nil {
		return "", err
	}
	interp := strings.Join(append([]string{bin}, f[1:]...), " ")
	root, err := os.MkdirTemp("", "kb-e2e-sh-")
	if err != nil {
		return "", err
	}
	entries, err := os.ReadDir(testenv.RepoRoot())
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if e.Name() == "scripts" {
			continue
		}
		if err := os.Symlink(filepath.Join(testenv.RepoRoot(), e.Name()), filepath.Join(root, e.Name())); err != nil {
			return "", err
		}
	}
	src := filepath.Join(testenv.RepoRoot(), "scripts")
	dst := filepath.Join(root, "scripts")
	if err := os.Mkdir(dst, 0o755); err != nil {
		return "", err
	}
	files, err := os.ReadDir(src)
	if err != nil {
		return "", err
	}
	for _, e := range files {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return "", err
		}
		fi, err := e.Info()
		if err != nil {
			return "", err
		}
		if first, rest, ok := strings.Cut(string(b), "\n"); ok && first == "#!/bin/sh" {
			b = []byte("#!" + interp + "\n" + rest)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, fi.Mode().Perm()); err != nil {
			return "", err
		}
	}
	return root, nil
}

// suitePlugins are the plugins as the suite runs them: the shipped mains,
// but the slot plugin with the fake kind in-process (fakeslot).
var suitePlugins = map[string]string{
	"kubectl-bundle-verify":  "./cmd/kubectl-bundle-verify",
	"kubectl-bundle-journal": "./cmd/kubectl-bundle-journal",
	"kubectl-bundle-gate":    "./cmd/kubectl-bundle-gate",
	"kubectl-bundle-switch":  "./cmd/kubectl-bundle-switch",
	"kubectl-bundle-slot":    "./internal/fakes/fakeslot",
}

// envProgs names a directory that keeps the built programs between runs
// (built there when it has none): the benchmark's runs then measure the
// scripts, not the links.
const envProgs = "KB_E2E_PROGS"

// envPlugins=testbinary runs the plugins as copies of the test binary, as
// the suite did before buildProgs (hack/bench/e2e-plugins.sh's baseline).
const envPlugins = "KB_E2E_PLUGINS"

// buildProgs builds the plugins (and their kubectl-bundle_NAME links, as
// make install makes them) and fakeprog as docker, with zarf a link to it,
// into dir. The flags are make test's (CGO_ENABLED=0, -trimpath), so the
// packages come from the build cache; the links run in parallel.
func buildProgs(dir string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	plugins := suitePlugins
	if os.Getenv(envPlugins) == "testbinary" {
		plugins = nil // the baseline of hack/bench/e2e-plugins.sh
	}
	args := []string{"build", "-trimpath", "-o", dir + string(os.PathSeparator), "./internal/fakes/fakeprog"}
	for _, pkg := range plugins {
		args = append(args, pkg)
	}
	cmd := exec.Command(goBin, args...)
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	if err := os.Rename(filepath.Join(dir, "fakeprog"), filepath.Join(dir, "docker")); err != nil {
		return err
	}
	for name, pkg := range plugins {
		if built := filepath.Base(pkg); built != name {
			if err := os.Rename(filepath.Join(dir, built), filepath.Join(dir, name)); err != nil {
				return err
			}
		}
		if err := os.Symlink(name, filepath.Join(dir, strings.Replace(name, "kubectl-bundle-", "kubectl-bundle_", 1))); err != nil {
			return err
		}
	}
	return os.Symlink("docker", filepath.Join(dir, "zarf"))
}

// setParallel raises the number of tests and scripts that run at once to
// e2eParallel (or $KB_E2E_PARALLEL) unless -parallel is given. Most of an
// end-to-end test's time is spent waiting (for an API server to start, a
// gate's timeout, a killed process), so twice as many as there are CPUs
// keeps the CPUs busy: the go test default, GOMAXPROCS, leaves them
// half idle.
func setParallel() {
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(a, "-test.parallel") || strings.HasPrefix(a, "--test.parallel") {
			return
		}
	}
	n := max(e2eParallel, 2*runtime.GOMAXPROCS(0))
	if v, err := strconv.Atoi(os.Getenv("KB_E2E_PARALLEL")); err == nil && v > 0 {
		n = v
	}
	_ = flag.Set("test.parallel", strconv.Itoa(n))
}

// e2eParallel is the least number of tests run at once.
const e2eParallel = 4

// goEnv reads a go env setting so that scripts which build with the real
// toolchain share this run's caches instead of starting cold.
// repo is a path in the repository: scripts/, testdata/ (packages, keys,
// CRDs) and bin/testbin are shared with the other packages' tests and stay
// at the root; this folder holds only the end-to-end tests.
func repo(elem ...string) string {
	if shellRoot != "" && len(elem) > 0 && elem[0] == "scripts" {
		return filepath.Join(append([]string{shellRoot}, elem...)...)
	}
	return filepath.Join(append([]string{testenv.RepoRoot()}, elem...)...)
}

func goEnv(k string) string {
	out, err := exec.Command("go", "env", k).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// tool finds a real program the scripts need. Under CI=true a missing tool
// fails the run; elsewhere the scripts that need it are skipped.
func tool(t *testing.T, name, env string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	candidates := map[string]string{"zarf": repo("bin", "testbin", "zarf"), "kubectl": "/usr/bin/kubectl", "cosign": repo("bin", "testbin", "cosign")}
	if p := candidates[name]; p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is required under CI=true and was not found (run make testbin, or set %s)", name, env)
	}
	t.Logf("%s not found: scripts that need it are skipped", name)
	return ""
}

// slotVariableEnv is config.yaml's slotVariable as the plugins read it
// from the environment.
const slotVariableEnv = "KUBECTL_BUNDLE_SLOT_VARIABLE"

func TestScripts(t *testing.T) {
	zarf := tool(t, "zarf", "ZARF")
	kubectl := tool(t, "kubectl", "KUBECTL")
	cosign := tool(t, "cosign", "COSIGN")
	apiserver := testenv.Missing() == nil
	if !apiserver {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v: required under CI=true", testenv.Missing())
		}
		t.Logf("%v: scripts that need an API server are skipped", testenv.Missing())
	}
	root := repo()
	if shellRoot != "" {
		root = shellRoot
	}
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		UpdateScripts:       os.Getenv("UPDATE") != "",
		Setup: func(env *testscript.Env) error {
			env.Setenv("ROOT", root)
			for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOFLAGS", "GOPROXY", "GOTOOLCHAIN"} {
				if v := goEnv(k); v != "" {
					env.Setenv(k, v)
				}
			}
			env.Setenv("PKGS", filepath.Join(root, "testdata", "packages"))
			env.Setenv("KEYS", filepath.Join(root, "testdata", "keys"))
			env.Setenv("KUBECTL_BUNDLE_STATE_DIR", filepath.Join(env.WorkDir, "state"))
			env.Setenv("HOME", filepath.Join(env.WorkDir, "home"))
			env.Setenv("NO_COLOR", "1")
			// The plugins the scripts run are copies of this test binary,
			// which knows no checkout when built with -trimpath (make
			// test): name the checkout's scripts, as lib.sh does for the
			// plugins a strategy script runs. install.txtar unsets it to
			// see an installed plugin find the scripts beside itself.
			env.Setenv(journal.EnvScriptsDir, filepath.Join(root, "scripts"))
			env.Setenv(slotVariableEnv, "optional")
			// The strategy runs check that the site is offline by
			// default, waiting up to 900 s for the public registries to
			// stop answering: the tests skip that check, as a caller that
			// monitors egress does (this machine's uplink is not a
			// site's). The scripts that test the check unset it.
			env.Setenv("SKIP_OFFLINE_CHECK", "1")
			env.Setenv("OFFLINE_WAIT_SECONDS", "")
			env.Values[lockKey{}] = &heldLock{}
			env.Values[listenersKey{}] = listeners{}
			workDir := env.WorkDir
			env.Defer(func() { killRunLeft(workDir) })
			env.Values[serversKey{}] = &servers{cfgs: map[string]*rest.Config{}}
			m, err := fakes.NewMachine(filepath.Join(env.WorkDir, "fakes"))
			if err != nil {
				return err
			}
			env.Setenv(fakes.EnvDir, m.Dir)
			// A call the fakes do not imitate fails the script even when
			// the command under test ignored the error.
			env.Defer(func() {
				if r := m.Rejected(); len(r) > 0 {
					env.T().Fatal("the fakes rejected calls they do not imitate:\n" + strings.Join(r, "\n"))
				}
			})
			if zarf != "" {
				env.Setenv("ZARF", zarf)
			}
			if kubectl != "" {
				env.Setenv("KUBECTL", kubectl)
			}
			if cosign != "" {
				env.Setenv("COSIGN", cosign)
			}
			return nil
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "zarf":
				return zarf != "", nil
			case "kubectl":
				return kubectl != "", nil
			case "cosign":
				return cosign != "", nil
			case "apiserver":
				return apiserver, nil
			case "noproc":
				// A command can run where it cannot read /proc (as on a
				// macOS host): root, with unshare for a mount namespace
				// whose /proc is an empty tmpfs.
				_, err := exec.LookPath("unshare")
				return os.Geteuid() == 0 && err == nil, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode":  cmdExitcode,
			"lockstate": cmdLockstate,
			"randfile":  cmdRandfile,
			"treehash":  cmdTreehash,
			"cut":       cmdCut,
			"flipbyte":  cmdFlipbyte,
			"apiserver": cmdAPIServer,
			"sitesim":   cmdSitesim,
			"scrub":     cmdScrub,
			"listen":    cmdListen,
			"expand":    cmdExpand,
			"runbook":   cmdRunbook,
			"docsh":     cmdDocsh,
			"docblock":  cmdDocblock,
			"waitfor":   cmdWaitfor,
			"killrun":   cmdKillrun,
			"registry":  cmdRegistry,
		},
	})
}

// exitcode N PROG [ARGS...]: run PROG like exec and require exit code N;
// stdout and stderr are kept for the assertions that follow.
func cmdExitcode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exitcode N PROG [ARGS...]")
	}
	var want int
	_, err := fmt.Sscan(args[0], &want)
	ts.Check(err)
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("running %s: %v", args[1], err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

// lockstate DIR | lockstate -release: hold the state dir lock in the test
// process, as another kubectl-bundle command would, until released.
func cmdLockstate(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: lockstate DIR | lockstate -release")
	}
	if args[0] == "-release" {
		if l, ok := ts.Value(lockKey{}).(*heldLock); ok && l.l != nil {
			ts.Check(l.l.Unlock())
			l.l = nil
		}
		return
	}
	d, err := state.Open(ts.MkAbs(args[0]))
	ts.Check(err)
	l, err := d.Lock()
	ts.Check(err)
	h, _ := ts.Value(lockKey{}).(*heldLock)
	h.l = l
	ts.Defer(func() { l.Unlock() })
}

type lockKey struct{}

type heldLock struct{ l *state.Lock }

// treehash DIR: print every entry under DIR with its mode, and sha256 for
// files, one per line, sorted: two runs compare equal only when nothing
// under DIR changed.
func cmdTreehash(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: treehash DIR")
	}
	dir := ts.MkAbs(args[0])
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		sum := "-"
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s := sha256.Sum256(b)
			sum = hex.EncodeToString(s[:])
		}
		lines = append(lines, fmt.Sprintf("%s %s %s", fi.Mode(), sum, rel))
		return nil
	})
	ts.Check(err)
	sort.Strings(lines)
	fmt.Fprintln(ts.Stdout(), strings.Join(lines, "\n"))
}

// scrub REGEXP REPLACEMENT [REGEXP REPLACEMENT...]: the last command's
// stdout with what changes from run to run (times, digests of random data,
// free space) replaced, as this command's stdout, so that `cmp stdout
// golden` can follow and UPDATE=1 rewrite the golden file.
func cmdScrub(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 || len(args)%2 != 0 {
		ts.Fatalf("usage: scrub REGEXP REPLACEMENT [REGEXP REPLACEMENT...]")
	}
	out := ts.ReadFile("stdout")
	for i := 0; i < len(args); i += 2 {
		re, err := regexp.Compile("(?m)" + args[i])
		ts.Check(err)
		if !re.MatchString(out) {
			ts.Fatalf("scrub: %s matches nothing in stdout", args[i])
		}
		out = re.ReplaceAllString(out, args[i+1])
	}
	fmt.Fprint(ts.Stdout(), out)
}

// randfile FILE N: write N incompressible bytes to FILE.
func cmdRandfile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: randfile FILE N")
	}
	var n int
	_, err := fmt.Sscan(args[1], &n)
	ts.Check(err)
	b := make([]byte, n)
	_, _ = rand.Read(b)
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), b, 0o644))
}

// cut FILE N: truncate FILE to N bytes.
func cmdCut(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: cut FILE N")
	}
	var n int64
	_, err := fmt.Sscan(args[1], &n)
	ts.Check(err)
	ts.Check(os.Truncate(ts.MkAbs(args[0]), n))
}

// flipbyte FILE OFFSET: invert one byte of FILE in place.
func cmdFlipbyte(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: flipbyte FILE OFFSET")
	}
	var off int64
	_, err := fmt.Sscan(args[1], &off)
	ts.Check(err)
	f, err := os.OpenFile(ts.MkAbs(args[0]), os.O_RDWR, 0)
	ts.Check(err)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, off)
	ts.Check(err)
	b[0] ^= 0xff
	_, err = f.WriteAt(b, off)
	ts.Check(err)
}
