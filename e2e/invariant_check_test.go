package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
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

// ---- what the state dir says (read raw: damage must not stop the checker) ----

type rawRecord struct {
	Package *struct {
		Digest string `json:"digest"`
	} `json:"package"`
	Gate *struct {
		Passed  bool      `json:"passed"`
		Package string    `json:"package"`
		Time    time.Time `json:"time"`
	} `json:"gate"`
}

func (r *seqRun) record(sl string) (*rawRecord, bool) {
	p := r.q.state("slots", sl+".json")
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return nil, false
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, false
	}
	rec := &rawRecord{}
	if json.Unmarshal(b, rec) != nil {
		return nil, false
	}
	return rec, true
}

// pointer reads the active pointer: ok false when it is damaged.
func (r *seqRun) pointer() (string, bool) {
	p := r.q.state("active")
	fi, err := os.Lstat(p)
	if os.IsNotExist(err) {
		return "", true
	}
	if err != nil || !fi.Mode().IsRegular() {
		return "", false
	}
	b, _ := os.ReadFile(p)
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" || strings.ContainsAny(s, "\n\r") || !regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`).MatchString(s) {
		return "", false
	}
	return s, true
}

type rawTxn struct {
	ID       string `json:"id"`
	Strategy string `json:"strategy"`
	Phase    string `json:"phase"`
	Status   string `json:"status"`
	Seq      int64  `json:"seq"`
	Slots    struct {
		Active    string `json:"active"`
		Candidate string `json:"candidate"`
	} `json:"slots"`
}

// txn reads transaction.json: nil, true when there is none; ok false when
// it is damaged.
func (r *seqRun) txn() (*rawTxn, bool) {
	p := r.q.state("journal", "transaction.json")
	fi, err := os.Lstat(p)
	if os.IsNotExist(err) {
		return nil, true
	}
	if err != nil || !fi.Mode().IsRegular() {
		return nil, false
	}
	b, _ := os.ReadFile(p)
	t := &rawTxn{}
	if json.Unmarshal(b, t) != nil || t.ID == "" {
		return nil, false
	}
	return t, true
}

// soaking reads switch.json: the previous slot while a switch soaks.
func (r *seqRun) soaking() (string, bool) {
	p := r.q.state("switch.json")
	fi, err := os.Lstat(p)
	if os.IsNotExist(err) {
		return "", true
	}
	if err != nil || !fi.Mode().IsRegular() {
		return "", false
	}
	b, _ := os.ReadFile(p)
	var sw struct {
		Phase    string `json:"phase"`
		Previous string `json:"previous"`
	}
	if json.Unmarshal(b, &sw) != nil {
		return "", false
	}
	if sw.Previous != "" && (sw.Phase == "SWITCHING" || sw.Phase == "SWITCHED" || sw.Phase == "SWITCHING_BACK") {
		return sw.Previous, true
	}
	return "", true
}

type histEvent struct {
	Seq    int64  `json:"seq"`
	TxnID  string `json:"txn"`
	Type   string `json:"type"`
	Phase  string `json:"phase"`
	Status string `json:"status"`
	Slot   string `json:"slot"`
}

// history reads the complete lines of history.jsonl.
func (r *seqRun) history() []histEvent {
	b, err := os.ReadFile(r.q.state("journal", "history.jsonl"))
	if err != nil {
		return nil
	}
	var out []histEvent
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		var e histEvent
		if len(line) > 0 && line[len(line)-1] == '\n' && json.Unmarshal(line, &e) == nil {
			out = append(out, e)
		}
	}
	return out
}

// stillDamaged reports whether a target this sequence damaged still is.
func (r *seqRun) stillDamaged(target string) bool {
	switch target {
	case "active":
		a, ok := r.pointer()
		if !ok {
			return true
		}
		if a == "" {
			return false
		}
		if _, ok := r.record(a); ok {
			return false
		}
		// A pointer to a slot with no record: damage, except while a
		// recreate of that slot rebuilds it.
		t, _ := r.txn()
		_, err := os.Lstat(r.q.state("slots", a+".json"))
		return !(os.IsNotExist(err) && t != nil && t.Strategy == "recreate" && t.Slots.Active == a)
	case "switch":
		_, ok := r.soaking()
		return !ok
	case "transaction":
		_, ok := r.txn()
		return !ok
	case "history":
		// Lines lost before the transaction's last one, or below the
		// history's mark when the journal keeps one (a torn last line is
		// what a crash leaves, and is repaired without asking).
		if _, err := os.Lstat(r.q.state("journal", "history.jsonl")); os.IsNotExist(err) {
			return false // moved aside: a new history starts from the transaction
		}
		h := r.history()
		var last int64
		if len(h) > 0 {
			last = h[len(h)-1].Seq
		}
		if b, err := os.ReadFile(r.q.state("journal", "history.mark")); err == nil {
			var m struct {
				Seq int64 `json:"seq"`
			}
			if json.Unmarshal(b, &m) == nil && last < m.Seq {
				return true
			}
		}
		t, ok := r.txn()
		return ok && t != nil && last < t.Seq-1
	}
	sl := strings.TrimPrefix(target, "slot-")
	p := r.q.state("slots", sl+".json")
	if _, err := os.Lstat(p); os.IsNotExist(err) {
		return false
	}
	_, ok := r.record(sl)
	return !ok
}

