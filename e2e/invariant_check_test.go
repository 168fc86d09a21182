package e2e_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// violation is a broken invariant: which (I1..I4, or D for damage) and how.
type violation struct {
	Inv  string // I1, I2, I3, I4, D
	Op   int    // index of the operation after which it was seen
	What string
	// Key is which check saw it: shrinking keeps a sequence only while the
	// same check fails.
	Key string
}

func (v *violation) Error() string { return fmt.Sprintf("%s after op %d: %s", v.Inv, v.Op+1, v.What) }

// counters are what a run did.
type counters struct {
	seqs, ops, damages, repairs, nexts, chases int
	kills                                      map[string]int
	allowed                                    map[string]int // known open bugs hit
	took                                       map[string]time.Duration
	count                                      map[string]int
	busy                                       time.Duration // running operations (not settling, not setup)
}

// seqRun runs one sequence of operations on a fresh site and checks the
// invariants after each.
type seqRun struct {
	q   *seqSite
	rng *rand.Rand // decides the checks' own choices (chase now or later)
	c   *counters
	log []string // what happened, for the report

	kg         map[string]string // known-good slot -> the package the machine holds in it
	lastAdvice string            // the command the last error printed
	lastActive string
	damaged    map[string]bool // damage targets this sequence damaged
	op         int
}

func (r *seqRun) logf(format string, a ...any) {
	r.log = append(r.log, fmt.Sprintf(format, a...))
}

func (r *seqRun) fail(inv, format string, a ...any) *violation {
	return &violation{Inv: inv, Op: r.op, What: fmt.Sprintf(format, a...), Key: inv + ": " + format}
}

// expand replaces the placeholders of an operation with the site's files.
func (r *seqRun) expand(argv []string) []string {
	rep := strings.NewReplacer("$V1", repo(pkgV1), "$V2", repo(pkgV2), "$GATEFAIL", filepath.Join(r.q.root, "gate-fails.yaml"),
		"$GATE", filepath.Join(r.q.root, "gate.yaml"), "$KEY", repo("testdata/keys/cosign.pub"))
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = rep.Replace(a)
	}
	if isScript(out) {
		out[0] = repo("scripts", out[0])
	}
	return out
}

// before is what the checks need from the state before an operation.
type before struct {
	txn       *rawTxn
	active    string
	soaking   string
	histLen   int
	gateTimes map[string]time.Time
	damaged   []string // targets damaged before the op
	health    map[string]bool
	// switchPhase is switch.json's phase ("" when none or unreadable).
	switchPhase string
}

func (r *seqRun) observe() before {
	b := before{gateTimes: map[string]time.Time{}, health: map[string]bool{}}
	b.txn, _ = r.txn()
	b.active, _ = r.pointer()
	b.soaking, _ = r.soaking()
	b.histLen = len(r.history())
	if raw, exists, ok := readRegular(r.q.state("switch.json")); exists && ok {
		var sw struct {
			Phase string `json:"phase"`
		}
		if json.Unmarshal(raw, &sw) == nil {
			b.switchPhase = sw.Phase
		}
	}
	for _, sl := range []string{"a", "b"} {
		if rec, ok := r.record(sl); ok && rec.Gate != nil {
			b.gateTimes[sl] = rec.Gate.Time
		}
	}
	for t := range r.damaged {
		if r.stillDamaged(t) {
			b.damaged = append(b.damaged, t)
		} else {
			delete(r.damaged, t)
		}
	}
	slices.Sort(b.damaged)
	return b
}

