package site

import (
	"errors"
	"fmt"
	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"slices"
	"strings"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// Active is the slot the active pointer names, read strictly. A missing
// pointer is a site where no slot is active yet (""), unless the state
// says a slot was made active (*LostPointerError). A pointer that is a
// symlink, a directory, empty, several lines, or a name that is not a slot
// name is damage (*state.DamageError, naming the command that repairs it),
// never "none".
func (s *Site) Active() (string, error) {
	if !s.pointerPresent {
		if lost := s.lostPointer(); lost != nil {
			return "", lost
		}
		return "", nil
	}
	if s.pointerProblem != nil {
		return "", &state.DamageError{Path: s.Dir.Join(record.ActiveFile), Problem: s.pointerProblem.Error(), Fix: s.ActiveFix()}
	}
	return s.pointer, nil
}

// LostPointerError is a missing active pointer while the state says slot
// Slot was made active (the switch record names it, or its record says it
// passed its gate and no switch names another): not a fresh site but
// damage. Slot stays protected, and a switch to it writes the pointer back.
type LostPointerError struct {
	*state.DamageError
	Slot string
}

func (e *LostPointerError) Unwrap() error { return e.DamageError }

// ServingOrLost is the active slot, or the slot a lost pointer named: the
// one that serves as far as the state can tell (damage to the pointer
// itself is an error).
func (s *Site) ServingOrLost() (string, error) {
	active, err := s.Active()
	if lp := (*LostPointerError)(nil); errors.As(err, &lp) {
		return lp.Slot, nil
	}
	return active, err
}

// couldServe reports whether slot n exists and is not known to be
// unable to serve: its record is missing (the history says it exists) or
// damaged, or it is ready. A slot whose create failed or whose destroy was
// killed half way serves nothing: a missing pointer to it lost nothing.
func (s *Site) couldServe(n string) bool {
	if !s.Exists(n) {
		return false
	}
	r, err := s.Slot(n)
	return err != nil || r.Ready()
}

// switchTo is the repair that makes slot n active again: a forced switch,
// or its record's repair first when it cannot be read.
func (s *Site) switchTo(n string) advice.Fix {
	r, err := s.Slot(n)
	switch {
	case err != nil:
		return advice.Do(record.RepairOf(s.Dir, n)) // its record first; then the switch
	case !r.Ready():
		// A destroy killed half way, a create that failed: a switch to it
		// refuses, so the pointer goes to a slot that can serve.
		return s.ActiveRepair(n)
	}
	return advice.Do(s.Dir.Plugin("switch", "to", n, "--force"))
}

// lostPointer decides whether a missing pointer is damage: the switch
// record names a slot that still exists (a switch began or ended there:
// the pointer was written), or, with no such record, the history records
// a switch and a slot's record says it passed its gate. Nil on a fresh
// site and in the first install before its switch.
func (s *Site) lostPointer() error {
	lost := func(name, why string, fix advice.Fix) error {
		return &LostPointerError{Slot: name, DamageError: &state.DamageError{Path: s.Dir.Join(record.ActiveFile),
			Problem: "it is missing, but " + why, Fix: fix}}
	}
	if sw := s.sw; s.swProblem == nil && sw != nil && s.couldServe(sw.Target) &&
		// The first switch ever, interrupted before it wrote the pointer:
		// no pointer was there to lose (switch status names the resume).
		!(sw.Phase == record.PhaseSwitching && sw.Previous == "") {
		return lost(sw.Target, "the switch record says slot "+sw.Target+" was made active", s.switchTo(sw.Target))
	}
	// The open blue-green transaction names the slot that serves: its
	// active slot until the switch, its candidate after it (the most
	// recently gated slot would be the untried candidate before it).
	if t := s.blueGreen(); t != nil {
		serving := t.Slots.Active
		switch {
		case t.Phase == journal.Switched && t.Status == "done", t.Phase == journal.Soaking, t.Phase == journal.Accepted, t.Phase == journal.Retired:
			serving = t.Slots.Candidate
		}
		if record.ValidName(serving) == nil && s.couldServe(serving) {
			return lost(serving, "the open blue-green transaction "+t.ID+" says slot "+serving+" serves", s.switchTo(serving))
		}
	}
	// A slot that passed its gate on a site that never switched is the
	// first install's normal middle (gate --record, then switch to):
	// only a switch in the history makes the missing pointer a loss. An
	// adopted slot is not: adopt registers the site's running deployment
	// as the active slot, so with no switch since, a missing pointer is
	// an adopt killed before it wrote the pointer (or a pointer removed).
	if !s.switched() {
		for _, n := range append(s.Names(), s.Recordless()...) {
			if l := s.Lineage(n); l.Exists && l.Adopted {
				return lost(n, "the history says slot "+n+" was adopted as the active slot (the site's running deployment)", s.switchTo(n))
			}
		}
		return nil
	}
	// The history's last switch went to a slot it says still exists:
	// that slot served (a gate of another slot since, after a revert,
	// does not make that one serve). Its record is rebuilt first when it
	// is missing or damaged; it is switched to when it holds its pass,
	// else gated first. A slot that is not ready serves nothing: then the
	// gates decide.
	if n := s.lastSwitchTo(); n != "" && s.Lineage(n).Exists {
		r, err := s.Slot(n)
		switch {
		case errors.As(err, new(*record.NotFoundError)):
			return lost(n, "the history's last switch made slot "+n+" active, and its record is missing",
				advice.Do(s.Dir.Plugin("slot", "repair", n)).Because("rebuilds its record from what runs; then this repair names the gate and the switch"))
		case err != nil:
			return lost(n, "the history's last switch made slot "+n+" active, and its record is damaged",
				advice.Do(record.RepairOf(s.Dir, n)).Because("rebuilds its record from what runs; then this repair names the gate and the switch"))
		case r.Ready() && r.Gated():
			return lost(n, "the history's last switch made slot "+n+" active and its record says it passed its gate",
				advice.Do(s.Dir.Plugin("switch", "to", n, "--force")))
		case r.Ready():
			return lost(n, "the history's last switch made slot "+n+" active", s.GateFirst(n))
		}
	}
	// A slot whose pass no longer holds (a deploy into it since did not
	// finish) still says the site was switched, but is named only when no
	// slot still holds its pass, and then gated before the switch.
	var gated, passed string
	var whenGated, whenPassed time.Time
	for _, n := range s.names {
		r, err := s.Slot(n)
		if err != nil || !r.Ready() || r.Gate == nil || !r.Gate.Passed {
			continue
		}
		if r.Gated() && r.Gate.Time.After(whenGated) {
			gated, whenGated = n, r.Gate.Time
		}
		if r.Gate.Time.After(whenPassed) {
			passed, whenPassed = n, r.Gate.Time
		}
	}
	switch {
	case gated != "":
		return lost(gated, "the history records a switch and the record of slot "+gated+" says it passed its gate",
			advice.Do(s.Dir.Plugin("switch", "to", gated, "--force")))
	case passed != "":
		return lost(passed, "the history records a switch and the record of slot "+passed+" says it passed its gate (before a deploy into it that did not finish)",
			s.GateFirst(passed))
	}
	return nil
}

// lastSwitchTo is the slot the history's last switch (to or back) went
// to, "" when it records none.
func (s *Site) lastSwitchTo() string {
	to := ""
	for _, ev := range s.events() {
		if n, ok := switchedTo(ev); ok {
			to = n
		}
	}
	return to
}

// switchedTo is the slot a switch event (to or back; not accept) made
// active: its detail is "to|back SLOT from PREVIOUS".
func switchedTo(ev journal.Event) (string, bool) {
	if ev.Type != "switch" {
		return "", false
	}
	what, _, _ := strings.Cut(ev.Detail, " ")
	if what != "to" && what != "back" {
		return "", false
	}
	if ev.Slot != "" {
		return ev.Slot, true
	}
	// "WHAT [FLAGS] SLOT from PREVIOUS": flags such as "--force
	// (ungated)" come before the slot.
	head, _, _ := strings.Cut(ev.Detail, " from ")
	f := strings.Fields(head)
	return f[len(f)-1], true
}

// GateFirst is the forced switch to slot n that runs only once n passes
// its gate (read-only: damage stops a recorded one).
func (s *Site) GateFirst(n string) advice.Fix {
	return advice.Do(s.Dir.Plugin("gate", "--slot", n), s.Dir.Plugin("switch", "to", n, "--force"))
}

// noSlotFix is the repair when no slot has a readable record: a slot the
// history says exists gets its record rebuilt from what runs (slot repair
// asks the machine), and only with none is the pointer removed.
//
// A slot whose record is damaged is rebuilt first (the pointer's repair
// is decided again from its record): removing the pointer then would lose
// which slot serves. Slots that exist but are not ready (a create that
// failed, a destroy killed half way) cannot be switched to: with no other,
// no slot is active.
func (s *Site) noSlotFix() advice.Fix {
	for _, n := range s.names {
		if _, err := s.Slot(n); errors.As(err, new(*record.DamagedError)) {
			return advice.Do(record.RepairOf(s.Dir, n)).Because("slot " + n + "'s record is damaged: rebuilds it first; the pointer's repair is decided from it")
		}
	}
	if gone := s.Recordless(); len(gone) > 0 {
		return advice.Do(record.RepairOf(s.Dir, gone[0])).Because("slot " + gone[0] + " has no record, but the history says it was created: rebuilds its record from what runs")
	}
	var unready []string
	for _, n := range s.names {
		if r, err := s.Slot(n); err == nil && !r.Ready() {
			unready = append(unready, "slot "+n+" is "+r.State)
		}
	}
	if len(unready) > 0 {
		return advice.Do(state.Remove(s.Dir.Join(record.ActiveFile))).Because("no slot is ready (" + strings.Join(unready, ", ") + "): no slot is active")
	}
	return advice.Do(state.Remove(s.Dir.Join(record.ActiveFile))).Because("no slot exists: no slot is active")
}

// ActiveFix is the command that rewrites a damaged pointer: switch to a slot
// that exists (the operator picks when there are several), or remove the
// pointer when no slot exists.
//
// Like ActiveRepair, it names only slots that passed their gate for what
// they hold (a forced switch skips the gate); with none, ActiveRepair's
// one command (the gate first) when a slot holds a package, else every
// (empty) slot.
func (s *Site) ActiveFix() advice.Fix {
	// An open update in place (in-place, recreate) changes the slot it
	// began on and keeps the pointer on it the whole time: that slot is
	// the one the pointer named, whatever its gate says now (a recreate
	// past its teardown has no cluster to gate until it is rebuilt).
	// Not once a switch moved the site off it (a forced switch while the
	// update was open: MovedOff): the slot switched to serves, and the
	// update's slot may be half-deployed, vouched for by no gate.
	if t := s.txnOrNil(); t != nil && t.Strategy != journal.BlueGreen && t.Slots.Active != "" && !journal.IsFinal(t.Phase) && !s.switchedAwayFrom(t) {
		if r, err := s.Slot(t.Slots.Active); err == nil && r.Ready() {
			return advice.Do(s.Dir.Plugin("switch", "to", t.Slots.Active, "--force")).Because(fmt.Sprintf("transaction %s (%s) updates slot %s and keeps the pointer on it while it is open: this writes the pointer back to slot %s (no gate: the update's run gates it)",
				t.ID, t.Strategy, t.Slots.Active, t.Slots.Active))
		}
	}
	// The history's last switch names the slot that served: its record
	// lost or damaged is rebuilt first (the repair is decided again from
	// it), never passed over for another slot's gate.
	if n := s.lastSwitchTo(); n != "" && s.Lineage(n).Exists {
		if _, err := s.Slot(n); err != nil {
			return advice.Do(record.RepairOf(s.Dir, n)).Because("the history's last switch made slot " + n + " active and its record cannot be read: rebuilds it first; the pointer's repair is decided from it")
		}
	}
	var cmds, all []advice.Cmd
	held := false
	for _, n := range s.names {
		if r, err := s.Slot(n); err == nil && r.Ready() {
			all = append(all, s.Dir.Plugin("switch", "to", n, "--force"))
			held = held || r.Package != nil || r.Deploying != nil
			if r.Gated() {
				cmds = append(cmds, s.Dir.Plugin("switch", "to", n, "--force"))
			}
		}
	}
	if len(cmds) == 0 && held {
		return s.ActiveRepair()
	}
	if len(cmds) == 0 {
		cmds = all // empty slots: none is vouched for, any makes the pointer readable
	}
	if len(cmds) == 0 {
		return s.noSlotFix()
	}
	return advice.OneOf(cmds...)
}

// CheckActiveRecord decides whether the active pointer's slot has a
// record. A pointer to a slot with no record (destroyed with --force, or
// removed from outside) is damage, except while the open transaction, a
// recreate of that very slot, has torn it down to rebuild it, or a
// blue-green update soaks on it (SoakGone: its revert is the way on). Its
// repair points the pointer at a slot that exists, or removes it when none
// does: never a switch to the slot that is gone.
func (s *Site) CheckActiveRecord(active string) error {
	if active == "" {
		return nil
	}
	_, err := s.Slot(active)
	if !errors.As(err, new(*record.NotFoundError)) {
		return nil // present, or damaged: the record's own error says so
	}
	if t := s.txnOrNil(); t != nil && t.Strategy == journal.Recreate && t.Slots.Active == active && !s.Lineage(active).Exists {
		// Torn down by the recreate, not built again yet: no damage. Built
		// again (the history says so) and its record gone: lost.
		return nil
	}
	if s.SoakGone(active) != "" {
		return nil
	}
	fix := s.ActiveFix()
	if s.Lineage(active).Exists {
		fix = s.PointerRepair(active)
	}
	return &state.DamageError{Path: s.Dir.Join(record.ActiveFile), Problem: fmt.Sprintf("slot %q has no record", active), Fix: fix}
}

// SoakGone is the slot to go back to when active, the candidate that the
// open blue-green transaction switched to, is gone (destroyed with --force
// during the soak) and the slot it replaced still has a record. That is no
// damage: the revert is the way on (it gates that slot, switches back and
// closes the transaction), and accept and a switch to the gone slot
// refuse, naming it.
func (s *Site) SoakGone(active string) string {
	t := s.blueGreen()
	if t == nil || t.Slots.Candidate != active || t.Slots.Active == "" || t.Slots.Active == active {
		return ""
	}
	switch t.Phase {
	case journal.Switched, journal.Soaking, journal.SwitchedBack:
	default:
		return ""
	}
	if _, err := s.Slot(t.Slots.Active); err != nil {
		return ""
	}
	return t.Slots.Active
}

// PointerRepair is the repair of a pointer naming slot active, which has
// no record: when the history says the slot was created and not destroyed
// (its record was removed from outside), slot repair rebuilds the record
// from what runs; else the pointer goes to a slot that exists (prefer
// first), or is removed.
func (s *Site) PointerRepair(active string, prefer ...string) advice.Fix {
	if s.Lineage(active).Exists {
		return advice.Do(record.RepairOf(s.Dir, active)).Because("the history says slot " + active + " was created and not destroyed: rebuilds its record from what runs")
	}
	return s.ActiveRepair(prefer...)
}

// ActiveRepair is one command that repairs the pointer, to run as printed
// where a single command is wanted (switch status's next): a forced switch
// to a ready slot with a readable record that passed its gate for what it holds
// (a forced switch skips the gate, so it must only ever name such a slot):
// the first of prefer that is one (callers name the slot the switch
// record or the pointer says serves first), else the first such slot.
// With slots but none gated, it gates the one it would name first (the
// switch runs only if that gate passes), unless it holds no package (an
// empty slot vouches for nothing: the switch only makes the pointer
// readable); with no slot, the pointer is removed.
func (s *Site) ActiveRepair(prefer ...string) advice.Fix {
	// After the callers' own, the slot the history last switched to.
	prefer = append(slices.Clip(prefer), s.lastSwitchTo())
	var ok, held, gated []string
	for _, n := range s.names {
		if r, err := s.Slot(n); err == nil && r.Ready() {
			ok = append(ok, n)
			if r.Package != nil || r.Deploying != nil {
				held = append(held, n)
			}
			if r.Gated() {
				gated = append(gated, n)
			}
		}
	}
	pick := func(among []string) string {
		for _, p := range prefer {
			if p != "" && slices.Contains(among, p) {
				return p
			}
		}
		if len(among) > 0 {
			return among[0]
		}
		return ""
	}
	if n := pick(gated); n != "" {
		return advice.Do(s.Dir.Plugin("switch", "to", n, "--force"))
	}
	if n := pick(held); n != "" {
		return s.GateFirst(n).Because("no slot passed its gate for what it holds: the switch runs only once slot " + n + " passes it")
	}
	if n := pick(ok); n != "" {
		// No slot holds a package: none can pass a gate, and none is
		// vouched for; the switch only makes the pointer readable again.
		return advice.Do(s.Dir.Plugin("switch", "to", n, "--force"))
	}
	return s.noSlotFix()
}

// switchedAwayFrom reports whether a switch may have made another slot
// than t's active: the switch record names another (or cannot be read),
// the history cannot be read or acknowledges lines lost since t began (a
// switch may have been among them), or the last switch since t began
// went to another slot (one back to t's slot, as MovedOff advises, puts
// the site where the update began). "Since t began" is by the history's
// order from t's begin event, not by the clock (a clock stepped back
// hides no switch); by the time of t's first step only when the history
// no longer holds the begin.
func (s *Site) switchedAwayFrom(t *journal.Transaction) bool {
	if s.swProblem != nil || (s.sw != nil && s.sw.Target != "" && s.sw.Target != t.Slots.Active) {
		return true
	}
	if s.historyErr != nil || (s.history != nil && s.history.CutSinceBegin(t.ID)) {
		return true
	}
	events := s.events()
	from := -1
	for i, ev := range events {
		if ev.TxnID == t.ID && ev.Type == journal.EventBegin {
			from = i
		}
	}
	var begun time.Time
	if len(t.Steps) > 0 {
		begun = t.Steps[0].StartedAt
	}
	away := false
	for i, ev := range events {
		if (from >= 0 && i < from) || (from < 0 && ev.Time.Before(begun)) {
			continue
		}
		if to, ok := switchedTo(ev); ok {
			away = to != t.Slots.Active
		}
	}
	return away
}
