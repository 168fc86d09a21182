package e2e_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// An operation of TestInvariant is one line, readable and replayable:
//
//	[kill=DUR] [killafter=N] [fail=STEP] PROGRAM ARGS...   a plugin or a strategy script
//	next                          the next command kubectl-bundle-journal status prints, run verbatim
//	repair                        the command the last error printed, run verbatim
//	health SLOT ok|broken         slot SLOT's workload heals or breaks (its gate passes or fails)
//	damage FILE KIND              damage a state file (see damageKinds)
//
// PROGRAM is a kubectl-bundle-* plugin or blue-green.sh, in-place.sh,
// recreate.sh; $V1, $V2 (packages), $GATE, $GATEFAIL (gates) and $KEY
// stand for the site's files. kill= SIGKILLs the process group that long
// after the start, killafter= has a script kill itself after its N-th
// plugin call, fail= makes that step of the fakes fail ($FAKE_FAIL).

// damageKinds: what can be done to each state file.
var damageKinds = map[string][]string{
	"active":      {"empty", "dir", "symlink", "twolines", "zz", "delete"},
	"slots":       {"delete"},
	"switch":      {"truncate", "empty", "dir"},
	"slot-a":      {"truncate", "empty", "dir", "symlink"},
	"slot-b":      {"truncate", "empty", "dir", "symlink"},
	"transaction": {"truncate", "empty", "delete"},
	"history":     {"truncate", "empty"},
}

// damageFile is the file a damage target names.
func (q *seqSite) damageFile(target string) string {
	switch target {
	case "active":
		return q.state("active")
	case "switch":
		return q.state("switch.json")
	case "transaction":
		return q.state("journal", "transaction.json")
	case "slots":
		return q.state("slots")
	case "history":
		return q.state("journal", "history.jsonl")
	}
	return q.state("slots", strings.TrimPrefix(target, "slot-")+".json")
}

// damage does KIND to the file; it reports false when there was nothing
// to damage (the file does not exist).
func (q *seqSite) damage(target, kind string) (bool, error) {
	p := q.damageFile(target)
	fi, err := os.Lstat(p)
	if target == "slots" && err == nil && fi.IsDir() {
		// rm -rf <state>/slots: every record removed from outside while
		// the slots run.
		return true, os.RemoveAll(p)
	}
	if err != nil || !fi.Mode().IsRegular() {
		return false, nil
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return false, err
	}
	write := func(s string) error { return os.WriteFile(p, []byte(s), 0o600) }
	switch kind {
	case "empty":
		err = write("")
	case "truncate":
		err = write(string(b[:len(b)/2]))
	case "twolines":
		err = write("a\nb\n")
	case "zz":
		err = write("zz\n")
	case "delete":
		// Removed from outside: damage while the history shows the
		// transaction open (stillDamaged).
		err = os.Remove(p)
	case "dir":
		if err = os.Remove(p); err == nil {
			err = os.Mkdir(p, 0o700)
		}
	case "symlink":
		// A link to a copy of the same content outside the state dir: it
		// reads back well, but a state file is never a link.
		outside := filepath.Join(q.root, "outside", filepath.Base(p))
		if err = os.MkdirAll(filepath.Dir(outside), 0o700); err == nil {
			if err = os.WriteFile(outside, b, 0o600); err == nil {
				if err = os.Remove(p); err == nil {
					err = os.Symlink(outside, p)
				}
			}
		}
	default:
		return false, fmt.Errorf("unknown damage %q", kind)
	}
	return err == nil, err
}

// gen draws operations.
type gen struct {
	r *rand.Rand
}

