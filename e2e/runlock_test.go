package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// listenersKey keeps the listeners `listen` started, by variable, so that
// `listen close VAR` can stop one while a script runs.
type listenersKey struct{}

type listeners map[string]func()

func (l listeners) add(ts *testscript.TestScript, name string, stop func()) {
	l[name] = stop
	ts.Defer(stop)
}

// waitfor FILE REGEXP [SECONDS]: wait until FILE exists and matches REGEXP
// (default 60 seconds), e.g. until a script in the background has reached
// a point.
func cmdWaitfor(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: waitfor FILE REGEXP [SECONDS]")
	}
	re, err := regexp.Compile("(?m)" + args[1])
	ts.Check(err)
	limit := 60
	if len(args) == 3 {
		limit, err = strconv.Atoi(args[2])
		ts.Check(err)
	}
	deadline := time.Now().Add(time.Duration(limit) * time.Second)
	for {
		if b, err := os.ReadFile(ts.MkAbs(args[0])); err == nil && re.Match(b) {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waitfor: %s did not match %s within %ds", args[0], args[1], limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// killRunLeft kills what a strategy script that holds the run lock of the
// state dir under workDir left running when a script ends (it failed
// while a run was blocked): testscript waits for its background
// processes, and a blocked step would hold their output open for good.
// Only this test's descendants are killed.
func killRunLeft(workDir string) {
	pid := runHolder(filepath.Join(workDir, "state"))
	if pid <= 1 || !descends(pid, os.Getpid()) {
		return
	}
	killTree(pid)
}

// runHolder is the pid journal/run.lock names (0 when none).
func runHolder(stateDir string) int {
	var h struct {
		PID int `json:"pid"`
	}
	b, err := os.ReadFile(filepath.Join(stateDir, "journal", "run.lock"))
	if err != nil || json.Unmarshal(b, &h) != nil {
		return 0
	}
	return h.PID
}

// descends reports whether pid is a descendant of root.
func descends(pid, root int) bool {
	for p := pid; p > 1; p = ppid(p) {
		if p == root {
			return true
		}
	}
	return false
}

// killrun STATEDIR: SIGKILL the strategy script that holds the state dir's
// run lock (journal/run.lock names its pid) and every process it started,
// at once, as a power cut would; prints the pids it killed.
func cmdKillrun(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: killrun STATEDIR")
	}
	pid := runHolder(ts.MkAbs(args[0]))
	if pid <= 1 || !descends(pid, os.Getpid()) {
		ts.Fatalf("killrun: no live run of this script holds %s", args[0])
	}
	fmt.Fprintf(ts.Stdout(), "killed %s\n", strings.Join(killTree(pid), " "))
}

// killTree SIGKILLs root and its descendants and waits until they are
// dead; it returns their pids.
func killTree(root int) []string {
	// Stop the whole tree first (nothing forks or is reparented while it
	// is being collected), then kill it.
	stopped := map[int]bool{}
	for {
		tree := processTree(root)
		grew := false
		for _, p := range tree {
			if !stopped[p] {
				_ = syscall.Kill(p, syscall.SIGSTOP)
				stopped[p], grew = true, true
			}
		}
		if !grew {
			break
		}
	}
	var pids []string
	for p := range stopped {
		_ = syscall.Kill(p, syscall.SIGKILL)
		pids = append(pids, strconv.Itoa(p))
	}
	// Dead once /proc says so (a zombie is dead: its descriptors are closed).
	deadline := time.Now().Add(10 * time.Second)
	for p := range stopped {
		for alive(p) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	return pids
}

// processTree is root and its descendants, from /proc.
func processTree(root int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp := ppid(pid); pp > 0 {
			children[pp] = append(children[pp], pid)
		}
	}
	out := []int{root}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// ppid reads a process's parent from /proc/PID/stat (0 when gone).
func ppid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// alive: the process exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}