// step runs operation line (the r.op-th) and checks I1-I4 and damage.
func (r *seqRun) step(line string) *violation {
	pre := r.observe()
	f := strings.Fields(line)
	var res result
	var argv []string
	switch f[0] {
	case "health":
		if err := r.q.inv.setHealth(f[1], f[2] == "ok"); err != nil {
			return r.fail("setup", "%s: %v", line, err)
		}
		r.logf("%s", line)
		return nil
	case "damage":
		ok, err := r.q.damage(f[1], f[2])
		if err != nil {
			return r.fail("setup", "%s: %v", line, err)
		}
		if ok {
			r.c.damages++
			r.damaged[f[1]] = true
		}
		r.logf("%s (%v)", line, ok)
		return nil
	case "next":
		return r.chase(1, true)
	case "repair":
		if r.lastAdvice == "" {
			r.logf("repair: no advice printed so far")
			return nil
		}
		cmd := r.lastAdvice
		r.lastAdvice = ""
		res = r.q.exec(nil, cmd, nil, 0, time.Minute)
		r.c.repairs++
		r.logf("repair: %s -> %s", cmd, res)
		argv = strings.Fields(cmd)
		if res.code == 2 || res.code == 124 {
			return r.fail("I3", "the command an error printed does not run as printed: %s: %s\n%s", cmd, res, tail(res.out))
		}
	default:
		p, err := parseOp(line)
		if err != nil {
			return r.fail("setup", "%v", err)
		}
		argv = r.expand(p.argv)
		var env []string
		if p.killAfter > 0 {
			env = append(env, fmt.Sprintf("KB_TEST_KILL_AFTER=%d", p.killAfter))
		}
		if p.fail != "" {
			env = append(env, "FAKE_FAIL="+p.fail)
		}
		if p.fakeKill != "" {
			env = append(env, "FAKE_KILL="+p.fakeKill)
		}
		res = r.q.exec(argv, "", env, p.kill, 2*time.Minute)
		kind := filepath.Base(argv[0])
		if len(argv) > 1 && !strings.HasPrefix(argv[1], "-") && !strings.HasPrefix(argv[1], "/") {
			kind += " " + argv[1]
		}
		r.c.took[kind] += res.took
		r.c.count[kind]++
		if res.killed {
			kind := "random instant"
			switch {
			case p.killAfter > 0:
				kind = "after a plugin call"
			case p.fakeKill != "" && strings.Contains(res.out+r.q.calls(), "FAKE_KILL"):
				kind = "inside a step"
			}
			r.c.kills[kind]++
		}
		r.logf("%s -> %s %s", line, res, firstError(res.out))
		if res.code == 124 {
			return r.fail("I3", "%s hung:\n%s", line, tail(res.out))
		}
		if v := r.checkDamageMet(pre, p.argv, res); v != nil {
			return v
		}
	}
	if v := r.checkI1(pre); v != nil {
		return v
	}
	if v := r.checkI4(pre, argv, res); v != nil {
		return v
	}
	if v := r.checkI2(); v != nil {
		return v
	}
	r.updateKG()
	if adv := advice(res.out, r.lastActive); adv != "" && res.code != 0 && !res.killed {
		r.lastAdvice = adv
		if dadv := damageAdvice(res.out, r.lastActive); res.code == 3 && dadv != "" && r.rng.Float64() < 0.5 {
			// Met with exit 3 and a repair: it must work as printed.
			if v := r.runRepair(dadv); v != nil {
				return v
			}
		}
	}
	if !res.killed && res.code != 0 && mutating(argv) && r.rng.Float64() < 0.4 {
		return r.chase(6, false)
	}
	return nil
}

// runRepair runs a damage report's repair verbatim: it must exit 0.
func (r *seqRun) runRepair(cmd string) *violation {
	pre := r.observe()
	// A transaction.json removed while the history tells the open
	// transaction whole: the repair rebuilds it, never closes it.
	lost, whole := "", false
	if pre.txn == nil && slices.Contains(pre.damaged, "transaction") {
		lost, whole = r.openInHistory()
	}
	var res result
	// A repair that fails with a different damage report and repair made
	// progress (issue 14's rule for next commands): follow it, a few times.
	seen := map[string]bool{}
	for runs := 1; ; runs++ {
		res = r.q.exec(nil, cmd, nil, 0, time.Minute)
		r.c.repairs++
		r.lastAdvice = ""
		r.logf("  repair as printed: %s -> %s %s", cmd, res, firstError(res.out))
		// The same failure with the same advice twice is no progress.
		failure := cmd + " | " + firstError(res.out)
		next := damageAdvice(res.out, r.lastActive)
		if res.code != 3 || next == "" || seen[failure] || runs >= 5 {
			break
		}
		seen[failure] = true
		cmd = next
	}
	if res.code != 0 {
		return r.fail("D", "the repair a damage report printed fails when run as printed: %s: %s\n%s", cmd, res, tail(res.out))
	}
	if t, _ := r.txn(); whole && (t == nil || t.ID != lost) {
		return r.fail("D", "the repair of the removed transaction.json of transaction %s, which the history tells whole, did not rebuild it: %s", lost, cmd)
	}
	// It must repair something this sequence damaged (advice that only
	// reads, such as "inspect it", is no repair).
	if len(pre.damaged) > 0 {
		fixed := false
		for _, t := range pre.damaged {
			fixed = fixed || !r.stillDamaged(t)
		}
		if !fixed {
			return r.fail("D", "the repair a damage report printed exits 0 but repairs nothing: %s (still damaged: %s)", cmd, strings.Join(pre.damaged, ", "))
		}
	}
	if v := r.checkI1(pre); v != nil {
		return v
	}
	r.updateKG()
	return nil
}

