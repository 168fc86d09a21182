package model_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The invariants, checked after every operation (docs/invariant.md):
//
//	I1  a known-good slot (active, or the revert target during a soak,
//	    with a passing gate for what it holds) still exists with its
//	    package, unless a step that owns the change ran while its fallback
//	    was usable, or --force was given
//	I2  the aliases follow the active slot, or switch status says why not
//	    and its printed command repairs it
//	I3  a command printed as the next step or a repair runs as printed,
//	    from another directory too, and makes progress
//	I4  no exit 0 or "previous deployment is in place" while the slot it
//	    vouches for fails its gate
//	D   damage is met with exit 3 and a repair that works as printed

// violation is a broken invariant: which (I1..I4, or D) and how.
type violation struct {
	Inv  string
	Op   int
	What string
	// Key is which check saw it: shrinking keeps a sequence only while
	// the same check fails.
	Key string
}

func (v *violation) Error() string { return fmt.Sprintf("%s after op %d: %s", v.Inv, v.Op+1, v.What) }

// counters are what a run did.
type counters struct {
	seqs, ops, damages, repairs, nexts, kills, scripts int
}

// seqRun runs one sequence on a fresh site and checks after each op.
type seqRun struct {
	m   *machine
	rng *rand.Rand
	c   *counters
	log []string

	kg         map[string]string // known-good slot -> the package the machine holds in it
	lastAdvice string
	lastActive string
	damaged    map[string]bool
	op         int
	histRaw    []byte
	histEvents []histEvent
}

func (r *seqRun) logf(format string, a ...any) { r.log = append(r.log, fmt.Sprintf(format, a...)) }

func (r *seqRun) fail(inv, format string, a ...any) *violation {
	return &violation{Inv: inv, Op: r.op, What: fmt.Sprintf(format, a...), Key: inv + ": " + format}
}

// before is what the checks need from the state before an operation.
type before struct {
	txn         *rawTxn
	active      string
	soaking     string
	histLen     int
	gateTimes   map[string]string
	damaged     []string
	switchPhase string
	// fallbackOK: the open transaction's fallback is staged whole (or it
	// has none): a step that replaces the active slot may run.
	fallbackOK bool
}

func (r *seqRun) observe() before {
	b := before{gateTimes: map[string]string{}, fallbackOK: true}
	b.txn, _ = r.txn()
	b.active, _ = r.pointer()
	b.soaking, _ = r.soaking()
	b.histLen = len(r.history())
	if raw, exists, ok := readRegular(r.m.state("switch.json")); exists && ok {
		var sw struct {
			Phase string `json:"phase"`
		}
		if json.Unmarshal(raw, &sw) == nil {
			b.switchPhase = sw.Phase
		}
	}
	for _, sl := range []string{"a", "b"} {
		if rec, ok := r.record(sl); ok && rec.Gate != nil {
			b.gateTimes[sl] = rec.Gate.Time.String()
		}
	}
	if b.txn != nil && b.txn.Fallback != "" {
		b.fallbackOK = r.m.stagedUsable(b.txn.Fallback)
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

// pasteDir is where a printed command is run: another directory than the
// one the command that printed it ran in, while the state dir is named
// relatively (issue 32, class 4).
func (r *seqRun) pasteDir() string {
	if r.m.relative {
		return filepath.Join(r.m.root, "elsewhere")
	}
	return ""
}

// runPrinted runs a printed command line as an operator pastes it (a
// chain "A && B" runs B only after A exits 0).
func (r *seqRun) runPrinted(what, line string) (result, *violation) {
	if i := strings.Index(line, "#"); i >= 0 {
		line = line[:i]
	}
	if first, rest, ok := strings.Cut(line, " && "); ok {
		res, v := r.runPrinted(what, first)
		if v != nil || res.code != 0 {
			if res.code == 1 && strings.Contains(first, "bundle-gate") {
				// "gate && switch": the switch runs once the gate passes;
				// the gate failing is its verdict, not a failed repair.
				res.code = -3
			}
			return res, v
		}
		return r.runPrinted(what, rest)
	}
	env, argv, err := splitLine(line)
	if err != nil || len(argv) == 0 {
		return result{out: fmt.Sprint(err), code: 2}, nil
	}
	if strings.HasSuffix(argv[0], ".sh") {
		// A strategy script: not run in-process (TestInvariant runs them).
		// It must run from anywhere: an absolute path, and the state dir
		// named when it is relative.
		r.c.scripts++
		if !filepath.IsAbs(argv[0]) {
			return result{}, r.fail("I3", "a printed command names its script by a relative path: %s", line)
		}
		if r.m.relative && !strings.Contains(strings.Join(env, " "), "KUBECTL_BUNDLE_STATE_DIR=/") {
			if what == "next" {
				return result{}, r.fail("I3", "journal status's next command does not name the state dir, which is relative (pasted elsewhere it opens another): %s", line)
			}
			return result{}, r.fail("I3", "a printed command does not name the state dir, which is relative here (pasted elsewhere it opens another): %s", line)
		}
		return result{code: -2}, nil
	}
	dir := r.pasteDir()
	if dir != "" {
		wd, _ := os.Getwd()
		_ = os.Chdir(dir)
		defer func() { _ = os.Chdir(wd) }()
	}
	res := r.m.run(argv, env)
	if dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "state")); err == nil {
			_ = os.RemoveAll(filepath.Join(dir, "state"))
			if what == "next" {
				return res, r.fail("I3", "journal status's next command, pasted in another directory, opened another state dir (a relative state dir): %s", line)
			}
			return res, r.fail("I3", "a printed command, pasted in another directory, opened another state dir (the state dir is relative here): %s", line)
		}
	}
	return res, nil
}