func (g *gen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

// weighted picks a key of w with probability proportional to its value.
func (g *gen) weighted(w []weightedOp) func() string {
	total := 0
	for _, x := range w {
		total += x.w
	}
	n := g.r.IntN(total)
	for _, x := range w {
		if n < x.w {
			return x.f
		}
		n -= x.w
	}
	return w[0].f
}

type weightedOp struct {
	w int
	f func() string
}

func (g *gen) slot() string { return g.pick("a", "b") }

// target is the slot a command changes: more often a, the slot that is
// active (then, after a switch, the revert target) when a sequence starts.
func (g *gen) target() string {
	if g.chance(0.65) {
		return "a"
	}
	return "b"
}
func (g *gen) pkg() string { return g.pick("$V1", "$V2", "$V2") }
func (g *gen) force() string {
	if g.chance(0.12) {
		return " --force"
	}
	return ""
}
func (g *gen) gate() string {
	if g.chance(0.3) {
		return " --gate $GATEFAIL --gate-timeout 200ms"
	}
	return " --gate $GATE --gate-timeout 1s"
}

// op draws one operation.
func (g *gen) op() string {
	ops := []weightedOp{
		{4, func() string { return "kubectl-bundle-slot create " + g.target() + g.force() }},
		{4, func() string { return "kubectl-bundle-slot deploy " + g.target() + " " + g.pkg() + g.force() }},
		{6, func() string { return "kubectl-bundle-slot destroy " + g.target() + g.force() }},
		{1, func() string { return "kubectl-bundle-slot repair " + g.slot() }},
		{5, func() string { return "kubectl-bundle-switch to " + g.slot() + g.force() }},
		{3, func() string { return "kubectl-bundle-switch back" }},
		{3, func() string { return "kubectl-bundle-switch accept" + g.pick("", " --if-soaked") }},
		{3, func() string {
			st := g.pick("in-place", "recreate", "blue-green")
			a := g.slot()
			s := "kubectl-bundle-journal begin --strategy " + st + " --package " + g.pkg()
			if st == "blue-green" || g.chance(0.7) {
				s += " --active " + a
			}
			if st == "blue-green" {
				s += " --candidate " + map[string]string{"a": "b", "b": "a"}[a]
			}
			return s
		}},
		{2, func() string { return "kubectl-bundle-journal abort" }},
		{2, func() string { return "kubectl-bundle-journal end" }},
		{3, func() string {
			// A step with the command its strategy runs for it (a step
			// run with "true" would forge its outcome).
			sl := g.slot()
			steps := [][2]string{
				{"VERIFIED", "kubectl-bundle-verify --stage -q " + g.pkg() + " --key $KEY"},
				{"PROVISIONING", "kubectl-bundle-slot create " + sl},
				{"PROVISIONED", "kubectl-bundle-slot deploy " + sl + " " + g.pkg()},
				{"DEPLOYING", "kubectl-bundle-slot deploy " + sl + " " + g.pkg()},
				{"TEARDOWN", "kubectl-bundle-slot destroy " + sl},
				{"HEALTHY", "kubectl-bundle-gate --slot " + sl + " --record -f $GATE --timeout 400ms"},
				{"COMMITTED", "true"},
				{"DESTROYING", "kubectl-bundle-slot destroy " + sl},
				{"RETIRED", "kubectl-bundle-slot destroy " + sl},
			}
			st := steps[g.r.IntN(len(steps))]
			return "kubectl-bundle-journal run " + st[0] + " -- " + st[1]
		}},
		{4, func() string {
			return "kubectl-bundle-gate --slot " + g.slot() + " --record -f " + g.pick("$GATE", "$GATE", "$GATEFAIL") + " --timeout 200ms"
		}},
		{2, func() string { return "kubectl-bundle-verify --stage -q " + g.pkg() + " --key $KEY" }},
		{12, func() string { return "blue-green.sh apply " + g.pkg() + g.gate() }},
		{5, func() string { return "blue-green.sh accept" }},
		{4, func() string { return "blue-green.sh revert" }},
		{1, func() string { return "blue-green.sh status" }},
		{7, func() string { return "in-place.sh " + g.pkg() + g.gate() }},
		{7, func() string { return "recreate.sh " + g.pkg() + g.gate() }},
		{6, func() string { return "next" }},
		{4, func() string { return "repair" }},
		{5, func() string { return "health " + g.slot() + " " + g.pick("ok", "broken") }},
		{5, func() string {
			targets := []string{"active", "switch", "slot-a", "slot-b", "transaction", "history", "slots"}
			t := g.pick(targets...)
			return "damage " + t + " " + g.pick(damageKinds[t]...)
		}},
	}
	line := g.weighted(ops)()
	if isCommand(line) {
		script := strings.HasSuffix(strings.Fields(line)[0], ".sh")
		switch {
		case script && g.chance(0.15):
			line = fmt.Sprintf("killafter=%d %s", 1+g.r.IntN(9), line)
		case g.chance(0.12):
			max := 150
			if script {
				max = 2500
			}
			line = fmt.Sprintf("kill=%dms %s", g.r.IntN(max), line)
		}
		if !strings.HasPrefix(line, "kill") && g.chance(0.1) {
			line = "fakekill=" + g.pick("docker-run", "docker-rm", "docker-network", "docker-network@2", "zarf-init", "zarf-deploy", "kind-create", "kind-delete") + " " + line
		}
		if g.chance(0.06) {
			line = "fail=" + g.pick("zarf-deploy", "kind-create", "kind-delete", "zarf-init") + " " + line
		}
	}
	return line
}

func isCommand(line string) bool {
	f := strings.Fields(line)
	return len(f) > 0 && f[0] != "next" && f[0] != "repair" && f[0] != "health" && f[0] != "damage"
}

// parsed is an operation line taken apart.
type parsed struct {
	kill      time.Duration
	killAfter int
	fail      string
	fakeKill  string
	argv      []string
}

func parseOp(line string) (parsed, error) {
	var p parsed
	f := strings.Fields(line)
	for len(f) > 0 {
		k, v, ok := strings.Cut(f[0], "=")
		if !ok || strings.HasPrefix(f[0], "-") {
			break
		}
		var err error
		switch k {
		case "kill":
			p.kill, err = time.ParseDuration(v)
		case "killafter":
			p.killAfter, err = strconv.Atoi(v)
		case "fail":
			p.fail = v
		case "fakekill":
			p.fakeKill = v
		default:
			return p, fmt.Errorf("unknown modifier %q", f[0])
		}
		if err != nil {
			return p, err
		}
		f = f[1:]
	}
	if len(f) == 0 {
		return p, fmt.Errorf("empty operation %q", line)
	}
	p.argv = f
	return p, nil
}

// mutating: the command may change the site (read-only status commands
// and staging a package do not touch a slot or the pointer).
func mutating(argv []string) bool {
	switch argv[0] {
	case "kubectl-bundle-verify":
		return false
	case "kubectl-bundle-gate":
		return strings.Contains(strings.Join(argv, " "), "--record")
	case "blue-green.sh":
		return len(argv) > 1 && argv[1] != "status"
	case "kubectl-bundle-slot", "kubectl-bundle-switch", "kubectl-bundle-journal":
		return len(argv) > 1 && argv[1] != "status" && argv[1] != "list" && argv[1] != "describe" && argv[1] != "log"
	}
	return true
}

// names reports whether the command names slot sl.
func names(argv []string, sl string) bool {
	for _, a := range argv[1:] {
		if a == sl {
			return true
		}
	}
	return false
}

func hasFlag(argv []string, flag string) bool {
	for _, a := range argv {
		if a == flag {
			return true
		}
	}
	return false
}

// isScript: a strategy script's run that updates the site.
func isScript(argv []string) bool {
	return strings.HasSuffix(argv[0], ".sh")
}
