package site

import (
	"errors"
	"fmt"
	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"strings"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// Switch is the switch record, read strictly: nil when no switch ever
// happened; unreadable, invalid or of an unknown phase is damage naming
// its repair, never "none".
func (s *Site) Switch() (*record.Switch, error) {
	if s.swProblem != nil {
		return nil, &state.DamageError{Path: s.Dir.Join(record.SwitchFile), Problem: s.swProblem.Error(), Fix: s.switchFix()}
	}
	return s.sw, nil
}

// switchFix is the command that rewrites a damaged switch record: a forced
// switch to the active slot writes it anew. When the pointer is damaged or
// names a slot with no record, that switch cannot run (exit 2, no such
// slot): a forced switch to a slot that exists writes the pointer and the
// record anew; with no such slot, or while a recreate rebuilds the slot
// the pointer names, the damaged record is removed (no switch is in
// progress, and the recreate goes on).
func (s *Site) switchFix() advice.Fix {
	remove := func(why string) advice.Fix {
		return advice.Do(state.Remove(s.Dir.Join(record.SwitchFile))).Because(why)
	}
	a, err := s.Active()
	switch {
	case err == nil && a == "":
		return remove("no slot is active: there is no switch to keep")
	case err == nil:
		r, rerr := s.Slot(a)
		if rerr == nil && !r.Ready() {
			// A create that failed, a destroy killed half way: a switch to
			// it refuses. While the recreate rebuilds it, the recreate goes
			// on; else the pointer goes to a slot that can serve.
			if t := s.txnOrNil(); t != nil && t.Strategy == journal.Recreate && t.Slots.Active == a {
				return remove("slot " + a + " is being rebuilt by a recreate: there is no switch to keep")
			}
			if fix := s.ActiveRepair(); fix.Last().Is("switch", "to") {
				return fix.Because("slot " + a + " is " + r.State + ", not ready: makes a slot that can serve active and writes the switch record anew")
			}
			return remove("slot " + a + " is " + r.State + " and no other slot can serve: there is no switch to keep")
		}
		if !errors.As(rerr, new(*record.NotFoundError)) {
			if bg := SoakingOn(s.txnOrNil(), a); bg != nil {
				return advice.Do(s.Dir.Plugin("switch", "to", a, "--force")).Because("re-points every alias at the active slot " + a + " and rebuilds the soak of transaction " + bg.ID + ", which keeps slot " + bg.Slots.Active + " as the revert target")
			}
			return advice.Do(s.Dir.Plugin("switch", "to", a, "--force")).Because("re-points every alias at the active slot " + a + " and starts a new soak with no previous slot")
		}
		if s.txnErr == nil && s.CheckActiveRecord(a) == nil {
			return remove("slot " + a + " is being rebuilt by a recreate: there is no switch to keep")
		}
	}
	why := "the active pointer is damaged"
	if err == nil {
		why = "slot " + a + " has no record"
	}
	if fix := s.ActiveRepair(); fix.Last().Is("switch", "to") {
		return fix.Because(why + ": makes a slot that exists active and writes the switch record anew")
	}
	return remove(why + " and no slot is left: there is no switch to keep")
}

// SoakingOn returns t when it is a blue-green transaction that has
// switched to target and not been accepted: its soak keeps its active slot
// as the revert target whatever switch.json says.
func SoakingOn(t *journal.Transaction, target string) *journal.Transaction {
	if t == nil || t.Strategy != journal.BlueGreen || t.Slots.Candidate != target || t.Slots.Active == "" || t.Slots.Active == target {
		return nil
	}
	switch t.Phase {
	case journal.Switched, journal.Soaking:
		return t
	}
	return nil
}

// RevertTarget is the slot kept for a revert: the previous slot while the
// switch record soaks, else the active slot of an open blue-green
// transaction that has not been accepted (it is the active slot before the
// switch and the revert target after it, whatever switch.json says).
func (s *Site) RevertTarget() string {
	if sw := s.sw; s.swProblem == nil && sw != nil && sw.Soaking() {
		return sw.Previous
	}
	if t := s.blueGreen(); t != nil && t.Phase != journal.Accepted && t.Phase != journal.Retired {
		return t.Slots.Active
	}
	return ""
}

// Kept is the slot protected besides active (the pointer's):
//   - while a switch or a switch back is unfinished, the end of it the
//     pointer does not name (a switch back killed before it moved the
//     pointer is returning to the known-good slot);
//   - else the revert target (RevertTarget);
//   - else the slot the switch record made active, when the pointer names
//     another: which is right cannot be told, so neither is given up.
//
// "" when none.
func (s *Site) Kept(active string) string {
	sw := s.sw
	if s.swProblem != nil {
		sw = nil
	}
	if sw != nil && sw.Unfinished() {
		for _, n := range []string{sw.Target, sw.Previous} {
			if n != "" && n != active {
				return n
			}
		}
	}
	if r := s.RevertTarget(); r != "" && r != active {
		return r
	}
	if sw != nil && sw.Target != "" && sw.Target != active {
		return sw.Target
	}
	if sw == nil && s.swProblem == nil {
		// switch.json is gone (a partial restore of the state dir, or
		// removed): what the history says began keeps its revert target
		// protected until a switch record is written again.
		if _, prev := s.HistorySoak(); prev != "" && prev != active {
			return prev
		}
	}
	return ""
}

// HistorySoak is the last switch the history records (the slot switched
// to and the one it came from), while no accept or switch back of it
// followed: the soak the history says began, whatever became of
// switch.json and transaction.json. ("", "") when the last switch was
// accepted or switched back, had no previous slot, or none is recorded.
func (s *Site) HistorySoak() (target, previous string) {
	for _, ev := range s.events() {
		if ev.Type != "switch" {
			continue
		}
		what, rest, _ := strings.Cut(ev.Detail, " ")
		switch {
		case what == "to":
			// "to B from A" (A is "none" without a previous slot).
			to, from, ok := strings.Cut(rest, " from ")
			if !ok || from == "none" || record.ValidName(from) != nil || record.ValidName(to) != nil || from == to {
				target, previous = "", ""
				continue
			}
			target, previous = to, from
		case what == "accept", what == "back":
			target, previous = "", ""
		}
	}
	return target, previous
}

// Protects reports whether slot name is protected: the active slot, or
// the revert target while a switch soaks. The pointer is read first and
// decides alone for the active slot, so that the record of the active slot
// can be repaired while switch.json is damaged too (each repair would
// otherwise wait on the other); damage to what decides is an error.
//
// A missing pointer that the state says was lost protects the slot it
// names; the open blue-green transaction keeps its active slot, the
// revert target, when switch.json is missing.
func (s *Site) Protects(name string) (bool, error) {
	active, err := s.ServingOrLost()
	if err != nil {
		return false, err
	}
	if name == active {
		return true, nil
	}
	// An S1 owner's damaged record: the history keeps what it owns.
	if len(s.OwnedPerHistory(name)) > 0 {
		return true, nil
	}
	if _, err := s.Switch(); err != nil {
		return false, err
	}
	return s.Kept(active) == name, nil
}

// ProtectsRecord is Protects for the repair of name's damaged record:
// while the pointer itself is damaged, which slot it names cannot be read,
// and its own repair is decided from the slots' records (ActiveFix), so
// every slot counts as protected and its record is rebuilt (a record's
// repair never touches the cluster); waiting on the pointer would leave
// neither repairable.
//
// The same holds while the pointer names a slot that has no record: its
// repair (ActiveFix) may be this record's.
func (s *Site) ProtectsRecord(name string) (bool, error) {
	active, err := s.ServingOrLost()
	if err != nil {
		if errors.As(err, new(*state.DamageError)) {
			return true, nil
		}
		return false, err
	}
	if _, err := s.Slot(active); active != "" && errors.As(err, new(*record.NotFoundError)) {
		return true, nil
	}
	return s.Protects(name)
}

// pointerAgrees checks the pointer against a finished switch record. A
// pointer rewritten from outside (an old backup restored, a hand "fix") to
// name another existing slot than the one the record, and the aliases
// with it, made active cannot be trusted to say which slot to keep. The
// repair is the forced switch to the slot the record names.
func (s *Site) pointerAgrees(active string) error {
	sw := s.sw
	if sw == nil || active == "" || sw.Target == "" || sw.Target == active || !s.Exists(sw.Target) || !s.Exists(active) {
		return nil
	}
	switch sw.Phase {
	case record.PhaseSwitched, record.PhaseAccepted, record.PhaseSwitchedBack:
	default:
		return nil // an unfinished switch: either end may be named (Kept keeps both)
	}
	fix := advice.Do(s.Dir.Plugin("switch", "to", sw.Target, "--force")).
		Because(fmt.Sprintf("or, if slot %s is meant to serve: %s", active, s.Dir.Plugin("switch", "to", active, "--force")))
	if t := s.blueGreen(); t != nil && t.Slots.Candidate == sw.Target && t.Slots.Active == active {
		// Within an open blue-green update, going back to the slot it
		// replaced is its revert (which also destroys the candidate and
		// closes it): a forced switch there would leave it soaking on a
		// slot no longer active.
		fix = advice.Do(s.Dir.Plugin("switch", "to", sw.Target, "--force")).
			Because(fmt.Sprintf("the slot transaction %s soaks on; to go back to slot %s, then run: %s", t.ID, active,
				advice.Program(journal.ScriptPath(journal.BlueGreen), "revert").WithEnv(s.Dir.CommandEnv())))
	}
	return &state.DamageError{Path: s.Dir.Join(record.ActiveFile),
		Problem: fmt.Sprintf("it names slot %s, but the switch record says slot %s was made active (%s), and the aliases follow the record", active, sw.Target, sw.Phase),
		Fix:     fix}
}

// Protected reads which slots are protected from the active pointer, the
// switch record and the open transaction (not the slots' records),
// failing closed. The revert target of a soak is kept when switch.json is
// missing too: the open blue-green transaction names it.
func (s *Site) Protected() (active, soaking string, err error) {
	if active, err = s.Active(); err != nil {
		return "", "", err
	}
	if _, err := s.Switch(); err != nil {
		return "", "", err
	}
	if s.txnErr != nil {
		return "", "", s.txnErr
	}
	if err := s.pointerAgrees(active); err != nil {
		return "", "", err
	}
	return active, s.Kept(active), nil
}

// Protection is what the state says is protected now.
type Protection struct {
	// Active is the active slot ("" on a site where none is active yet).
	Active string
	// Soaking is the previous slot while a switch soaks: the revert target.
	Soaking string
	// Txn is the open transaction, if any.
	Txn *journal.Transaction
	// Owners are the slots that an S1 (repoint) update left running
	// workload clusters, with those clusters.
	Owners map[string][]string
	// Switch is the switch record (nil when there is none).
	Switch *record.Switch
}

// Protection reads the active pointer, the switch record, the protected
// slots' records and the open transaction, failing closed: damage to any
// is an error, never "none".
func (s *Site) Protection() (*Protection, error) {
	active, soaking, err := s.Protected()
	if err != nil {
		return nil, err
	}
	for _, name := range []string{active, soaking} {
		if name == "" {
			continue
		}
		_, lerr := s.Slot(name)
		var nf *record.NotFoundError
		var dmg *record.DamagedError
		switch {
		case errors.As(lerr, &dmg):
			// What the slot holds cannot be decided: repair the record,
			// keeping the slot, before anything else changes.
			dmg.Protected = true
			return nil, &state.DamageError{Path: dmg.Path, Problem: fmt.Sprintf("the record of slot %s, which is protected, cannot be read (%v)", name, dmg.Err), Fix: dmg.Repair()}
		case errors.As(lerr, &nf) && name == active:
			if err := s.CheckActiveRecord(active); err != nil {
				return nil, err
			}
		case lerr != nil && !errors.As(lerr, &nf):
			return nil, lerr
		}
	}
	return &Protection{Active: active, Soaking: soaking, Txn: s.txn, Owners: s.WorkloadOwners(), Switch: s.sw}, nil
}

// Unfinished is the command that completes the switch the record says
// did not finish (none when it finished): the one switch status names.
func (p *Protection) Unfinished() advice.Cmd {
	switch {
	case p.Switch == nil:
	case p.Switch.Phase == record.PhaseSwitching && p.Switch.Target != "":
		return advice.Plugin("switch", "to", p.Switch.Target)
	case p.Switch.Phase == record.PhaseSwitchingBack:
		return advice.Plugin("switch", "back")
	}
	return advice.Cmd{}
}

// Why says why name is protected ("" when it is not).
func (p *Protection) Why(name string) string {
	switch name {
	case p.Active:
		return "it is the active slot"
	case p.Soaking:
		if !p.Unfinished().IsZero() {
			return "it is an end of a switch that did not finish (" + advice.Plugin("switch", "status").String() + " says INTERRUPTED), kept until it does"
		}
		return "it is the previous slot, kept as the revert target while the switch soaks"
	}
	if w := p.Owners[name]; len(w) > 0 {
		return fmt.Sprintf("it owns workload clusters %s, which it kept running when an S1 repoint update made another slot active", strings.Join(w, ", "))
	}
	return ""
}

// The steps of an open blue-green transaction that a switch finds started
// and goes on with (its own, resumed), named once: a switch to the
// candidate runs SWITCHED and begins SOAKING; a switch back may find the
// soak, its own SWITCHED_BACK, or a SWITCHED that did not finish.
var (
	SwitchToSteps   = []journal.Phase{journal.Switched, journal.Soaking}
	SwitchBackSteps = []journal.Phase{journal.Soaking, journal.SwitchedBack, journal.Switched}
)

// NotBack refuses a switch to the slot the open blue-green transaction t
// replaced, once t has switched away from it: going back is t's revert,
// which its script owns (it switches back and then destroys the
// candidate), and after accept that slot is being retired. A plain switch
// there would leave t soaking on a slot no longer active, and its accept
// would retire the slot that serves. (force does not change it: it
// overrides the gate, not who owns the change.)
func NotBack(t *journal.Transaction, target, active string) error {
	if t == nil || t.Strategy != journal.BlueGreen || target != t.Slots.Active || active == target || t.Step(journal.SwitchedBack) != nil {
		return nil
	}
	script := journal.ScriptPath(journal.BlueGreen)
	switch t.Phase {
	case journal.Switched, journal.Soaking:
		return errkind.New(errkind.Conflict, "transaction %s (blue-green) has switched from slot %s to %s and soaks: going back to %s is its revert, which also destroys the candidate %s; run: %s revert",
			t.ID, target, t.Slots.Candidate, target, t.Slots.Candidate, script)
	case journal.Accepted, journal.Retired:
		return errkind.New(errkind.Conflict, "transaction %s (blue-green) accepted slot %s and retires slot %s; run: %s accept",
			t.ID, t.Slots.Candidate, target, script)
	}
	return nil
}
