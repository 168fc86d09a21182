package model_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kubectl-bundle/kubectl-bundle/internal/invariant"
)

// The model's operations are internal/invariant's (one line each,
// readable and replayable), every plugin command in-process, and one of
// its own:
//
//	cwd relative|absolute the state dir named relatively from another
//	                      directory (printed commands are pasted elsewhere), or back
//
// fakekill=STEP kills the command inside that step of the fakes (the
// process, and a journal run around it, abandon the step there); fail=
// makes the step fail. The strategy scripts are not run in-process:
// TestInvariant (e2e) runs them.

// drawOp draws one operation.
func drawOp(g *invariant.Gen) string {
	ops := append(g.PluginOps(16),
		invariant.WeightedOp{W: 1, F: func() string { return "cwd " + g.Pick("relative", "relative", "absolute") }})
	line := g.Weighted(ops)
	if invariant.IsCommand(line) {
		if g.Chance(0.1) {
			line = "fakekill=" + g.Pick(invariant.FakeKills...) + " " + line
		}
		if g.Chance(0.05) {
			line = "fail=" + g.Pick(invariant.FakeFails...) + " " + line
		}
	}
	return line
}

// Op runs the model's own operation: cwd.
func (m *machine) Op(r *invariant.Run, f []string) (bool, *invariant.Violation) {
	if f[0] != "cwd" {
		return false, nil
	}
	m.relative = f[1] == "relative"
	if m.relative {
		_ = os.Setenv("KUBECTL_BUNDLE_STATE_DIR", "state")
		_ = os.Chdir(m.root)
	} else {
		_ = os.Setenv("KUBECTL_BUNDLE_STATE_DIR", m.files.State())
		_ = os.Chdir(filepath.Join(m.root, "work"))
	}
	r.Logf("%s", strings.Join(f, " "))
	return true, nil
}

// Exec runs an operation's command in-process.
func (m *machine) Exec(r *invariant.Run, p invariant.Parsed, argv []string) (invariant.Result, *invariant.Violation) {
	res := m.run(argv, p.Env())
	if res.Killed {
		r.C.Kills["inside a step"]++
	}
	return res, nil
}

// pasteDir is where a printed command is run: another directory than the
// one the command that printed it ran in, while the state dir is named
// relatively (issue 32, class 4).
func (m *machine) pasteDir() string {
	if m.relative {
		return filepath.Join(m.root, "elsewhere")
	}
	return ""
}

// RunPrinted runs a printed command line as an operator pastes it (a
// chain "A && B" runs B only after A exits 0).
func (m *machine) RunPrinted(r *invariant.Run, what, line string) (invariant.Result, *invariant.Violation) {
	if i := strings.Index(line, "#"); i >= 0 {
		line = line[:i]
	}
	if first, rest, ok := strings.Cut(line, " && "); ok {
		res, v := m.RunPrinted(r, what, first)
		if v != nil || res.Code != 0 {
			if res.Code == 1 && strings.Contains(first, "bundle-gate") {
				// "gate && switch": the switch runs once the gate passes;
				// the gate failing is its verdict, not a failed repair.
				res.Code = invariant.CodeGateFails
			}
			return res, v
		}
		return m.RunPrinted(r, what, rest)
	}
	env, argv, err := invariant.SplitLine(line)
	if err != nil || len(argv) == 0 {
		return invariant.Result{Out: fmt.Sprint(err), Code: 2}, nil
	}
	if invariant.IsScript(argv) {
		// A strategy script: not run in-process (TestInvariant runs them).
		// It must run from anywhere: an absolute path, and the state dir
		// named when it is relative.
		r.C.Scripts++
		if !filepath.IsAbs(argv[0]) {
			return invariant.Result{}, r.Fail("I3", "a printed command names its script by a relative path: %s", line)
		}
		if m.relative && !strings.Contains(strings.Join(env, " "), "KUBECTL_BUNDLE_STATE_DIR=/") {
			if what == "next" {
				return invariant.Result{}, r.Fail("I3", "journal status's next command does not name the state dir, which is relative (pasted elsewhere it opens another): %s", line)
			}
			return invariant.Result{}, r.Fail("I3", "a printed command does not name the state dir, which is relative here (pasted elsewhere it opens another): %s", line)
		}
		return invariant.Result{Code: invariant.CodeNotRun}, nil
	}
	dir := m.pasteDir()
	if dir != "" {
		wd, _ := os.Getwd()
		_ = os.Chdir(dir)
		defer func() { _ = os.Chdir(wd) }()
	}
	res := m.run(argv, env)
	if dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "state")); err == nil {
			_ = os.RemoveAll(filepath.Join(dir, "state"))
			if what == "next" {
				return res, r.Fail("I3", "journal status's next command, pasted in another directory, opened another state dir (a relative state dir): %s", line)
			}
			return res, r.Fail("I3", "a printed command, pasted in another directory, opened another state dir (the state dir is relative here): %s", line)
		}
	}
	return res, nil
}