// checkDamageMet: while a state file is damaged, a mutating command that
// reads it exits 3 and names a repair; it never succeeds and leaves the
// damage in place.
func (r *seqRun) checkDamageMet(pre before, argv []string, res result) *violation {
	if res.killed || !mutating(argv) || len(pre.damaged) == 0 {
		return nil
	}
	for _, t := range pre.damaged {
		if strings.Contains(res.out, "the previous deployment is in place") && r.stillDamaged(t) {
			return r.fail("D", "%s says the previous deployment is in place while %s is damaged (exit %d):\n%s", strings.Join(argv, " "), t, res.code, tail(res.out))
		}
		relevant := true
		if sl, ok := strings.CutPrefix(t, "slot-"); ok {
			relevant = names(argv, sl) || isScript(argv) || sl == pre.active
		}
		if !relevant {
			continue
		}
		after := r.stillDamaged(t)
		switch {
		case res.code == 0 && after:
			return r.fail("D", "%s exited 0 while %s is damaged (and it still is):\n%s", strings.Join(argv, " "), t, tail(res.out))
		case res.code == 0 && !after && !hasFlag(argv, "--force") && !strings.Contains(strings.Join(argv, " "), "abort"):
			return r.fail("D", "%s exited 0 and silently replaced the damaged %s:\n%s", strings.Join(argv, " "), t, tail(res.out))
		case res.code != 0 && res.code != 3 && strings.HasPrefix(t, "slot-") && actsOn(argv, strings.TrimPrefix(t, "slot-")):
			// (A command refused for another reason before it read a
			// shared file is no violation; one about the damaged slot is.)
			return r.fail("D", "%s exited %d, not 3, while %s is damaged:\n%s", strings.Join(argv, " "), res.code, t, tail(res.out))
		case res.code == 3 && damageAdvice(res.out, r.lastActive) == "":
			return r.fail("D", "%s exited 3 while %s is damaged but printed no command that repairs it:\n%s", strings.Join(argv, " "), t, tail(res.out))
		}
	}
	return nil
}

// actsOn: the command changes slot sl itself (and so must read its record first).
func actsOn(argv []string, sl string) bool {
	switch {
	case len(argv) > 2 && argv[0] == "kubectl-bundle-slot" && (argv[1] == "create" || argv[1] == "deploy" || argv[1] == "destroy"):
		return argv[2] == sl
	case len(argv) > 2 && argv[0] == "kubectl-bundle-switch" && argv[1] == "to":
		return argv[2] == sl
	case argv[0] == "kubectl-bundle-gate":
		i := slices.Index(argv, "--slot")
		return i >= 0 && i+1 < len(argv) && argv[i+1] == sl
	}
	return false
}

// allowedChanges: the slots this operation was allowed to change, from
// the history it appended: a --force, or a step that owns the change.
func (r *seqRun) allowedChanges(pre before) map[string]bool {
	allowed := map[string]bool{}
	h := r.history()
	if len(h) < pre.histLen {
		pre.histLen = 0 // damaged and rewritten: look at all of it
	}
	txns := map[string]*rawTxn{}
	if pre.txn != nil {
		txns[pre.txn.ID] = pre.txn
	}
	if t, _ := r.txn(); t != nil {
		txns[t.ID] = t
	}
	owner := map[string]bool{"DEPLOYING": true, "RESTORING": true, "TEARDOWN": true, "BUILDING": true, "BUILDING_FALLBACK": true, "RETIRED": true}
	for _, e := range h[pre.histLen:] {
		switch {
		case e.Type == "force":
			allowed[e.Slot] = true
		case e.Type == "step" && e.Phase == "DESTROYING":
			// Blue-green's rollback and revert destroy the candidate,
			// which is never protected by then (a revert has switched
			// back first); never the slot that is active.
			if t := txns[e.TxnID]; t != nil && t.Slots.Candidate != "" {
				if a, _ := r.pointer(); a != t.Slots.Candidate {
					allowed[t.Slots.Candidate] = true
				}
			}
		case e.Type == "step" && owner[e.Phase]:
			if t := txns[e.TxnID]; t != nil && t.Slots.Active != "" {
				allowed[t.Slots.Active] = true
			} else if e.Phase == "RETIRED" {
				allowed[pre.soaking] = true
			} else {
				allowed[pre.active] = true
			}
		}
	}
	return allowed
}

// checkI1: a known-good slot still exists with its package, unless the
// operation was allowed to change it.
func (r *seqRun) checkI1(pre before) *violation {
	g, err := r.q.ground()
	if err != nil {
		return r.fail("setup", "reading the fake machine: %v", err)
	}
	allowed := r.allowedChanges(pre)
	for sl, want := range r.kg {
		if allowed[sl] {
			delete(r.kg, sl)
			continue
		}
		if got := g.slotPackage(sl); got != want {
			if got == "" {
				got = "no cluster"
			}
			return r.fail("I1", "known-good slot %s (%s) now holds %s, and no step that owns that change ran and no --force was given", sl, want, got)
		}
	}
	return nil
}

