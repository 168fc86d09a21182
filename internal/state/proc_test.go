package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// procargs2 builds a darwin kern.procargs2 buffer: argc, the executable's
// path, NUL padding, the arguments, the environment.
func procargs2(exe string, args []string, env ...string) []byte {
	b := []byte{byte(len(args)), 0, 0, 0}
	b = append(b, exe...)
	b = append(b, 0, 0, 0, 0)
	for _, a := range append(append([]string{}, args...), env...) {
		b = append(b, a...)
		b = append(b, 0)
	}
	return b
}

// The darwin answers (proc_darwin.go binds darwinProcs to sysctl and lsof),
// run on Linux with fakes of those calls.
func TestDarwinProcs(t *testing.T) {
	var lsofArgs []string
	d := darwinProcs{
		kinfo: func(pid int) (int64, int64, error) {
			if pid == 41 {
				return 1764755400, 123456, nil
			}
			return 0, 0, syscall.ESRCH
		},
		procargs: func(pid int) ([]byte, error) {
			if pid == 41 {
				return procargs2("/bin/sh", []string{"/bin/sh", "/opt/kb/blue-green.sh", "apply", "/p/v2.tar.zst"}, "HOME=/Users/op"), nil
			}
			return nil, syscall.EINVAL
		},
		lsof: func(args ...string) ([]byte, error) {
			lsofArgs = args
			return []byte("p41\ncsh\nf9\np77\nckubectl-bundle-\nf9\n"), nil
		},
	}
	if got := d.start(41); got != "1764755400.123456" {
		t.Errorf("start of a live pid: %q", got)
	}
	if got := d.start(42); got != "" {
		t.Errorf("start of a gone pid: %q", got)
	}
	if got := d.command(41); got != "/bin/sh /opt/kb/blue-green.sh apply /p/v2.tar.zst" {
		t.Errorf("command: %q (the environment must not be read)", got)
	}
	if got := d.command(42); got != "" {
		t.Errorf("command of a gone pid: %q", got)
	}
	o, ok := d.openers("/s/journal/run.lock", false)
	want := []Orphan{{PID: 41, Command: "/bin/sh /opt/kb/blue-green.sh apply /p/v2.tar.zst"}, {PID: 77, Command: "kubectl-bundle-"}}
	if !ok || !reflect.DeepEqual(o, want) {
		t.Errorf("openers: %+v, %v; want %+v", o, ok, want)
	}
	if strings.Join(lsofArgs, " ") != "-n -P -w -F pc -- /s/journal/run.lock" {
		t.Errorf("lsof ran with %q", lsofArgs)
	}
	// lsof exits 1 when nobody has the file open: an answer (none).
	d.lsof = func(...string) ([]byte, error) { return nil, exec.Command("false").Run() }
	if o, ok := d.openers("/s/journal/run.lock", false); !ok || o != nil {
		t.Errorf("nobody has it open: %+v, %v", o, ok)
	}
	// lsof missing: no answer.
	d.lsof = func(...string) ([]byte, error) { return nil, exec.ErrNotFound }
	if o, ok := d.openers("/s/journal/run.lock", false); ok || o != nil {
		t.Errorf("no lsof: %+v, %v", o, ok)
	}
	// A removed file has no name to ask lsof by.
	if _, ok := d.openers("/s/journal/run.lock", true); ok {
		t.Error("openers of a removed file answered on darwin")
	}
	for _, b := range [][]byte{nil, {1, 0}, {2, 0, 0, 0, 'x'}} {
		if got := parseProcArgs2(b); got != "" {
			t.Errorf("parseProcArgs2(%q) = %q", b, got)
		}
	}
}

