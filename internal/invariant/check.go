package invariant

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/digest"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
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
//	U   a usage error (exit 2) changes nothing

// Violation is a broken invariant: which (I1..I4, D, U) and how.
type Violation struct {
	Inv  string
	Op   int // the operation after which it was seen
	What string
	// Key is which check saw it: shrinking keeps a sequence only while
	// the same check fails.
	Key string
}

func (v *Violation) Error() string { return fmt.Sprintf("%s after op %d: %s", v.Inv, v.Op+1, v.What) }

// Counters are what a run did.
type Counters struct {
	Seqs, Ops, Damages, Repairs, Nexts, Chases, Scripts int
	Kills                                               map[string]int // by kind
}

// Result is how one command ended.
type Result struct {
	Out    string
	Code   int
	Killed bool
	Took   time.Duration
}

// The codes of a printed command a harness did not run to its end: a
// strategy script the model does not run (checked to run from anywhere),
// and a chain "gate && ..." whose gate still fails (its verdict, not a
// failed repair).
const (
	CodeNotRun    = -2
	CodeGateFails = -3
)

func (r Result) String() string {
	if r.Killed {
		return "killed"
	}
	return fmt.Sprintf("exit %d", r.Code)
}

// Harness runs commands on one site: the model in-process, TestInvariant
// as processes.
type Harness interface {
	// Healthy is the ground truth of whether slot sl passes the site's gate.
	Healthy(sl string) bool
	// SetHealth heals or breaks slot sl's workload.
	SetHealth(sl string, ok bool) error
	// Expand replaces an operation's placeholders with the site's files.
	Expand(argv []string) []string
	// Plugin runs a read-only plugin command.
	Plugin(argv ...string) Result
	// Exec runs an operation's command (argv expanded).
	Exec(r *Run, p Parsed, argv []string) (Result, *Violation)
	// RunPrinted runs a printed command line as an operator pastes it
	// (what: "next", "repair" or "advice").
	RunPrinted(r *Run, what, line string) (Result, *Violation)
	// Op runs an operation of the harness's own (false when line is none).
	Op(r *Run, f []string) (bool, *Violation)
}

// Config is how a harness settles and chases.
type Config struct {
	// ChaseAfterFailure is how often a failed mutating command is
	// followed by chasing journal status's next command (6 times).
	ChaseAfterFailure float64
	// SettleChase is how many next commands settling follows.
	SettleChase int
	// MustClose: the transaction must close within SettleChase next
	// commands, and the aliases follow the active slot once switch
	// status's repair ran.
	MustClose bool
}

// Run runs one sequence on a fresh site and checks after each operation.
type Run struct {
	*Files
	H   Harness
	Cfg Config
	Rng interface{ Float64() float64 } // the checks' own choices
	C   *Counters
	Log []string

	kg         map[string]string // known-good slot -> the package the machine holds in it
	lastAdvice string
	lastActive string
	damaged    map[string]bool
	op         int
}

// NewRun is a run of a sequence of seed on the site files reads.
func NewRun(h Harness, cfg Config, files *Files, seed uint64, c *Counters) *Run {
	if c.Kills == nil {
		c.Kills = map[string]int{}
	}
	files.Forget()
	return &Run{Files: files, H: h, Cfg: cfg, Rng: newRand(seed), C: c, kg: map[string]string{}, damaged: map[string]bool{}}
}

// exec, printed and plugin run a command through the harness: any file
// may change while it runs.
func (r *Run) exec(p Parsed, argv []string) (Result, *Violation) {
	r.Forget()
	defer r.Forget()
	return r.H.Exec(r, p, argv)
}

func (r *Run) printed(what, line string) (Result, *Violation) {
	r.Forget()
	defer r.Forget()
	return r.H.RunPrinted(r, what, line)
}

func (r *Run) plugin(argv ...string) Result {
	r.Forget()
	defer r.Forget()
	return r.H.Plugin(argv...)
}

// Logf adds a line to what happened.
func (r *Run) Logf(format string, a ...any) { r.Log = append(r.Log, fmt.Sprintf(format, a...)) }

// Fail is a violation of inv after the current operation.
func (r *Run) Fail(inv, format string, a ...any) *Violation {
	return &Violation{Inv: inv, Op: r.op, What: fmt.Sprintf(format, a...), Key: inv + ": " + format}
}

