package e2e_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/stage"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
	"github.com/kubectl-bundle/kubectl-bundle/internal/testpkg"
)

// crashPackage derives a valid (unsigned) package big enough that a kill at a
// random instant usually lands mid-copy.
func crashPackage(t *testing.T) string {
	t.Helper()
	a, err := testpkg.ReadFile(repo("testdata/packages/unsigned/zarf-package-demo-amd64-1.0.0.tar.zst"))
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 48<<20)
	for i := range big {
		big[i] = byte(rand.Uint32())
	}
	a.Get("components/app.tar").Data = big
	if err := a.Rechecksum("components/app.tar"); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "zarf-package-demo-amd64-1.0.0.tar.zst")
	if err := a.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	return p
}

func runStage(t *testing.T, stateDir, pkg string, crashAt string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("kubectl-bundle-verify", "-q", "--stage", "--state-dir", stateDir, pkg, "--insecure-skip-signature")
	cmd.Env = append(os.Environ(), state.EnvCrashAt+"="+crashAt)
	return cmd
}

// checkStaged asserts the state dir invariant after any crash: every entry
// under packages/ is either a complete, verified package or an interrupted
// staging dir that the next run removes. It returns the complete ones.
func checkStaged(t *testing.T, stateDir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(stateDir, stage.PackagesDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var complete []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".staging-") {
			continue
		}
		dir := filepath.Join(stateDir, stage.PackagesDir, e.Name())
		files, err := os.ReadDir(dir)
		if err != nil || len(files) != 3 {
			t.Fatalf("%s: want exactly the archive, its .sha256 and verification.json, got %v (%v)", dir, files, err)
		}
		name := "zarf-package-demo-amd64-1.0.0.tar.zst"
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || testpkg.SHA256(b) != e.Name() {
			t.Fatalf("%s: staged archive does not hash to its directory name (%v)", dir, err)
		}
		side, err := os.ReadFile(filepath.Join(dir, name+".sha256"))
		if err != nil || string(side) != e.Name()+"  "+name+"\n" {
			t.Fatalf("%s: sidecar %q (%v)", dir, side, err)
		}
		var rec struct {
			Report struct {
				Verified bool `json:"verified"`
			} `json:"report"`
		}
		rb, err := os.ReadFile(filepath.Join(dir, "verification.json"))
		if err != nil || json.Unmarshal(rb, &rec) != nil || !rec.Report.Verified {
			t.Fatalf("%s: verification.json unreadable or not verified: %s (%v)", dir, rb, err)
		}
		complete = append(complete, e.Name())
	}
	return complete
}

func finishAndCheck(t *testing.T, stateDir, pkg string) {
	t.Helper()
	if out, err := runStage(t, stateDir, pkg, "").CombinedOutput(); err != nil {
		t.Fatalf("rerun after crash: %v\n%s", err, out)
	}
	if got := checkStaged(t, stateDir); len(got) != 1 {
		t.Fatalf("after the rerun: staged %v, want one package", got)
	}
	leftovers, _ := filepath.Glob(filepath.Join(stateDir, stage.PackagesDir, ".staging-*"))
	if len(leftovers) != 0 {
		t.Fatalf("rerun left interrupted staging dirs: %v", leftovers)
	}
	// The lock died with the killed process: nothing to clean up by hand.
	d, err := state.Open(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	l, err := d.Lock()
	if err != nil {
		t.Fatalf("lock not free after crash: %v", err)
	}
	l.Unlock()
}

func killed(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// TestStageCrashAtEveryWritePoint kills --stage with SIGKILL at each write
// point of the commit in turn: the state dir is always either without the
// package or with all of it, and a rerun completes.
func TestStageCrashAtEveryWritePoint(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("kubectl-bundle-verify"); err != nil {
		t.Fatal(err)
	}
	pkg := crashPackage(t)
	for _, point := range stage.CrashPoints {
		t.Run(point, func(t *testing.T) {
			stateDir := filepath.Join(t.TempDir(), "state")
			err := runStage(t, stateDir, pkg, point).Run()
			if !killed(err) {
				t.Fatalf("want the process killed at %s, got %v", point, err)
			}
			got := checkStaged(t, stateDir)
			if point == "stage:after-commit" && len(got) != 1 {
				t.Fatalf("killed after the commit rename: want the package staged, got %v", got)
			}
			if point != "stage:after-commit" && len(got) != 0 {
				t.Fatalf("killed at %s, before the commit: want nothing staged, got %v", point, got)
			}
			finishAndCheck(t, stateDir, pkg)
		})
	}
}

// TestStageCrashAtRandomInstants kills --stage at random moments.
func TestStageCrashAtRandomInstants(t *testing.T) {
	t.Parallel()
	pkg := crashPackage(t)
	killAtRandom(t, 20, func(dir string) *exec.Cmd { return runStage(t, dir, pkg, "") }, func(dir string, _ []byte) {
		checkStaged(t, dir)
		finishAndCheck(t, dir, pkg)
	})
}

// killAtRandom times one whole run of the command newCmd makes, then runs it
// again and again, killing it with SIGKILL at a random instant within that
// time, and hands the state dir and its stdout so far to check.
func killAtRandom(t *testing.T, runs int, newCmd func(stateDir string) *exec.Cmd, check func(stateDir string, stdout []byte)) {
	t.Helper()
	start := time.Now()
	if out, err := newCmd(filepath.Join(t.TempDir(), "state")).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	full := time.Since(start)
	if testing.Short() {
		runs /= 4
	}
	kills := 0
	for i := 0; i < runs; i++ {
		dir := filepath.Join(t.TempDir(), "state")
		cmd := newCmd(dir)
		var out bytes.Buffer
		cmd.Stdout = &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rand.Int64N(int64(full))))
		_ = cmd.Process.Signal(syscall.SIGKILL)
		if killed(cmd.Wait()) {
			kills++
		}
		check(dir, out.Bytes())
	}
	// Every run finishing before its kill would test no crash at all.
	if kills == 0 {
		t.Fatalf("none of the %d runs was killed before it finished: no crash was tested", runs)
	}
}