// The darwin openers ask lsof: where lsof is installed (here, on Linux),
// the same code names a real process that holds a file open.
func TestLsofOpenersReal(t *testing.T) {
	if _, err := exec.LookPath("lsof"); err != nil {
		t.Skip("no lsof here")
	}
	p := filepath.Join(t.TempDir(), "run.lock")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("sh", "-c", `exec 9<>"$1"; echo ready; exec sleep 60`, "sh", p)
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	buf := make([]byte, 6)
	if _, err := out.Read(buf); err != nil {
		t.Fatal(err)
	}
	d := darwinProcs{lsof: runLsof, procargs: func(int) ([]byte, error) { return nil, syscall.EINVAL }}
	o, ok := d.openers(p, false)
	if !ok || len(o) != 1 || o[0].PID != holder.Process.Pid || o[0].Command != "sleep" {
		t.Fatalf("openers: %+v, %v; want pid %d (sleep)", o, ok, holder.Process.Pid)
	}
}

// The Linux answers from a proc root, and from none.
func TestLinuxProcs(t *testing.T) {
	l := linuxProcs{root: "/proc"}
	if l.start(os.Getpid()) == "" || l.start(os.Getpid()) != l.start(os.Getpid()) {
		t.Fatalf("start of this process: %q", l.start(os.Getpid()))
	}
	if !strings.Contains(l.command(os.Getpid()), filepath.Base(os.Args[0])) {
		t.Errorf("command: %q", l.command(os.Getpid()))
	}
	empty := linuxProcs{root: t.TempDir()}
	if empty.start(os.Getpid()) != "" || empty.command(os.Getpid()) != "" {
		t.Error("an empty proc root answered")
	}
	if o, ok := empty.openers("/x", false); ok || o != nil {
		t.Errorf("openers with an empty proc root: %+v, %v", o, ok)
	}
}

// A holder whose pid lives but started after the record was written is a
// process that reused the pid: the run is gone, and the refusal does not
// name that process as its holder.
func TestRunLockPidReused(t *testing.T) {
	t.Setenv(EnvRunFD, "")
	d, err := Open(filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	run := openRun(t, d)
	self := Holder{PID: os.Getpid(), Command: "/x/blue-green.sh apply /p.tar.zst", Start: procs.start(os.Getpid())}
	if self.Start == "" {
		t.Skip("this system tells no start time")
	}
	if err := d.HoldRun(int(run.Fd()), self); err != nil {
		t.Fatal(err)
	}
	if e, err := d.RunConflict(); err != nil || e == nil || e.Gone || !strings.Contains(e.Error(), "held for its whole run by pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("the live holder: %v, %v", e, err)
	}
	reused := self
	reused.Start = "1"
	if err := d.HoldRun(int(run.Fd()), reused); err != nil {
		t.Fatal(err)
	}
	e, err := d.RunConflict()
	if err != nil || e == nil || !e.Gone || strings.Contains(e.Error(), "held for its whole run by pid") {
		t.Fatalf("a reused pid named as the holder: %v, %v", e, err)
	}
	if !strings.Contains(e.Error(), "pid "+strconv.Itoa(os.Getpid())+" (/x/blue-green.sh apply /p.tar.zst) is gone") {
		t.Errorf("refusal: %v", e)
	}
}

// fakeRun is a strategy run as the lock sees it, made of real processes:
// a "script" (sh) that holds the run lock on its descriptor 9 and whose
// record names it, and a "plugin call" it started (flock(1) holding the
// step lock, with the run lock's descriptor inherited, running sleep),
// whose step lock record names it as journal run records itself.
type fakeRun struct {
	script, step int
	stepCommand  string
	cmd          *exec.Cmd
}

func startFakeRun(t *testing.T, d *Dir) *fakeRun {
	t.Helper()
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("no flock(1) here")
	}
	runLock, err := d.RunLockPath()
	if err != nil {
		t.Fatal(err)
	}
	stepLock := d.Join(StepLockFile)
	pidFile := filepath.Join(t.TempDir(), "step.pid")
	c := exec.Command("sh", "-c", `exec 9<>"$1"; flock -x 9; flock -x "$2" sleep 120 & echo $! >"$3"; wait`, "sh", runLock, stepLock, pidFile)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL); _ = c.Wait() })
	r := &fakeRun{script: c.Process.Pid, stepCommand: "kubectl-bundle-journal run PROVISIONED -- kubectl-bundle-slot deploy b sha256:1234", cmd: c}
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(pidFile)
		if r.step, _ = strconv.Atoi(strings.TrimSpace(string(b))); r.step > 0 {
			if h, _ := d.StepRunning(); h != nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the fake run did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The records the plugins write under the locks (lock-run, journal run).
	write := func(p string, h Holder) {
		b, _ := json.Marshal(h)
		if err := os.WriteFile(p, append(b, '\n'), FileMode); err != nil {
			t.Fatal(err)
		}
	}
	write(runLock, Holder{PID: r.script, Command: "/opt/kb/blue-green.sh apply /p/v2.tar.zst", Since: time.Now().UTC(), Start: procs.start(r.script)})
	write(stepLock, Holder{PID: r.step, Command: r.stepCommand, Since: time.Now().UTC(), Start: procs.start(r.step), Step: "T/PROVISIONED"})
	return r
}

