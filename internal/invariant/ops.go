package invariant

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// An operation is one line, readable and replayable:
//
//	[MOD=VALUE...] PROGRAM ARGS...   a plugin command (or, for TestInvariant, a strategy script)
//	next                  the next command journal status prints, run as printed
//	repair                the command the last error printed, run as printed
//	health SLOT ok|broken slot SLOT's workload heals or breaks
//	damage FILE KIND      damage a state file (DamageKinds)
//	stage PKG KIND        damage the staged copy of $V1 or $V2: truncate, remove
//	lose records          transaction.json and switch.json removed (a partial restore)
//
// and what a harness adds (the model's "cwd" and "config"). PROGRAM is a
// kubectl-bundle-* plugin; $V1, $V2 (packages), $GATE, $GATEFAIL (gates),
// $KEY and $NOKUBE (a kubeconfig that does not exist) stand for the
// site's files (Placeholders). The modifiers: fakekill=STEP kills the
// command inside that step of the fakes, fail=STEP makes the step fail,
// kill=DUR SIGKILLs it that long after its start, killafter=N has a
// script kill itself after its N-th plugin call (the last two only where
// commands are processes).

// DamageKinds is what can be done to each state file.
var DamageKinds = map[string][]string{
	"active":      {"empty", "dir", "symlink", "twolines", "zz", "delete"},
	"slots":       {"delete"},
	"switch":      {"truncate", "empty", "dir", "delete"},
	"slot-a":      {"truncate", "empty", "dir", "symlink"},
	"slot-b":      {"truncate", "empty", "dir", "symlink"},
	"transaction": {"truncate", "empty", "delete"},
	"history":     {"truncate", "empty"},
}

// DamageFile is the file a damage target names.
func (f *Files) DamageFile(target string) string {
	switch target {
	case "active":
		return f.State("active")
	case "switch":
		return f.State("switch.json")
	case "transaction":
		return f.State("journal", "transaction.json")
	case "slots":
		return f.State("slots")
	case "history":
		return f.State("journal", "history.jsonl")
	}
	return f.State("slots", strings.TrimPrefix(target, "slot-")+".json")
}