// splitLine splits a printed command line: leading NAME=VALUE words are
// its environment; single and double quotes group words.
func splitLine(line string) (env, argv []string, err error) {
	var words []string
	var cur strings.Builder
	in, has := rune(0), false
	for _, c := range line {
		switch {
		case in == 0 && c == '#' && !has && cur.Len() == 0:
			// A comment: the rest of the line is not the command.
			goto done
		case in != 0 && c == in:
			in = 0
		case in != 0:
			cur.WriteRune(c)
		case c == '\'' || c == '"':
			in, has = c, true
		case c == ' ' || c == '\t':
			if has || cur.Len() > 0 {
				words = append(words, cur.String())
				cur.Reset()
				has = false
			}
		default:
			cur.WriteRune(c)
		}
	}
done:
	if in != 0 {
		return nil, nil, fmt.Errorf("unbalanced quote in %q", line)
	}
	if has || cur.Len() > 0 {
		words = append(words, cur.String())
	}
	i := 0
	for i < len(words) && strings.Contains(words[i], "=") && !strings.HasPrefix(words[i], "-") {
		i++
	}
	return words[:i], words[i:], nil
}

// step runs operation line (the r.op-th) and checks I1-I4 and damage.
func (r *seqRun) step(line string) *violation {
	pre := r.observe()
	f := strings.Fields(line)
	var res result
	var argv []string
	switch f[0] {
	case "health":
		r.m.health["airgap-mgmt-"+f[1]] = f[2] == "ok"
		r.logf("%s", line)
		return nil
	case "damage", "stage", "lose":
		var ok bool
		var err error
		switch f[0] {
		case "damage":
			ok, err = r.m.damage(f[1], f[2])
			if ok {
				r.damaged[f[1]] = true
			}
		case "stage":
			ok, err = r.m.damageStaged(f[1], f[2])
		case "lose":
			// A partial restore of the state dir: both records gone.
			for _, t := range []string{"transaction", "switch"} {
				if d, e := r.m.damage(t, "delete"); d {
					ok = true
					r.damaged[t] = true
				} else if e != nil {
					err = e
				}
			}
		}
		if err != nil {
			return r.fail("setup", "%s: %v", line, err)
		}
		if ok {
			r.c.damages++
		}
		r.logf("%s (%v)", line, ok)
		return nil
	case "cwd":
		r.m.relative = f[1] == "relative"
		if r.m.relative {
			_ = os.Setenv("KUBECTL_BUNDLE_STATE_DIR", "state")
			_ = os.Chdir(r.m.root)
		} else {
			_ = os.Setenv("KUBECTL_BUNDLE_STATE_DIR", r.m.state())
			_ = os.Chdir(filepath.Join(r.m.root, "work"))
		}
		r.logf("%s", line)
		return nil
	case "next":
		return r.chase(1)
	case "repair":
		if r.lastAdvice == "" {
			r.logf("repair: no advice printed so far")
			return nil
		}
		cmd := r.lastAdvice
		r.lastAdvice = ""
		var v *violation
		res, v = r.runPrinted("advice", cmd)
		if v != nil {
			return v
		}
		if res.code == -2 || res.code == -3 {
			return nil // a script, or a gate that still fails
		}
		r.c.repairs++
		r.logf("repair: %s -> %s %s", cmd, res, firstError(res.out))
		_, argv, _ = splitLine(cmd)
		if res.code == 2 || res.code == 127 {
			return r.fail("I3", "the command an error printed does not run as printed: %s: %s\n%s", cmd, res, tail(res.out))
		}
	default:
		p, err := parseOp(line)
		if err != nil {
			return r.fail("setup", "%v", err)
		}
		argv = r.m.expand(p.argv)
		var env []string
		if p.fail != "" {
			env = append(env, "FAKE_FAIL="+p.fail)
		}
		if p.fakeKill != "" {
			env = append(env, "FAKE_KILL="+p.fakeKill)
		}
		site := r.m.fingerprint()
		res = r.m.run(argv, env)
		if res.killed {
			r.c.kills++
		}
		r.logf("%s -> %s %s", line, res, firstError(res.out))
		if res.code == 2 && !(len(argv) > 1 && argv[0] == "kubectl-bundle-journal" && argv[1] == "run") && r.m.fingerprint() != site {
			// A usage error (a bad flag or argument, a named file missing)
			// is found before anything changes (journal run keeps its
			// step's exit code, and records the step failed).
			return r.fail("U", "%s exited 2 (usage) but changed the site:\n%s", line, tail(res.out))
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
			if v := r.runRepair(dadv); v != nil {
				return v
			}
		}
	}
	return nil
}