// Sequence runs ops, then settles: the first violation ends it.
func (r *Run) Sequence(ops []string) *Violation {
	r.updateKG()
	r.C.Seqs++
	for i, line := range ops {
		r.op = i
		r.C.Ops++
		if v := r.Step(line); v != nil {
			return v
		}
	}
	return nil
}

// before is what the checks need from the state before an operation.
type before struct {
	txn         *Txn
	active      string
	soaking     string
	histLen     int
	gateTimes   map[string]time.Time
	damaged     []string
	switchPhase string
	// fallbackOK: the open transaction's fallback is staged whole (or it
	// has none): a step that replaces the active slot may run.
	fallbackOK bool
}

func (r *Run) observe() before {
	b := before{gateTimes: map[string]time.Time{}, fallbackOK: true}
	b.txn, _ = r.Txn()
	b.active, _ = r.Pointer()
	b.soaking, _ = r.Soaking()
	b.histLen = len(r.History())
	b.switchPhase = r.SwitchPhase()
	for _, sl := range Slots {
		if rec, ok := r.Record(sl); ok && rec.Gate != nil {
			b.gateTimes[sl] = rec.Gate.Time
		}
	}
	if b.txn != nil && b.txn.Fallback != "" {
		b.fallbackOK = r.StagedUsable(b.txn.Fallback)
	}
	for t := range r.damaged {
		if r.StillDamaged(t) {
			b.damaged = append(b.damaged, t)
		} else {
			delete(r.damaged, t)
		}
	}
	slices.Sort(b.damaged)
	return b
}

// Step runs operation line (the current one) and checks I1-I4 and damage.
func (r *Run) Step(line string) *Violation {
	pre := r.observe()
	f := strings.Fields(line)
	var res Result
	var argv, ran []string // ran: an operation's own command, as drawn
	switch f[0] {
	case "health":
		if err := r.H.SetHealth(f[1], f[2] == "ok"); err != nil {
			return r.Fail("setup", "%s: %v", line, err)
		}
		r.Logf("%s", line)
		return nil
	case "damage", "stage", "lose":
		var ok bool
		var err error
		switch f[0] {
		case "damage":
			ok, err = r.Damage(f[1], f[2])
			if ok {
				r.damaged[f[1]] = true
			}
		case "stage":
			ok, err = r.DamageStaged(filepath.Base(r.H.Expand(f[1:2])[0]), f[2])
		case "lose":
			// A partial restore of the state dir: both records gone.
			for _, t := range []string{"transaction", "switch"} {
				if d, e := r.Damage(t, "delete"); d {
					ok = true
					r.damaged[t] = true
				} else if e != nil {
					err = e
				}
			}
		}
		r.Forget()
		if err != nil {
			return r.Fail("setup", "%s: %v", line, err)
		}
		if ok {
			r.C.Damages++
		}
		r.Logf("%s (%v)", line, ok)
		return nil
	case "next":
		return r.Chase(1, true)
	case "repair":
		if r.lastAdvice == "" {
			r.Logf("repair: no advice printed so far")
			return nil
		}
		cmd := r.lastAdvice
		r.lastAdvice = ""
		var v *Violation
		var ran bool
		if res, ran, v = r.repairAsPrinted("advice", cmd); !ran {
			return v
		}
		r.Logf("repair: %s -> %s %s", cmd, res, FirstError(res.Out))
		_, argv, _ = SplitLine(cmd)
		if notRunnable(res) {
			return r.Fail("I3", "the command an error printed does not run as printed: %s: %s\n%s", cmd, res, Tail(res.Out))
		}
	default:
		handled, v := r.H.Op(r, f)
		r.Forget()
		if handled {
			return v
		}
		p, err := ParseOp(line)
		if err != nil {
			return r.Fail("setup", "%v", err)
		}
		argv = r.H.Expand(p.Argv)
		site := r.Fingerprint()
		res, v = r.exec(p, argv)
		if v != nil {
			return v
		}
		r.Logf("%s -> %s %s", line, res, FirstError(res.Out))
		if res.Code == 2 && !IsScript(argv) && !(len(argv) > 1 && argv[0] == "kubectl-bundle-journal" && argv[1] == "run") && r.Fingerprint() != site {
			// A usage error (a bad flag or argument, a named file missing)
			// is found before anything changes (journal run keeps its
			// step's exit code, and records the step failed).
			return r.Fail("U", "%s exited 2 (usage) but changed the site:\n%s", line, Tail(res.Out))
		}
		if res.Code != 0 && !res.Killed && slices.Contains(p.Argv, "$NOKUBE") && r.Fingerprint() != site {
			// A file the command names that does not exist refuses it
			// before it writes, whatever the exit code.
			return r.Fail("U", "%s names a kubeconfig that does not exist, failed (exit %d), and changed the site:\n%s", line, res.Code, Tail(res.Out))
		}
		ran = p.Argv
	}
	// I1 first: a known-good slot lost is the promise broken, whatever
	// else the command did wrong on the way.
	if v := r.checkI1(pre); v != nil {
		return v
	}
	if ran != nil {
		if v := r.checkDamageMet(pre, ran, res); v != nil {
			return v
		}
		if v := r.checkClaim(argv, res); v != nil {
			return v
		}
	}
	if v := r.checkI4(pre, argv, res); v != nil {
		return v
	}
	if v := r.checkI2(); v != nil {
		return v
	}
	r.updateKG()
	if adv := Advice(res.Out, r.lastActive); adv != "" && res.Code != 0 && !res.Killed {
		r.lastAdvice = adv
		if dadv := DamageAdvice(res.Out, r.lastActive); res.Code == 3 && dadv != "" && r.Rng.Float64() < 0.5 {
			// Met with exit 3 and a repair: it must work as printed.
			if v := r.runRepair(dadv); v != nil {
				return v
			}
		}
	}
	if r.Cfg.ChaseAfterFailure > 0 && !res.Killed && res.Code != 0 && len(argv) > 0 && Mutating(argv) && r.Rng.Float64() < r.Cfg.ChaseAfterFailure {
		return r.Chase(6, false)
	}
	return nil
}