// updateKG: a protected slot stays known-good; the active slot becomes
// known-good once its last gate passed for the package it holds.
func (r *seqRun) updateKG() {
	active, okA := r.pointer()
	soak, okS := r.soaking()
	if okA && okS {
		for sl := range r.kg {
			if sl != active && sl != soak {
				delete(r.kg, sl)
			}
		}
	}
	if !okA || active == "" {
		return
	}
	r.lastActive = active
	rec, ok := r.record(active)
	if !ok || rec.Package == nil || rec.Gate == nil || !rec.Gate.Passed || rec.Gate.Package != rec.Package.Digest {
		return
	}
	g, err := r.q.ground()
	if err != nil {
		return
	}
	if p := g.slotPackage(active); p != "" && p != "none" && !strings.HasPrefix(p, "partial:") {
		if _, known := r.kg[active]; !known {
			r.kg[active] = p
		}
	}
}

// checkI2: the aliases follow the active slot, or switch status says
// INTERRUPTED or DIVERGED and names the command that repairs it (run at
// the end of the sequence).
func (r *seqRun) checkI2() *violation {
	active, ok := r.pointer()
	if !ok || active == "" {
		return nil
	}
	kube, reg := r.q.aliases()
	if kube == active && reg == active {
		return nil
	}
	st, res := r.switchStatus()
	if res.code != 0 {
		return nil // damage: met by the mutating commands
	}
	if st.Consistent || st.Next == "" {
		return r.fail("I2", "the aliases point at %q (kubeconfig) and %q (registry), the active slot is %s, and switch status says consistent=%v next=%q phase=%q", kube, reg, active, st.Consistent, st.Next, st.Phase)
	}
	return nil
}

func (r *seqRun) switchStatus() (switchStatus, result) {
	res := r.q.plugin("kubectl-bundle-switch", "status", "-o", "json")
	var st switchStatus
	if res.code == 0 {
		_ = json.Unmarshal([]byte(res.out), &st)
	}
	return st, res
}

// checkI4: no exit 0, and no "the previous deployment is in place",
// while the slot it vouches for fails its gate.
func (r *seqRun) checkI4(pre before, argv []string, res result) *violation {
	if res.killed || len(argv) == 0 {
		return nil
	}
	active, ok := r.pointer()
	if !ok || active == "" {
		return nil
	}
	if _, ok := r.record(active); !ok {
		return nil // a pointer to no record is damage: met by the damage checks
	}
	if strings.Contains(res.out, "the previous deployment is in place") && !r.q.inv.healthy(active) {
		return r.fail("I4", "%s says the previous deployment is in place, but the active slot %s fails its gate:\n%s", strings.Join(argv, " "), active, tail(res.out))
	}
	update := isScript(argv) && (strings.HasSuffix(argv[0], "in-place.sh") || strings.HasSuffix(argv[0], "recreate.sh") || (len(argv) > 1 && argv[1] == "apply"))
	if update && res.code == 0 {
		rec, ok := r.record(active)
		if !ok {
			return nil
		}
		gated := rec.Gate != nil && !rec.Gate.Time.Equal(pre.gateTimes[active])
		switch {
		case gated && !r.q.inv.healthy(active):
			return r.fail("I4", "%s exited 0 after gating slot %s, which fails its gate:\n%s", strings.Join(argv, " "), active, tail(res.out))
		case rec.Gate == nil || !rec.Gate.Passed || rec.Package == nil || rec.Gate.Package != rec.Package.Digest:
			return r.fail("I4", "%s exited 0 with the active slot %s's last gate not a pass for the package it holds", strings.Join(argv, " "), active)
		}
	}
	// A revert (the script's, or switch back without --force) that exits 0
	// has returned to a slot that passes its gate (switch back finishing
	// an interrupted switch back moves no further and gates nothing).
	revert := (isScript(argv) && len(argv) > 1 && argv[1] == "revert" && !hasFlag(argv, "--force")) ||
		(len(argv) > 1 && argv[0] == "kubectl-bundle-switch" && argv[1] == "back" && !hasFlag(argv, "--force") && pre.switchPhase == "SWITCHED")
	if revert && res.code == 0 && !r.q.inv.healthy(active) {
		return r.fail("I4", "%s exited 0 with the active slot %s failing its gate:\n%s", strings.Join(argv, " "), active, tail(res.out))
	}
	if len(argv) > 1 && argv[0] == "kubectl-bundle-gate" && hasFlag(argv, "--record") && res.code == 0 {
		sl := argv[slices.Index(argv, "--slot")+1]
		if !r.q.inv.healthy(sl) && strings.HasSuffix(argv[slices.Index(argv, "-f")+1], "gate.yaml") {
			return r.fail("I4", "%s exited 0 while slot %s fails its gate", strings.Join(argv, " "), sl)
		}
	}
	return nil
}
