package e2e_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/invariant"
)

// TestInvariant's operations are internal/invariant's (one line each,
// readable and replayable), every command a process of its own, and the
// three strategy scripts:
//
//	[kill=DUR] [killafter=N] [fakekill=STEP] [fail=STEP] PROGRAM ARGS...
//
// PROGRAM is a kubectl-bundle-* plugin or blue-green.sh, in-place.sh,
// recreate.sh. kill= SIGKILLs the process group that long after the
// start, killafter= has a script kill itself after its N-th plugin call,
// fakekill= kills the command inside that step of the fakes, fail= makes
// that step of the fakes fail ($FAKE_FAIL).

// drawOp draws one operation.
func drawOp(g *invariant.Gen) string {
	ops := append(g.PluginOps(3), g.ScriptOps(1)...)
	line := g.Weighted(ops)
	if invariant.IsCommand(line) {
		script := strings.HasSuffix(strings.Fields(line)[0], ".sh")
		switch {
		case script && g.Chance(0.15):
			line = fmt.Sprintf("killafter=%d %s", 1+g.R.IntN(9), line)
		case g.Chance(0.12):
			max := 150
			if script {
				max = 2500
			}
			line = fmt.Sprintf("kill=%dms %s", g.R.IntN(max), line)
		}
		if !strings.HasPrefix(line, "kill") && g.Chance(0.1) {
			line = "fakekill=" + g.Pick(slices.Concat(invariant.FakeKills, []string{"docker-network@2"})...) + " " + line
		}
		if g.Chance(0.06) {
			line = "fail=" + g.Pick(invariant.FakeFails...) + " " + line
		}
	}
	return line
}

// Expand replaces the placeholders of an operation with the site's files
// and names a strategy script by its path.
func (q *seqSite) Expand(argv []string) []string {
	rep := invariant.Placeholders(q.root, repo())
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = rep.Replace(a)
	}
	if invariant.IsScript(out) {
		out[0] = repo("scripts", out[0])
	}
	return out
}

// Exec runs an operation's command as a process, timed.
func (q *seqSite) Exec(r *invariant.Run, p invariant.Parsed, argv []string) (invariant.Result, *invariant.Violation) {
	res := q.exec(argv, "", p.Env(), p.Kill, 2*time.Minute)
	kind := filepath.Base(argv[0])
	if len(argv) > 1 && !strings.HasPrefix(argv[1], "-") && !strings.HasPrefix(argv[1], "/") {
		kind += " " + argv[1]
	}
	q.inv.took[kind] += res.Took
	q.inv.count[kind]++
	if res.Killed {
		kind := "random instant"
		switch {
		case p.KillAfter > 0:
			kind = "after a plugin call"
		case p.FakeKill != "" && strings.Contains(res.Out+q.calls(), "FAKE_KILL"):
			kind = "inside a step"
		}
		r.C.Kills[kind]++
	}
	if res.Code == 124 {
		return res, r.Fail("I3", "%s hung:\n%s", strings.Join(argv, " "), invariant.Tail(res.Out))
	}
	return res, nil
}

// RunPrinted runs a printed command line through bash from the
// repository's root, as an operator pastes it.
func (q *seqSite) RunPrinted(_ *invariant.Run, _, line string) (invariant.Result, *invariant.Violation) {
	return q.exec(nil, line, nil, 0, 2*time.Minute), nil
}

// Op: TestInvariant has no operation of its own.
func (q *seqSite) Op(*invariant.Run, []string) (bool, *invariant.Violation) { return false, nil }