// repairAsPrinted runs a printed repair: ran false when it was not run
// to its end (a script, a gate that still fails: nothing to check) or
// broke an invariant (v).
func (r *Run) repairAsPrinted(what, cmd string) (Result, bool, *Violation) {
	res, v := r.printed(what, cmd)
	if v != nil || res.Code == CodeNotRun || res.Code == CodeGateFails {
		return res, false, v
	}
	r.C.Repairs++
	return res, true, nil
}

// notRunnable: a printed command that does not run as printed (usage,
// hung, not found).
func notRunnable(res Result) bool { return res.Code == 2 || res.Code == 124 || res.Code == 127 }

// runRepair runs a damage report's repair as printed: it must exit 0 and
// repair what it is about.
func (r *Run) runRepair(cmd string) *Violation {
	pre := r.observe()
	// A transaction.json removed while the history tells the open
	// transaction whole: the repair rebuilds it, never closes it.
	lost, whole := "", false
	if pre.txn == nil && slices.Contains(pre.damaged, "transaction") {
		lost, whole = r.OpenInHistory()
	}
	var res Result
	// A repair that fails with a different damage report and repair made
	// progress (the rule for next commands): follow it, a few times.
	seen := map[string]bool{}
	for runs := 1; ; runs++ {
		var v *Violation
		var ran bool
		if res, ran, v = r.repairAsPrinted("repair", cmd); !ran {
			return v
		}
		r.lastAdvice = ""
		r.Logf("  repair as printed: %s -> %s %s", cmd, res, FirstError(res.Out))
		// The same failure with the same advice twice is no progress.
		failure := cmd + " | " + FirstError(res.Out)
		next := DamageAdvice(res.Out, r.lastActive)
		if res.Code != 3 || next == "" || seen[failure] || runs >= 5 {
			break
		}
		seen[failure] = true
		cmd = next
	}
	if res.Code != 0 {
		return r.Fail("D", "the repair a damage report printed fails when run as printed: %s: %s\n%s", cmd, res, Tail(res.Out))
	}
	// (Only the transaction's own repair: with other damage beside it, a
	// report may name that damage's repair first, and the transaction's
	// comes with the next report.)
	if t, _ := r.Txn(); whole && strings.Contains(cmd, "journal repair") && (t == nil || t.ID != lost) {
		return r.Fail("D", "the repair of the removed transaction.json of transaction %s, which the history tells whole, did not rebuild it: %s", lost, cmd)
	}
	// The repair of a file this sequence damaged must repair it (advice
	// that only reads is no repair); a report of damage the sequence did
	// not make (a pointer to a destroyed slot) is not checked here.
	var aimed []string
	for _, t := range pre.damaged {
		if r.aimsAt(cmd, t) {
			aimed = append(aimed, t)
		}
	}
	if len(aimed) > 0 {
		fixed := false
		for _, t := range aimed {
			fixed = fixed || !r.StillDamaged(t)
		}
		if !fixed {
			return r.Fail("D", "the repair a damage report printed exits 0 but repairs nothing: %s (still damaged: %s)", cmd, strings.Join(aimed, ", "))
		}
	}
	if v := r.checkI1(pre); v != nil {
		return v
	}
	r.updateKG()
	return nil
}