// killScript kills the fake run's script alone, as `kill PID` does: the
// plugin call it started lives on and holds the lock.
func (r *fakeRun) killScript(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(r.script, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = r.cmd.Wait()
}

// probeResult is what a probe process says of the run (noProcProbe).
type probeResult struct {
	ProcReadable bool     `json:"procReadable"`
	Error        string   `json:"error"`
	Gone         bool     `json:"gone"`
	Orphans      []Orphan `json:"orphans"`
}

// TestMain lets this test binary be the probe: another process, run by
// probe below, that asks the state dir who holds the run.
func TestMain(m *testing.M) {
	if dir := os.Getenv("KB_STATE_PROBE"); dir != "" {
		os.Exit(probeMain(dir))
	}
	os.Exit(m.Run())
}

func probeMain(dir string) int {
	d, err := Open(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	_, perr := os.Stat("/proc/self/stat")
	r := probeResult{ProcReadable: perr == nil}
	e, err := d.RunConflict()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	if e != nil {
		r.Error, r.Gone, r.Orphans = e.Error(), e.Gone, e.Orphans
	}
	_ = json.NewEncoder(os.Stdout).Encode(r)
	return 0
}

// probe runs this test binary as another process that asks d who holds the
// run: with noProc, in a mount namespace of its own with an empty tmpfs on
// /proc, so that it cannot read /proc (as on a macOS host).
func probe(t *testing.T, d *Dir, noProc bool) probeResult {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var c *exec.Cmd
	if noProc {
		c = exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", `mount -t tmpfs none /proc && exec "$@"`, "sh", self)
	} else {
		c = exec.Command(self)
	}
	c.Env = append(os.Environ(), "KB_STATE_PROBE="+d.Path, EnvRunFD+"=")
	out, err := c.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("probe: %v: %s", err, ee.Stderr)
		}
		t.Fatalf("probe: %v", err)
	}
	var r probeResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("probe said %q: %v", out, err)
	}
	if noProc && r.ProcReadable {
		t.Fatal("the probe could read /proc")
	}
	return r
}

// A process that cannot read /proc (macOS has none; here a mount namespace
// with an empty /proc) names the run that holds the lock by pid and
// command, from the record written under the lock; and once the script is
// killed, the plugin call it started that still holds the lock, from the
// step lock's record, instead of the dead script.
func TestRunLockWithoutProc(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a mount namespace")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare here")
	}
	t.Setenv(EnvRunFD, "")
	d, err := Open(filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	r := startFakeRun(t, d)
	live := fmt.Sprintf("held for its whole run by pid %d (/opt/kb/blue-green.sh apply /p/v2.tar.zst)", r.script)
	for _, noProc := range []bool{false, true} {
		got := probe(t, d, noProc)
		if got.Gone || !strings.Contains(got.Error, live) {
			t.Fatalf("the live run (no /proc: %v): %+v", noProc, got)
		}
	}
	r.killScript(t)
	for _, noProc := range []bool{false, true} {
		got := probe(t, d, noProc)
		named := fmt.Sprintf("pid %d (%s)", r.step, r.stepCommand)
		if !noProc {
			named = fmt.Sprintf("pid %d (", r.step) // /proc names it by its own command line
		}
		if !got.Gone || strings.Contains(got.Error, "held for its whole run by pid") ||
			!strings.Contains(got.Error, fmt.Sprintf("the strategy run of pid %d (/opt/kb/blue-green.sh apply /p/v2.tar.zst) is gone", r.script)) ||
			!strings.Contains(got.Error, named) || !killsPID(got.Error, r.step) {
			t.Errorf("the script killed (no /proc: %v): %+v", noProc, got)
		}
	}
}