// ---- the operation and its checks ----

// before is what the checks need from the state before an operation.
type before struct {
	txn       *rawTxn
	active    string
	soaking   string
	histLen   int
	gateTimes map[string]time.Time
	damaged   []string // targets damaged before the op
	health    map[string]bool
}

func (r *seqRun) observe() before {
	b := before{gateTimes: map[string]time.Time{}, health: map[string]bool{}}
	b.txn, _ = r.txn()
	b.active, _ = r.pointer()
	b.soaking, _ = r.soaking()
	b.histLen = len(r.history())
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
	res := r.q.exec(nil, cmd, nil, 0, time.Minute)
	r.c.repairs++
	r.lastAdvice = ""
	r.logf("  repair as printed: %s -> %s %s", cmd, res, firstError(res.out))
	if res.code != 0 {
		return r.fail("D", "the repair a damage report printed fails when run as printed: %s: %s\n%s", cmd, res, tail(res.out))
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
	if len(argv) > 1 && argv[0] == "kubectl-bundle-gate" && hasFlag(argv, "--record") && res.code == 0 {
		sl := argv[slices.Index(argv, "--slot")+1]
		if !r.q.inv.healthy(sl) && strings.HasSuffix(argv[slices.Index(argv, "-f")+1], "gate.yaml") {
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

// chase (I3) runs the next command journal status prints, verbatim, up to
// bound times (the workloads healed first unless asOp: an operator fixes
// what the gate reports before following the advice). Each run must make
// progress: exit 0, a later phase, or a different failure or advice.
func (r *seqRun) chase(bound int, asOp bool) *violation {
	if !asOp {
		r.c.chases++
		for _, sl := range []string{"a", "b"} {
			_ = r.q.inv.setHealth(sl, true)
		}
	}
	prev := ""
	for i := 0; i < bound; i++ {
		pre := r.observe()
		st := r.q.plugin("kubectl-bundle-journal", "status", "-o", "json")
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
			if asOp {
				r.logf("next: no transaction")
			}
			return nil
		}
		if jv.Next == nil || jv.Next.Command == "" {
			return r.fail("I3", "transaction %s in %s (%s) and journal status prints no next command", jv.Transaction.ID, jv.Transaction.Phase, jv.Transaction.Status)
		}
		cmd := jv.Next.Command
		r.c.nexts++
		res := r.q.exec(nil, cmd, nil, 0, 2*time.Minute)
		r.logf("  next as printed: %s -> %s %s", cmd, res, firstError(res.out))
		if v := r.checkDamageMet(pre, strings.Fields(cmd), res); v != nil {
			return v
		}
		if v := r.checkI1(pre); v != nil {
			return v
		}
		if v := r.checkI4(pre, strings.Fields(cmd), res); v != nil {
			return v
		}
		r.updateKG()
		switch res.code {
		case 0:
			prev = ""
			continue
		case 2, 124:
			return r.fail("I3", "the next command journal status printed does not run as printed: %s: %s\n%s", cmd, res, tail(res.out))
		}
		if adv := advice(res.out, r.lastActive); adv != "" {
			r.lastAdvice = adv
		}
		after := r.q.plugin("kubectl-bundle-journal", "status", "-o", "json")
		var av journalView
		_ = json.Unmarshal([]byte(after.out), &av)
		key := fmt.Sprintf("exit %d | %s | %s", res.code, firstError(res.out), phaseKey(av))
		if key == prev {
			return r.fail("I3", "the same failure with the same advice twice: %s\n%s", cmd, tail(res.out))
		}
		prev = key
		if asOp {
			return nil
		}
	}
	if asOp {
		return nil
	}
	if t, _ := r.txn(); t != nil {
		return r.fail("I3", "following journal status's next command %d times did not close transaction %s (%s %s)", bound, t.ID, t.Phase, t.Status)
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

// settle ends a sequence as an operator would: heal the workloads, follow
// the advice until the transaction closes, repair what switch status
// reports; the invariants hold throughout and the site ends consistent.
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
		// The damage report of journal status, else of a mutating command
		// that changes nothing (destroying a slot that does not exist).
		res := r.q.plugin("kubectl-bundle-journal", "status")
		adv := damageAdvice(res.out, r.lastActive)
		if res.code != 3 || adv == "" {
			res = r.q.plugin("kubectl-bundle-slot", "destroy", "zz-none")
			adv = damageAdvice(res.out, r.lastActive)
		}
		if adv == "" {
			continue
		}
		if v := r.runRepair(adv); v != nil {
			return v
		}
	}
	if v := r.chase(8, false); v != nil {
		return v
	}
	active, ok := r.pointer()
	if !ok || active == "" {
		return nil
	}
	for i := 0; i < 3; i++ {
		kube, reg := r.q.aliases()
		if kube == active && reg == active {
			return nil
		}
		st, res := r.switchStatus()
		if res.code != 0 || st.Next == "" {
			return r.fail("I2", "the aliases point at %q and %q, the active slot is %s, and switch status names no repair (%s)", kube, reg, active, res)
		}
		pre := r.observe()
		fix := r.q.exec(nil, st.Next, nil, 0, time.Minute)
		r.logf("  switch repair as printed: %s -> %s %s", st.Next, fix, firstError(fix.out))
		if v := r.checkI1(pre); v != nil {
			return v
		}
		if fix.code != 0 {
			return r.fail("I2", "the repair switch status prints fails: %s: %s\n%s", st.Next, fix, tail(fix.out))
		}
	}
	return r.fail("I2", "switch status's repair, run three times, did not make the aliases follow the active slot")
}

// ---- reading what a command printed ----

var commandRE = regexp.MustCompile(`(?:kubectl bundle-[a-z]+|mv |rm |(?:/\S*|\b)scripts/[a-z-]+\.sh|/\S*kubectl-bundle-scripts/[a-z-]+\.sh)[^;|()\n]*`)

var placeholderRE = regexp.MustCompile(`\b[A-Z][A-Z_]+\b`)

// advice is the command an error message tells the operator to run: the
// one after "repair:" or "run:", else the last command on the error's line;
// of alternatives ("A | B") the one for lastActive when there is one.
func advice(out, lastActive string) string {
	var cands []string
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "error:") && !strings.Contains(line, "repair:") && !strings.Contains(line, "run: ") && !strings.Contains(line, "damaged") {
			continue
		}
		seg := line
		for _, k := range []string{"repair: ", "run: "} {
			if i := strings.LastIndex(line, k); i >= 0 {
				seg = line[i+len(k):]
			}
		}
		// Of alternatives, the one for the slot that serves.
		parts := strings.Split(seg, " | ")
		chosen := parts[0]
		for _, p := range parts {
			if lastActive != "" && strings.Contains(p+" ", " "+lastActive+" ") {
				chosen = p
				break
			}
		}
		// A template (SLOT, PACKAGE) is a hint, not a command.
		for _, m := range commandRE.FindAllString(chosen, -1) {
			if !placeholderRE.MatchString(m) {
				cands = append(cands, m)
			}
		}
	}
	if len(cands) == 0 {
		return ""
	}
	c := strings.TrimSpace(cands[len(cands)-1])
	return strings.TrimRight(c, ".,:")
}

// damageAdvice is the repair a damage report prints: the command on the
// line that says what is damaged ("" when no line does).
func damageAdvice(out, lastActive string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, " is damaged") || strings.Contains(line, " is unreadable") ||
			strings.Contains(line, "is missing, but the history") || strings.Contains(line, "that no crash can lose") {
			if adv := advice(line, lastActive); adv != "" {
				return adv
			}
		}
	}
	return ""
}

func firstError(out string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "error:") || strings.HasPrefix(line, "FAIL:") || strings.HasPrefix(line, "BROKEN:") {
			if len(line) > 240 {
				line = line[:240] + "..."
			}
			return "| " + line
		}
	}
	return ""
}

func tail(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) > 25 {
		lines = lines[len(lines)-25:]
	}
	return "    " + strings.Join(lines, "\n    ")
}