// Damage does KIND to the file; false when there was nothing to damage.
func (f *Files) Damage(target, kind string) (bool, error) {
	p := f.DamageFile(target)
	fi, err := os.Lstat(p)
	if target == "slots" && err == nil && fi.IsDir() {
		// rm -rf <state>/slots: every record removed from outside while
		// the slots run.
		return true, os.RemoveAll(p)
	}
	if err != nil || !fi.Mode().IsRegular() {
		return false, nil
	}
	b, err := state.ReadFile(p, -1, false)
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
		// Removed from outside: damage while the history shows what it
		// held (StillDamaged).
		err = os.Remove(p)
	case "dir":
		if err = os.Remove(p); err == nil {
			err = os.Mkdir(p, 0o700)
		}
	case "symlink":
		// A link to a copy of the same content outside the state dir: it
		// reads back well, but a state file is never a link.
		outside := filepath.Join(f.Root, "outside", filepath.Base(p))
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

// DamageStaged truncates or removes the staged copy of the package file
// named base: disk freed by hand, or a killed run's leftovers cleaned up.
func (f *Files) DamageStaged(base, kind string) (bool, error) {
	matches, _ := filepath.Glob(f.State("packages", "*", base))
	if len(matches) == 0 {
		return false, nil
	}
	p := matches[0]
	switch kind {
	case "truncate":
		b, err := state.ReadFile(p, -1, false)
		if err != nil {
			return false, err
		}
		return true, os.WriteFile(p, b[:len(b)/2], 0o600)
	case "remove":
		return true, os.Remove(p)
	}
	return false, fmt.Errorf("unknown staged damage %q", kind)
}

// The packages, relative to the repository.
const (
	PkgV1 = "testdata/packages/zarf-package-demo-amd64-1.0.0.tar.zst"
	PkgV2 = "testdata/packages/v1beta1/zarf-package-demo-beta-amd64-1.0.0.tar.zst"
)

// Placeholders replaces an operation's placeholders with the files of
// the site at root, the repository at repo.
func Placeholders(root, repo string) *strings.Replacer {
	return strings.NewReplacer("$V1", filepath.Join(repo, PkgV1), "$V2", filepath.Join(repo, PkgV2),
		"$GATEFAIL", filepath.Join(root, "gate-fails.yaml"), "$GATE", filepath.Join(root, "gate.yaml"),
		"$KEY", filepath.Join(repo, "testdata", "keys", "cosign.pub"), "$NOKUBE", filepath.Join(root, "missing.kubeconfig"))
}

// Draw draws a sequence of min to min+spread-1 operations, each from op;
// one in five has the soak window short.
func Draw(rng *rand.Rand, shortSoak string, min, spread int, op func(*Gen) string) Sequence {
	g := &Gen{R: rng}
	s := Sequence{Seed: rng.Uint64(), Soak: "24h"}
	if g.Chance(0.2) {
		s.Soak = shortSoak
	}
	n := min + rng.IntN(spread)
	for range n {
		s.Ops = append(s.Ops, op(g))
	}
	return s
}

// Gen draws operations. It remembers the strategy it last began, so that
// steps of that strategy come in roughly their order (a hurried operator
// following a runbook by hand) and deep phases are reached.
type Gen struct {
	R        *rand.Rand
	strategy string
	phase    int
	cand     string
	// queue: operations drawn to follow the last one (Weighted returns
	// them first).
	queue []string
}

// Pick is one of xs.
func (g *Gen) Pick(xs ...string) string { return xs[g.R.IntN(len(xs))] }

// Chance is true with probability p.
func (g *Gen) Chance(p float64) bool { return g.R.Float64() < p }

// WeightedOp is a kind of operation and how often it is drawn.
type WeightedOp struct {
	W int
	F func() string
}

// Then queues ops to follow the operation being drawn (Weighted returns
// them first).
func (g *Gen) Then(ops ...string) { g.queue = append(g.queue, ops...) }

// Weighted draws one of w in proportion to its weight.
func (g *Gen) Weighted(w []WeightedOp) string {
	if len(g.queue) > 0 {
		next := g.queue[0]
		g.queue = g.queue[1:]
		return next
	}
	total := 0
	for _, x := range w {
		total += x.W
	}
	n := g.R.IntN(total)
	for _, x := range w {
		if n < x.W {
			return x.F()
		}
		n -= x.W
	}
	return w[0].F()
}

// Slot is either slot.
func (g *Gen) Slot() string { return g.Pick("a", "b") }

// Target is the slot a command changes: more often a, the slot that is
// active (then, after a switch, the revert target) when a sequence starts.
func (g *Gen) Target() string {
	if g.Chance(0.65) {
		return "a"
	}
	return "b"
}

// Pkg is a package, the new one more often.
func (g *Gen) Pkg() string { return g.Pick("$V1", "$V2", "$V2") }

// Force is " --force", sometimes.
func (g *Gen) Force() string {
	if g.Chance(0.12) {
		return " --force"
	}
	return ""
}

// Phases are each strategy's steps in order, with the command its script
// runs for the step (CAND, ACTIVE: the slot it changes).
var Phases = map[string][][2]string{
	"blue-green": {
		{"VERIFIED", "kubectl-bundle-verify --stage -q PKG --key $KEY"},
		{"PROVISIONING", "kubectl-bundle-slot create CAND"},
		{"PROVISIONED", "kubectl-bundle-slot deploy CAND PKG"},
		{"HEALTHY", "kubectl-bundle-gate --slot CAND --record -f GATE --timeout 1s"},
		{"SWITCHED", ""}, // kubectl-bundle-switch to CAND records it
		{"ACCEPTED", ""}, // kubectl-bundle-switch accept records it
		{"RETIRED", "kubectl-bundle-slot destroy ACTIVE --yes"},
	},
	"in-place": {
		{"VERIFIED", "kubectl-bundle-verify --stage -q PKG --key $KEY"},
		{"DEPLOYING", "kubectl-bundle-slot deploy ACTIVE PKG"},
		{"HEALTHY", "kubectl-bundle-gate --slot ACTIVE --record -f GATE --timeout 1s"},
		{"COMMITTED", "true"},
	},
	"recreate": {
		{"VERIFIED", "kubectl-bundle-verify --stage -q PKG --key $KEY"},
		{"TEARDOWN", "kubectl-bundle-slot destroy ACTIVE --force --yes"},
		{"BUILDING", "kubectl-bundle-slot create ACTIVE"},
		{"HEALTHY", "kubectl-bundle-gate --slot ACTIVE --record -f GATE --timeout 1s"},
		{"COMMITTED", "true"},
	},
}

// stepCommand is the command of a step of the strategy last begun.
func (g *Gen) stepCommand(cmd string) string {
	cand := g.cand
	if cand == "" {
		cand = "b"
	}
	active := map[string]string{"a": "b", "b": "a"}[cand]
	gt := "$GATE"
	if g.Chance(0.2) {
		gt = "$GATEFAIL"
	}
	return strings.NewReplacer("CAND", cand, "ACTIVE", active, "PKG", g.Pkg(), "GATE", gt).Replace(cmd)
}

// Step draws a journal step: most often the next of the strategy last
// begun with the command its script runs; sometimes recorded by hand
// (journal step), or run with another command (issue 32, class 3).
func (g *Gen) Step() string {
	st := g.strategy
	if st == "" {
		st = g.Pick("blue-green", "in-place", "recreate")
	}
	ps := Phases[st]
	i := g.phase
	if i >= len(ps) || g.Chance(0.25) {
		i = g.R.IntN(len(ps))
	}
	p := ps[i]
	g.phase = i + 1
	switch {
	case p[1] == "" && st == "blue-green" && p[0] == "SWITCHED":
		cand := map[bool]string{true: g.cand, false: "b"}[g.cand != ""]
		if g.Chance(0.15) {
			// The candidate is gated and ready here: the switch that
			// names a kubeconfig that does not exist must refuse before
			// it writes anything (row 6 of docs/invariant.md).
			return "kubectl-bundle-switch to " + cand + " --kubeconfig $NOKUBE"
		}
		return g.switchTo(cand, "")
	case p[1] == "" && st == "blue-green" && p[0] == "ACCEPTED":
		return "kubectl-bundle-switch accept"
	case g.Chance(0.08):
		// Recorded by hand: a claim, not a fact.
		return "kubectl-bundle-journal step " + p[0] + " " + g.Pick("started", "done", "done", "failed")
	case g.Chance(0.06):
		// Run with another command than the step's own.
		return "kubectl-bundle-journal run " + p[0] + " -- " + g.Pick("true", "kubectl-bundle-slot list")
	}
	return "kubectl-bundle-journal run " + p[0] + " -- " + g.stepCommand(p[1])
}

// switchTo is a switch to slot sl; a plain one is sometimes followed by
// the loss of switch.json during the soak it starts and a change of the
// revert target (issue 32, class 5: the history keeps it protected).
func (g *Gen) switchTo(sl, force string) string {
	if force == "" && g.Chance(0.25) {
		prev := map[string]string{"a": "b", "b": "a"}[sl]
		g.queue = append(g.queue, "damage switch delete",
			g.Pick("kubectl-bundle-slot destroy "+prev+" --yes", "kubectl-bundle-slot deploy "+prev+" $V2"))
	}
	return "kubectl-bundle-switch to " + sl + force
}

// Begin draws a journal begin of any strategy (steps follow it).
func (g *Gen) Begin() string {
	st := g.Pick("in-place", "recreate", "blue-green")
	a := g.Slot()
	s := "kubectl-bundle-journal begin --strategy " + st + " --package " + g.Pkg()
	if st == "blue-green" || g.Chance(0.7) {
		s += " --active " + a
	}
	g.strategy, g.phase, g.cand = st, 0, ""
	if st == "blue-green" {
		g.cand = map[string]string{"a": "b", "b": "a"}[a]
		s += " --candidate " + g.cand
	}
	return s + " --gate $GATE --gate-timeout 1s"
}

// PluginOps are the operations both harnesses draw: every mutating plugin
// command, journal steps (drawn stepWeight in about 90), the advice
// followed, workloads broken and healed, damage.
func (g *Gen) PluginOps(stepWeight int) []WeightedOp {
	return []WeightedOp{
		{4, func() string { return "kubectl-bundle-slot create " + g.Target() + g.Force() }},
		{4, func() string { return "kubectl-bundle-slot deploy " + g.Target() + " " + g.Pkg() + g.Force() }},
		{5, func() string { return "kubectl-bundle-slot destroy " + g.Target() + " --yes" + g.Force() }},
		{1, func() string { return "kubectl-bundle-slot repair " + g.Slot() }},
		{5, func() string { return g.switchTo(g.Slot(), g.Force()) }},
		{3, func() string { return "kubectl-bundle-switch back" + g.Pick("", "", " --force") }},
		// A kubeconfig that does not exist (a typo, another machine's path).
		{1, func() string { return "kubectl-bundle-switch to " + g.Slot() + " --kubeconfig $NOKUBE" + g.Force() }},
		{3, func() string { return "kubectl-bundle-switch accept" + g.Pick("", " --if-soaked") }},
		{5, g.Begin},
		{2, func() string { return "kubectl-bundle-journal abort" + g.Pick("", "", " --force") }},
		{2, func() string { return "kubectl-bundle-journal end" }},
		{1, func() string { return "kubectl-bundle-journal repair" }},
		{stepWeight, g.Step},
		{4, func() string {
			return "kubectl-bundle-gate --slot " + g.Slot() + " --record -f " + g.Pick("$GATE", "$GATE", "$GATEFAIL") + " --timeout 1s"
		}},
		{2, func() string { return "kubectl-bundle-verify --stage -q " + g.Pkg() + " --key $KEY" }},
		{5, func() string { return "next" }},
		{4, func() string { return "repair" }},
		{5, func() string { return "health " + g.Slot() + " " + g.Pick("ok", "broken") }},
		{5, func() string {
			targets := []string{"active", "switch", "slot-a", "slot-b", "transaction", "history", "slots"}
			t := g.Pick(targets...)
			return "damage " + t + " " + g.Pick(DamageKinds[t]...)
		}},
		// The staged fallback ($V1, deployed in slot a) damaged more often
		// than the target: it is the way back.
		{4, func() string {
			return "stage " + g.Pick("$V1", "$V1", "$V2") + " " + g.Pick("truncate", "truncate", "remove")
		}},
		{1, func() string { return "lose records" }},
	}
}

// ScriptOps are the strategy scripts' runs, each weight divided by div
// (at least 1): the model, whose plugin commands cost less than a run of a
// script, draws them less often than TestInvariant.
func (g *Gen) ScriptOps(div int) []WeightedOp {
	w := func(n int) int { return max(1, n/div) }
	return []WeightedOp{
		{w(12), func() string { return "blue-green.sh apply " + g.Pkg() + g.GateArgs() }},
		{w(5), func() string { return "blue-green.sh accept" }},
		{w(4), func() string { return "blue-green.sh revert" }},
		{1, func() string { return "blue-green.sh status" }},
		{w(7), func() string { return "in-place.sh " + g.Pkg() + g.GateArgs() }},
		{w(7), func() string { return "recreate.sh " + g.Pkg() + g.GateArgs() }},
	}
}

// GateArgs is a strategy run's gate: the one a healthy workload passes, or
// (3 in 10) the one no workload passes.
func (g *Gen) GateArgs() string {
	if g.Chance(0.3) {
		return " --gate $GATEFAIL --gate-timeout 200ms"
	}
	return " --gate $GATE --gate-timeout 1s"
}

// FakeSteps are the steps of the fakes a fakekill= or fail= names.
var (
	FakeKills = []string{"docker-run", "docker-rm", "docker-network", "zarf-init", "zarf-deploy", "kind-create", "kind-delete"}
	FakeFails = []string{"zarf-deploy", "kind-create", "kind-delete", "zarf-init"}
)

// IsCommand: the line runs a program (not next, repair, health, ...).
func IsCommand(line string) bool {
	f := strings.Fields(line)
	if len(f) == 0 {
		return false
	}
	switch f[len(Modifiers(f))] {
	case "next", "repair", "health", "damage", "stage", "lose", "cwd", "config":
		return false
	}
	return true
}

// Modifiers are the KEY=VALUE words that start a line.
func Modifiers(f []string) []string {
	i := 0
	for i < len(f) && strings.Contains(f[i], "=") && !strings.HasPrefix(f[i], "-") {
		i++
	}
	return f[:i]
}

// Parsed is an operation line taken apart.
type Parsed struct {
	Kill      time.Duration
	KillAfter int
	Fail      string
	FakeKill  string
	Argv      []string
}

// ParseOp takes an operation line apart.
func ParseOp(line string) (Parsed, error) {
	var p Parsed
	f := strings.Fields(line)
	mods := Modifiers(f)
	for _, m := range mods {
		k, v, _ := strings.Cut(m, "=")
		var err error
		switch k {
		case "kill":
			p.Kill, err = time.ParseDuration(v)
		case "killafter":
			_, err = fmt.Sscan(v, &p.KillAfter)
		case "fail":
			p.Fail = v
		case "fakekill":
			p.FakeKill = v
		default:
			return p, fmt.Errorf("unknown modifier %q", m)
		}
		if err != nil {
			return p, err
		}
	}
	p.Argv = f[len(mods):]
	if len(p.Argv) == 0 {
		return p, fmt.Errorf("empty operation %q", line)
	}
	return p, nil
}

// Env is the environment a parsed operation's modifiers set for its run.
func (p Parsed) Env() []string {
	var env []string
	if p.KillAfter > 0 {
		env = append(env, fmt.Sprintf("KB_TEST_KILL_AFTER=%d", p.KillAfter))
	}
	if p.Fail != "" {
		env = append(env, "FAKE_FAIL="+p.Fail)
	}
	if p.FakeKill != "" {
		env = append(env, "FAKE_KILL="+p.FakeKill)
	}
	return env
}

// Mutating: the command may change the site (read-only status commands
// and staging a package do not touch a slot or the pointer).
func Mutating(argv []string) bool {
	switch filepath.Base(argv[0]) {
	case "kubectl-bundle-verify", "true", "false":
		return false
	case "kubectl-bundle-gate":
		return HasFlag(argv, "--record")
	case "blue-green.sh":
		return len(argv) > 1 && argv[1] != "status"
	case "kubectl-bundle-slot", "kubectl-bundle-switch", "kubectl-bundle-journal":
		return len(argv) > 1 && argv[1] != "status" && argv[1] != "list" && argv[1] != "describe" && argv[1] != "log" && argv[1] != "next"
	}
	return true
}

// IsScript: a strategy script's run.
func IsScript(argv []string) bool {
	return len(argv) > 0 && strings.HasSuffix(argv[0], ".sh")
}

// newRand is the source of a run's own choices.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 1)) }