// runRepair runs a damage report's repair as printed: it must exit 0 and
// repair something.
func (r *seqRun) runRepair(cmd string) *violation {
	pre := r.observe()
	lost, whole := "", false
	if pre.txn == nil && slices.Contains(pre.damaged, "transaction") {
		lost, whole = r.openInHistory()
	}
	var res result
	seen := map[string]bool{}
	for runs := 1; ; runs++ {
		var v *violation
		res, v = r.runPrinted("repair", cmd)
		if v != nil {
			return v
		}
		if res.code == -2 || res.code == -3 {
			return nil
		}
		r.c.repairs++
		r.lastAdvice = ""
		r.logf("  repair as printed: %s -> %s %s", cmd, res, firstError(res.out))
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
	// The repair of a file this sequence damaged must repair it (advice
	// that only reads is no repair); a report of damage the model did not
	// make (a pointer to a destroyed slot) is not checked here.
	var aimed []string
	for _, t := range pre.damaged {
		if r.aimsAt(cmd, t) {
			aimed = append(aimed, t)
		}
	}
	if len(aimed) > 0 {
		fixed := false
		for _, t := range aimed {
			fixed = fixed || !r.stillDamaged(t)
		}
		if !fixed {
			return r.fail("D", "the repair a damage report printed exits 0 but repairs nothing: %s (still damaged: %s)", cmd, strings.Join(aimed, ", "))
		}
	}
	if v := r.checkI1(pre); v != nil {
		return v
	}
	r.updateKG()
	return nil
}

// checkDamageMet: while a state file is damaged, a mutating command that
// reads it exits 3 and names a repair.
func (r *seqRun) checkDamageMet(pre before, argv []string, res result) *violation {
	if res.killed || !mutating(argv) || len(pre.damaged) == 0 || (len(argv) > 1 && argv[1] == "repair") {
		// (A repair command is checked where it is printed: runRepair.)
		return nil
	}
	for _, t := range pre.damaged {
		if strings.Contains(res.out, "the previous deployment is in place") && r.stillDamaged(t) {
			return r.fail("D", "%s says the previous deployment is in place while %s is damaged (exit %d):\n%s", strings.Join(argv, " "), t, res.code, tail(res.out))
		}
		relevant := true
		if sl, ok := strings.CutPrefix(t, "slot-"); ok {
			relevant = names(argv, sl) || sl == pre.active
		}
		if !relevant {
			continue
		}
		after := r.stillDamaged(t)
		switch {
		case res.code == 0 && after:
			return r.fail("D", "%s exited 0 while %s is damaged (and it still is):\n%s", strings.Join(argv, " "), t, tail(res.out))
		case res.code == 0 && !after && !hasFlag(argv, "--force") && !strings.Contains(strings.Join(argv, " "), "abort") && !(len(argv) > 1 && argv[1] == "repair"):
			return r.fail("D", "%s exited 0 and silently replaced the damaged %s:\n%s", strings.Join(argv, " "), t, tail(res.out))
		case res.code != 0 && res.code != 3 && strings.HasPrefix(t, "slot-") && actsOn(argv, strings.TrimPrefix(t, "slot-")):
			return r.fail("D", "%s exited %d, not 3, while %s is damaged:\n%s", strings.Join(argv, " "), res.code, t, tail(res.out))
		case res.code == 3 && damageAdvice(res.out, r.lastActive) == "":
			return r.fail("D", "%s exited 3 while %s is damaged but printed no command that repairs it:\n%s", strings.Join(argv, " "), t, tail(res.out))
		}
	}
	return nil
}

// actsOn: the command changes slot sl itself.
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

// replacing: the steps that replace the active slot with the target, run
// only while the way back (the fallback, staged whole) is usable.
// (recreate's BUILDING is not one: once the slot is torn down, building
// the target is the only way to a serving slot.)
var replacing = map[string]bool{"DEPLOYING": true, "TEARDOWN": true}

// allowedChanges: the slots this operation was allowed to change, from
// the history it appended: a --force, or a step that owns the change.
func (r *seqRun) allowedChanges(pre before) map[string]bool {
	allowed := map[string]bool{}
	h := r.history()
	if len(h) < pre.histLen {
		pre.histLen = 0
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
			if t := txns[e.TxnID]; t != nil && t.Slots.Candidate != "" {
				if a, _ := r.pointer(); a != t.Slots.Candidate {
					allowed[t.Slots.Candidate] = true
				}
			}
		case e.Type == "step" && owner[e.Phase]:
			if replacing[e.Phase] && !pre.fallbackOK {
				// Issue 32, class 1: the way back was not usable.
				continue
			}
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
	g, err := r.m.ground()
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
			return r.fail("I1", "known-good slot %s (%s) now holds %s, and no step that owns that change ran (with its fallback usable) and no --force was given", sl, want, got)
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
	g, err := r.m.ground()
	if err != nil {
		return
	}
	if p := g.slotPackage(active); p != "" && p != "none" && !strings.HasPrefix(p, "partial:") {
		if _, known := r.kg[active]; !known {
			r.kg[active] = p
		}
	}
}

// checkI2: the aliases follow the active slot, or switch status says why
// not and names the command that repairs it.
func (r *seqRun) checkI2() *violation {
	active, ok := r.pointer()
	if !ok || active == "" {
		return nil
	}
	g, err := r.m.ground()
	if err != nil {
		return nil
	}
	kube, reg := r.m.aliases(g)
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

type switchStatus struct {
	Consistent bool   `json:"consistent"`
	Next       string `json:"next"`
	Phase      string `json:"phase"`
}

func (r *seqRun) switchStatus() (switchStatus, result) {
	res := r.m.run([]string{"kubectl-bundle-switch", "status", "-o", "json"}, nil)
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
		return nil
	}
	if strings.Contains(res.out, "the previous deployment is in place") && !r.m.healthy(active) {
		return r.fail("I4", "%s says the previous deployment is in place, but the active slot %s fails its gate:\n%s", strings.Join(argv, " "), active, tail(res.out))
	}
	if len(argv) > 2 && argv[0] == "kubectl-bundle-switch" && argv[1] == "accept" && hasFlag(argv, "--if-soaked") && res.code == 0 && pre.switchPhase == "SWITCHED" {
		// exit 0 is "soaked and accepted": a timer's accept --if-soaked &&
		// retire goes on to destroy the previous slot.
		if raw, exists, ok := readRegular(r.m.state("switch.json")); exists && ok {
			var sw struct{ Phase string }
			if json.Unmarshal(raw, &sw) == nil && sw.Phase == "SWITCHED" {
				return r.fail("I4", "%s exited 0 while the switch still soaks (switch.json says SWITCHED):\n%s", strings.Join(argv, " "), tail(res.out))
			}
		}
	}
	revert := len(argv) > 1 && argv[0] == "kubectl-bundle-switch" && argv[1] == "back" && !hasFlag(argv, "--force") && pre.switchPhase == "SWITCHED"
	if revert && res.code == 0 && !r.m.healthy(active) {
		return r.fail("I4", "%s exited 0 with the active slot %s failing its gate:\n%s", strings.Join(argv, " "), active, tail(res.out))
	}
	if len(argv) > 2 && argv[0] == "kubectl-bundle-gate" && hasFlag(argv, "--record") && res.code == 0 {
		sl := argv[slices.Index(argv, "--slot")+1]
		if !r.m.healthy(sl) && strings.HasSuffix(argv[slices.Index(argv, "-f")+1], "gate.yaml") {
			return r.fail("I4", "%s exited 0 while slot %s fails its gate", strings.Join(argv, " "), sl)
		}
	}
	return nil
}

type journalView struct {
	Transaction *rawTxn `json:"transaction"`
	Next        *struct {
		Command string `json:"command"`
	} `json:"next"`
}

// chase (I3) runs the next command journal status prints, as printed, up
// to bound times: a plugin command runs in-process and must make progress
// (exit 0, a later phase, or a different failure); a script's is checked
// to run from anywhere.
func (r *seqRun) chase(bound int) *violation {
	prev := ""
	for i := 0; i < bound; i++ {
		pre := r.observe()
		st := r.m.run([]string{"kubectl-bundle-journal", "status", "-o", "json"}, nil)
		if st.code == 3 {
			adv := damageAdvice(st.out, r.lastActive)
			if adv == "" {
				return r.fail("D", "journal status exits 3 and prints no repair:\n%s", tail(st.out))
			}
			if v := r.runRepair(adv); v != nil {
				return v
			}
			continue
		}
		if st.code != 0 {
			return r.fail("I3", "journal status exits %d:\n%s", st.code, tail(st.out))
		}
		var jv journalView
		if err := json.Unmarshal([]byte(st.out), &jv); err != nil {
			return r.fail("I3", "journal status -o json: %v\n%s", err, st.out)
		}
		if jv.Transaction == nil {
			return nil
		}
		if jv.Next == nil || jv.Next.Command == "" {
			return r.fail("I3", "transaction %s in %s (%s) and journal status prints no next command", jv.Transaction.ID, jv.Transaction.Phase, jv.Transaction.Status)
		}
		cmd := jv.Next.Command
		res, v := r.runPrinted("next", cmd)
		if v != nil {
			return v
		}
		if res.code == -2 || res.code == -3 {
			return nil // a script's run
		}
		r.c.nexts++
		r.logf("  next as printed: %s -> %s %s", cmd, res, firstError(res.out))
		_, argv, _ := splitLine(cmd)
		if v := r.checkDamageMet(pre, argv, res); v != nil {
			return v
		}
		if v := r.checkI1(pre); v != nil {
			return v
		}
		if v := r.checkI4(pre, argv, res); v != nil {
			return v
		}
		r.updateKG()
		switch res.code {
		case 0:
			prev = ""
			continue
		case 2, 127:
			return r.fail("I3", "the next command journal status printed does not run as printed: %s: %s\n%s", cmd, res, tail(res.out))
		}
		if adv := advice(res.out, r.lastActive); adv != "" {
			r.lastAdvice = adv
		}
		after := r.m.run([]string{"kubectl-bundle-journal", "status", "-o", "json"}, nil)
		var av journalView
		_ = json.Unmarshal([]byte(after.out), &av)
		key := fmt.Sprintf("exit %d | %s | %s", res.code, firstError(res.out), phaseKey(av))
		if key == prev {
			return r.fail("I3", "the same failure with the same advice twice: %s\n%s", cmd, tail(res.out))
		}
		prev = key
	}
	return nil
}

func phaseKey(v journalView) string {
	if v.Transaction == nil {
		return "none"
	}
	next := ""
	if v.Next != nil {
		next = v.Next.Command
	}
	return v.Transaction.Phase + "/" + v.Transaction.Status + " next " + next
}

// settle ends a sequence as an operator would: repair what is damaged as
// printed and follow the advice; the invariants hold throughout.
func (r *seqRun) settle() *violation {
	r.op = -1
	for _, t := range slices.Sorted(func(yield func(string) bool) {
		for t := range r.damaged {
			if !yield(t) {
				return
			}
		}
	}) {
		if !r.stillDamaged(t) {
			continue
		}
		res := r.m.run([]string{"kubectl-bundle-journal", "status"}, nil)
		adv := damageAdvice(res.out, r.lastActive)
		if res.code != 3 || adv == "" {
			res = r.m.run([]string{"kubectl-bundle-slot", "destroy", "zz-none"}, nil)
			adv = damageAdvice(res.out, r.lastActive)
		}
		if adv == "" {
			continue
		}
		if v := r.runRepair(adv); v != nil {
			return v
		}
	}
	for _, sl := range []string{"a", "b"} {
		r.m.health["airgap-mgmt-"+sl] = true
	}
	return r.chase(4)
}

// aimsAt reports whether repair command cmd is about damage target t.
func (r *seqRun) aimsAt(cmd, t string) bool {
	if strings.Contains(cmd, r.m.damageFile(t)) {
		return true
	}
	switch {
	case strings.Contains(cmd, "bundle-journal repair"):
		return t == "transaction" || t == "history"
	case strings.Contains(cmd, "bundle-slot repair "):
		return strings.HasPrefix(t, "slot-") && strings.Contains(cmd+" ", " "+strings.TrimPrefix(t, "slot-")+" ")
	case strings.Contains(cmd, "bundle-switch to ") && strings.Contains(cmd, "--force"):
		return t == "active" || t == "switch"
	}
	return false
}