// aimsAt reports whether repair command cmd is about damage target t.
func (r *Run) aimsAt(cmd, t string) bool {
	if strings.Contains(cmd, r.DamageFile(t)) {
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

// checkDamageMet: while a state file is damaged, a mutating command that
// reads it exits 3 and names a repair; it never succeeds and leaves the
// damage in place.
func (r *Run) checkDamageMet(pre before, argv []string, res Result) *Violation {
	if res.Killed || !Mutating(argv) || len(pre.damaged) == 0 || (len(argv) > 1 && argv[1] == "repair") {
		// (A repair command is checked where it is printed: runRepair.)
		return nil
	}
	for _, t := range pre.damaged {
		relevant := true
		if sl, ok := strings.CutPrefix(t, "slot-"); ok {
			relevant = Names(argv, sl) || sl == pre.active || IsScript(argv) && scriptActsOn(pre, argv, sl)
		}
		if !relevant {
			continue
		}
		if strings.Contains(res.Out, "the previous deployment is in place") && r.StillDamaged(t) {
			return r.Fail("D", "%s says the previous deployment is in place while %s is damaged (exit %d):\n%s", strings.Join(argv, " "), t, res.Code, Tail(res.Out))
		}
		after := r.StillDamaged(t)
		switch {
		case res.Code == 0 && after:
			return r.Fail("D", "%s exited 0 while %s is damaged (and it still is):\n%s", strings.Join(argv, " "), t, Tail(res.Out))
		case res.Code == 0 && !after && !HasFlag(argv, "--force") && !strings.Contains(strings.Join(argv, " "), "abort"):
			return r.Fail("D", "%s exited 0 and silently replaced the damaged %s:\n%s", strings.Join(argv, " "), t, Tail(res.Out))
		case res.Code != 0 && res.Code != 3 && strings.HasPrefix(t, "slot-") && actsOn(argv, strings.TrimPrefix(t, "slot-")):
			// (A command refused for another reason before it read a
			// shared file is no violation; one about the damaged slot is.)
			return r.Fail("D", "%s exited %d, not 3, while %s is damaged:\n%s", strings.Join(argv, " "), res.Code, t, Tail(res.Out))
		case res.Code == 3 && DamageAdvice(res.Out, r.lastActive) == "":
			return r.Fail("D", "%s exited 3 while %s is damaged but printed no command that repairs it:\n%s", strings.Join(argv, " "), t, Tail(res.Out))
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

// replacing: the steps that replace the active slot with the target, run
// only while the way back (the fallback, staged whole) is usable.
// (recreate's BUILDING is not one: once the slot is torn down, building
// the target is the only way to a serving slot.)
var replacing = map[string]bool{"DEPLOYING": true, "TEARDOWN": true}

// owner: the steps that own a change of the slot they name.
var owner = map[string]bool{"DEPLOYING": true, "RESTORING": true, "TEARDOWN": true, "BUILDING": true, "BUILDING_FALLBACK": true, "RETIRED": true}

// allowedChanges: the slots this operation was allowed to change, from
// the history it appended: a --force, or a step that owns the change.
func (r *Run) allowedChanges(pre before) map[string]bool {
	allowed := map[string]bool{}
	h := r.History()
	if len(h) < pre.histLen {
		pre.histLen = 0 // damaged and rewritten: look at all of it
	}
	txns := map[string]*Txn{}
	if pre.txn != nil {
		txns[pre.txn.ID] = pre.txn
	}
	if t, _ := r.Txn(); t != nil {
		txns[t.ID] = t
	}
	for _, e := range h[pre.histLen:] {
		switch {
		case e.Type == "force":
			allowed[e.Slot] = true
		case e.Type == "step" && e.Phase == "DESTROYING":
			// Blue-green's rollback and revert destroy the candidate,
			// which is never protected by then (a revert has switched
			// back first); never the slot that is active.
			if t := txns[e.TxnID]; t != nil && t.Slots.Candidate != "" {
				if a, _ := r.Pointer(); a != t.Slots.Candidate {
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
func (r *Run) checkI1(pre before) *Violation {
	g, err := r.Ground()
	if err != nil {
		return r.Fail("setup", "reading the fake machine: %v", err)
	}
	allowed := r.allowedChanges(pre)
	for sl, want := range r.kg {
		if allowed[sl] {
			delete(r.kg, sl)
			continue
		}
		if got := g.SlotPackage(sl); got != want {
			if got == "" {
				got = "no cluster"
			}
			return r.Fail("I1", "known-good slot %s (%s) now holds %s, and no step that owns that change ran (with its fallback usable) and no --force was given", sl, want, got)
		}
	}
	return nil
}

// updateKG: a protected slot stays known-good; the active slot becomes
// known-good once its last gate passed for the package it holds.
func (r *Run) updateKG() {
	active, okA := r.Pointer()
	soak, okS := r.Soaking()
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
	rec, ok := r.Record(active)
	if !ok || rec.Package == nil || rec.Gate == nil || !rec.Gate.Passed || rec.Gate.Package != rec.Package.Digest {
		return
	}
	g, err := r.Ground()
	if err != nil {
		return
	}
	if p := g.SlotPackage(active); p != "" && p != "none" && !strings.HasPrefix(p, "partial:") {
		if _, known := r.kg[active]; !known {
			r.kg[active] = p
		}
	}
}

// SwitchStatus is switch status -o json, as the checks read it.
type SwitchStatus struct {
	Consistent bool   `json:"consistent"`
	Next       string `json:"next"`
	Phase      string `json:"phase"`
}

func (r *Run) switchStatus() (SwitchStatus, Result) {
	res := r.plugin("kubectl-bundle-switch", "status", "-o", "json")
	var st SwitchStatus
	if res.Code == 0 {
		_ = json.Unmarshal([]byte(res.Out), &st)
	}
	return st, res
}

// aliasesOff reports whether the aliases (kube, reg) do not follow the
// active slot, when one is named.
func (r *Run) aliasesOff() (active, kube, reg string, off bool) {
	active, ok := r.Pointer()
	if !ok || active == "" {
		return "", "", "", false
	}
	kube, reg = r.Aliases()
	if rec, ok := r.Record(active); ok && rec.Provider == "existing" && reg == "" {
		// An existing-provider slot runs no registry of its own: no
		// registry alias follows it.
		reg = active
	}
	return active, kube, reg, kube != active || reg != active
}

// checkI2: the aliases follow the active slot, or switch status says why
// not and names the command that repairs it.
func (r *Run) checkI2() *Violation {
	active, kube, reg, off := r.aliasesOff()
	if !off {
		return nil
	}
	st, res := r.switchStatus()
	if res.Code != 0 {
		return nil // damage: met by the mutating commands
	}
	if st.Consistent || st.Next == "" {
		return r.Fail("I2", "the aliases point at %q (kubeconfig) and %q (registry), the active slot is %s, and switch status says consistent=%v next=%q phase=%q", kube, reg, active, st.Consistent, st.Next, st.Phase)
	}
	return nil
}

// checkI4: no exit 0, and no "the previous deployment is in place",
// while the slot it vouches for fails its gate.
func (r *Run) checkI4(pre before, argv []string, res Result) *Violation {
	if res.Killed || len(argv) == 0 {
		return nil
	}
	active, ok := r.Pointer()
	if !ok || active == "" {
		return nil
	}
	rec, ok := r.Record(active)
	if !ok {
		return nil // a pointer to no record is damage: met by the damage checks
	}
	// A run that closed before it changed anything ("slot a untouched")
	// claims the slot is as it was, not that it passes its gate: a workload
	// broken before the run stays broken, and is no run's doing.
	if strings.Contains(res.Out, "the previous deployment is in place") && !strings.Contains(res.Out, " untouched\n") && !r.H.Healthy(active) {
		return r.Fail("I4", "%s says the previous deployment is in place, but the active slot %s fails its gate:\n%s", strings.Join(argv, " "), active, Tail(res.Out))
	}
	if len(argv) > 2 && argv[0] == "kubectl-bundle-switch" && argv[1] == "accept" && HasFlag(argv, "--if-soaked") && res.Code == 0 && pre.switchPhase == "SWITCHED" {
		// exit 0 is "soaked and accepted": a timer's accept --if-soaked &&
		// retire goes on to destroy the previous slot.
		if r.SwitchPhase() == "SWITCHED" {
			return r.Fail("I4", "%s exited 0 while the switch still soaks (switch.json says SWITCHED):\n%s", strings.Join(argv, " "), Tail(res.Out))
		}
	}
	update := IsScript(argv) && (strings.HasSuffix(argv[0], "in-place.sh") || strings.HasSuffix(argv[0], "recreate.sh") || (len(argv) > 1 && argv[1] == "apply"))
	if update && res.Code == 0 {
		gated := rec.Gate != nil && !rec.Gate.Time.Equal(pre.gateTimes[active])
		switch {
		case gated && !r.H.Healthy(active):
			return r.Fail("I4", "%s exited 0 after gating slot %s, which fails its gate:\n%s", strings.Join(argv, " "), active, Tail(res.Out))
		case rec.Gate == nil || !rec.Gate.Passed || rec.Package == nil || rec.Gate.Package != rec.Package.Digest:
			return r.Fail("I4", "%s exited 0 with the active slot %s's last gate not a pass for the package it holds", strings.Join(argv, " "), active)
		}
	}
	// A revert (the script's, or switch back without --force) that exits 0
	// has returned to a slot that passes its gate (switch back finishing
	// an interrupted switch back moves no further and gates nothing).
	revert := (IsScript(argv) && len(argv) > 1 && argv[1] == "revert" && !HasFlag(argv, "--force")) ||
		(len(argv) > 1 && argv[0] == "kubectl-bundle-switch" && argv[1] == "back" && !HasFlag(argv, "--force") && pre.switchPhase == "SWITCHED")
	if revert && res.Code == 0 && !r.H.Healthy(active) {
		return r.Fail("I4", "%s exited 0 with the active slot %s failing its gate:\n%s", strings.Join(argv, " "), active, Tail(res.Out))
	}
	if argv[0] == "kubectl-bundle-gate" && HasFlag(argv, "--record") && res.Code == 0 {
		sl, file := flagValue(argv, "--slot"), flagValue(argv, "-f")
		if !r.H.Healthy(sl) && strings.HasSuffix(file, "gate.yaml") {
			return r.Fail("I4", "%s exited 0 while slot %s fails its gate", strings.Join(argv, " "), sl)
		}
	}
	return nil
}

// scriptActsOn: a strategy run acts on slot sl (besides the active
// slot): the open transaction's slots, the slot kept during a soak, and,
// for a blue-green apply beginning, any slot (it picks its candidate).
func scriptActsOn(pre before, argv []string, sl string) bool {
	if pre.txn != nil {
		return sl == pre.txn.Slots.Active || sl == pre.txn.Slots.Candidate
	}
	return sl == pre.soaking || strings.HasSuffix(argv[0], "blue-green.sh") && len(argv) > 1 && argv[1] == "apply"
}

// Names reports whether the command names slot sl.
func Names(argv []string, sl string) bool { return slices.Contains(argv[1:], sl) }

// HasFlag reports whether argv holds flag.
func HasFlag(argv []string, flag string) bool { return slices.Contains(argv, flag) }

// checkClaim: a step that changes a slot, which this command recorded
// done (journal step or journal run), is borne out by the machine: a
// recorded step is a claim of what its plugin did, never more (issue 32,
// class 3).
func (r *Run) checkClaim(argv []string, res Result) *Violation {
	if res.Code != 0 || res.Killed || len(argv) < 3 || filepath.Base(argv[0]) != "kubectl-bundle-journal" || (argv[1] != "step" && argv[1] != "run") {
		return nil
	}
	t, _ := r.Txn()
	if t == nil || t.Phase != argv[2] || t.Status != string(journal.StatusDone) {
		return nil
	}
	jt := &journal.Transaction{Strategy: journal.Strategy(t.Strategy), Target: t.Target, Fallback: t.Fallback,
		Slots: journal.Slots{Active: t.Slots.Active, Candidate: t.Slots.Candidate}}
	c, ok := site.StepClaim(jt, journal.Phase(t.Phase))
	if !ok {
		return nil
	}
	g, err := r.Ground()
	if err != nil {
		return r.Fail("setup", "reading the fake machine: %v", err)
	}
	got := g.SlotPackage(c.Slot)
	switch c.Change {
	case site.ChangeCreate:
		ok = got != ""
	case site.ChangeDestroy:
		// The existing provider leaves the operator's cluster as it is:
		// only the record goes, which the machine does not show.
		ok = got == "" || g.OperatorCluster(c.Slot)
	case site.ChangeDeploy:
		ok = got != "" && got == r.packageNamed(c.Digest)
	}
	if ok {
		return nil
	}
	if got == "" {
		got = "no cluster"
	}
	return r.Fail("I4", "%s exited 0 and step %s is recorded done (%s of slot %s), but slot %s holds %s:\n%s", strings.Join(argv, " "), t.Phase, c.Change, c.Slot, c.Slot, got, Tail(res.Out))
}

// packageNamed is the file name of the site's package ($V1, $V2) whose
// digest is digest ("" when neither is).
func (r *Run) packageNamed(digest string) string {
	for _, p := range r.H.Expand([]string{"$V1", "$V2"}) {
		if d := fileDigest(p); d != "" && d == strings.TrimPrefix(digest, "sha256:") {
			return filepath.Base(p)
		}
	}
	return ""
}

// fileDigest is a file's digest (digest.File), computed once.
func fileDigest(p string) string {
	digests.Lock()
	defer digests.Unlock()
	if d, ok := digests.m[p]; ok {
		return d
	}
	d, _ := digest.File(p)
	if digests.m == nil {
		digests.m = map[string]string{}
	}
	digests.m[p] = d
	return d
}

var digests struct {
	sync.Mutex
	m map[string]string
}

// flagValue is the word after flag in argv ("" when none).
func flagValue(argv []string, flag string) string {
	if i := slices.Index(argv, flag); i >= 0 && i+1 < len(argv) {
		return argv[i+1]
	}
	return ""
}

type journalView struct {
	Transaction *Txn `json:"transaction"`
	Next        *struct {
		Command string `json:"command"`
	} `json:"next"`
}

func (r *Run) journalStatus() (journalView, Result, error) {
	res := r.plugin("kubectl-bundle-journal", "status", "-o", "json")
	var jv journalView
	err := json.Unmarshal([]byte(res.Out), &jv)
	return jv, res, err
}

// Chase (I3) runs the next command journal status prints, as printed, up
// to bound times (asOp: an operation of the sequence, which stops at the
// first failure; else the workloads healed first, as an operator fixes
// what the gate reports before following the advice). Each run must make
// progress: exit 0, a later phase, or a different failure or advice.
//
// The next command carries the gate the transaction was begun with, which
// may be $GATEFAIL, a gate no workload passes: the operator's fix for
// what it reports is the gate file itself, so while chasing it checks
// what $GATE checks (restored after).
func (r *Run) Chase(bound int, asOp bool) *Violation {
	if !asOp {
		r.C.Chases++
		for _, sl := range Slots {
			_ = r.H.SetHealth(sl, true)
		}
		failing := filepath.Join(r.Root, "gate-fails.yaml")
		if was, err := os.ReadFile(failing); err == nil {
			if fixed, err := os.ReadFile(filepath.Join(r.Root, "gate.yaml")); err == nil && os.WriteFile(failing, fixed, 0o600) == nil {
				defer func() { _ = os.WriteFile(failing, was, 0o600) }()
			}
		}
	}
	prev := ""
	for i := 0; i < bound; i++ {
		pre := r.observe()
		jv, st, err := r.journalStatus()
		if st.Code == 3 {
			adv := DamageAdvice(st.Out, r.lastActive)
			if adv == "" {
				return r.Fail("D", "journal status exits 3 and prints no repair:\n%s", Tail(st.Out))
			}
			if v := r.runRepair(adv); v != nil {
				return v
			}
			continue
		}
		if st.Code != 0 {
			return r.Fail("I3", "journal status exits %d:\n%s", st.Code, Tail(st.Out))
		}
		if err != nil {
			return r.Fail("I3", "journal status -o json: %v\n%s", err, st.Out)
		}
		if jv.Transaction == nil {
			if asOp {
				r.Logf("next: no transaction")
			}
			return nil
		}
		if jv.Next == nil || jv.Next.Command == "" {
			return r.Fail("I3", "transaction %s in %s (%s) and journal status prints no next command", jv.Transaction.ID, jv.Transaction.Phase, jv.Transaction.Status)
		}
		cmd := jv.Next.Command
		res, v := r.printed("next", cmd)
		if v != nil {
			return v
		}
		if res.Code == CodeNotRun || res.Code == CodeGateFails {
			return nil // a script's run, checked to run from anywhere
		}
		r.C.Nexts++
		r.Logf("  next as printed: %s -> %s %s", cmd, res, FirstError(res.Out))
		_, argv, _ := SplitLine(cmd)
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
		if res.Code == 0 {
			prev = ""
			continue
		}
		if notRunnable(res) {
			return r.Fail("I3", "the next command journal status printed does not run as printed: %s: %s\n%s", cmd, res, Tail(res.Out))
		}
		if adv := Advice(res.Out, r.lastActive); adv != "" {
			r.lastAdvice = adv
		}
		av, _, _ := r.journalStatus()
		key := fmt.Sprintf("exit %d | %s | %s", res.Code, FirstError(res.Out), phaseKey(av))
		if key == prev {
			return r.Fail("I3", "the same failure with the same advice twice: %s\n%s", cmd, Tail(res.Out))
		}
		prev = key
		if asOp {
			return nil
		}
	}
	if asOp || !r.Cfg.MustClose {
		return nil
	}
	if t, _ := r.Txn(); t != nil {
		return r.Fail("I3", "following journal status's next command %d times did not close transaction %s (%s %s)", bound, t.ID, t.Phase, t.Status)
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

// Settle ends a sequence as an operator would: repair what is damaged as
// printed, heal the workloads, follow the advice (until the transaction
// closes, with MustClose, and then repair what switch status reports);
// the invariants hold throughout.
func (r *Run) Settle() *Violation {
	r.op = -1
	for _, t := range slices.Sorted(func(yield func(string) bool) {
		for t := range r.damaged {
			if !yield(t) {
				return
			}
		}
	}) {
		if !r.StillDamaged(t) {
			continue
		}
		// The damage report of journal status, else of a mutating command
		// that changes nothing (destroying a slot that does not exist).
		res := r.plugin("kubectl-bundle-journal", "status")
		adv := DamageAdvice(res.Out, r.lastActive)
		if res.Code != 3 || adv == "" {
			res = r.plugin("kubectl-bundle-slot", "destroy", "zz-none")
			adv = DamageAdvice(res.Out, r.lastActive)
		}
		if adv == "" {
			continue
		}
		if v := r.runRepair(adv); v != nil {
			return v
		}
	}
	if v := r.Chase(r.Cfg.SettleChase, false); v != nil || !r.Cfg.MustClose {
		return v
	}
	for i := 0; i < 3; i++ {
		// Read again after each repair: one may remove the pointer (its
		// slot destroyed with --force, and none left).
		active, kube, reg, off := r.aliasesOff()
		if !off {
			return nil
		}
		st, res := r.switchStatus()
		if res.Code != 0 || st.Next == "" {
			return r.Fail("I2", "the aliases point at %q and %q, the active slot is %s, and switch status names no repair (%s)", kube, reg, active, res)
		}
		pre := r.observe()
		fix, v := r.printed("repair", st.Next)
		if v != nil {
			return v
		}
		r.Logf("  switch repair as printed: %s -> %s %s", st.Next, fix, FirstError(fix.Out))
		if v := r.checkI1(pre); v != nil {
			return v
		}
		if fix.Code != 0 {
			return r.Fail("I2", "the repair switch status prints fails: %s: %s\n%s", st.Next, fix, Tail(fix.Out))
		}
	}
	return r.Fail("I2", "switch status's repair, run three times, did not make the aliases follow the active slot")
}