// killsPID reports whether the kill a refusal advises stops pid.
func killsPID(refusal string, pid int) bool {
	_, after, ok := strings.Cut(refusal, "stop it (kill ")
	list, _, _ := strings.Cut(after, ")")
	for _, f := range strings.Fields(list) {
		if f == strconv.Itoa(pid) {
			return ok
		}
	}
	return false
}

// Nothing at all names the processes that hold the lock (no /proc, no
// lsof, no step running): the refusal says the script is gone and how to
// find them, never that the dead script holds the run.
func TestRunLockGoneUnnamed(t *testing.T) {
	t.Setenv(EnvRunFD, "")
	saved := procs
	procs = noProcs{}
	t.Cleanup(func() { procs = saved })
	d, err := Open(filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	run := openRun(t, d)
	if err := d.HoldRun(int(run.Fd()), Holder{PID: dead.Process.Pid, Command: "/opt/kb/in-place.sh /p/v2.tar.zst"}); err != nil {
		t.Fatal(err)
	}
	// Another description holds it: the probe sees the lock held.
	e, err := d.RunConflict()
	if err != nil || e == nil || !e.Gone || len(e.Orphans) != 0 {
		t.Fatalf("conflict: %+v, %v", e, err)
	}
	lock := d.Join(RunLockFile)
	for what, s := range map[string]string{"Error": e.Error(), "Running": e.Running(), "Stop": e.Stop()} {
		if strings.Contains(s, "holds this run since") || strings.Contains(s, "held for its whole run by") || !strings.Contains(s, "lsof "+lock) {
			t.Errorf("%s: %s", what, s)
		}
	}
	if !strings.Contains(e.Error(), fmt.Sprintf("the strategy run of pid %d (/opt/kb/in-place.sh /p/v2.tar.zst) is gone", dead.Process.Pid)) {
		t.Errorf("Error: %s", e.Error())
	}
}

// orderProcs answers start tokens and openers from maps.
type orderProcs struct {
	noProcs
	starts map[int]string
	open   []Orphan
}

func (p orderProcs) start(pid int) string { return p.starts[pid] }
func (p orderProcs) openers(string, bool) ([]Orphan, bool) {
	return append([]Orphan(nil), p.open...), true
}

// The processes that hold a run are named oldest first: the script that
// took the run, then its plugin calls, whatever order the system listed
// them in (a /proc listing orders pids as text, 10004 before 9759; pids
// wrap). CI once saw "pid 10004 (kubectl-bundle-journal advance …), …,
// pid 9759 (dash blue-green.sh apply …) holds this run".
func TestRunHoldersOldestFirst(t *testing.T) {
	for name, c := range map[string]struct {
		starts map[int]string
		want   []int
	}{
		"linux ticks":          {map[int]string{9759: "500", 10004: "900", 10037: "1000"}, []int{9759, 10004, 10037}},
		"pids wrapped":         {map[int]string{9759: "900", 10004: "100", 10037: "1000"}, []int{10004, 9759, 10037}},
		"darwin sec.usec":      {map[int]string{9759: "7.12", 10004: "7.9", 10037: "6.999999"}, []int{10037, 10004, 9759}},
		"unknown start last":   {map[int]string{10037: "5"}, []int{10037, 9759, 10004}},
		"nothing known by pid": {nil, []int{9759, 10004, 10037}},
	} {
		t.Run(name, func(t *testing.T) {
			saved := procs
			procs = orderProcs{starts: c.starts, open: []Orphan{{PID: 10004}, {PID: 10037}, {PID: 9759}}}
			t.Cleanup(func() { procs = saved })
			for _, o := range [][]Orphan{lockOpeners("/x"), removedLockOpeners("/x")} {
				var got []int
				for _, x := range o {
					got = append(got, x.PID)
				}
				if fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Errorf("got %v, want %v", got, c.want)
				}
			}
		})
	}
}
