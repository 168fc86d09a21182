package slot

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// ActiveFile is the pointer file naming the active slot: the one authority
// on which slot serves.
const ActiveFile = "active"

// ReadActive reads the active pointer strictly. A missing pointer is a site
// where no slot is active yet (""), unless the state says a slot was made
// active (*LostPointerError). A pointer that is a symlink, a directory,
// empty, several lines, or a name that is not a slot name is damage
// (*state.DamageError, naming the command that repairs it), never "none".
func ReadActive(d *state.Dir) (string, error) {
	p := d.Join(ActiveFile)
	s, err := state.ReadPointer(p)
	if errors.Is(err, fs.ErrNotExist) {
		if lost := lostPointer(d); lost != nil {
			return "", lost
		}
		return "", nil
	}
	damage := func(problem string) error {
		return &state.DamageError{Path: p, Problem: problem, Fix: ActiveFix(d)}
	}
	switch {
	case err != nil:
		return "", damage(err.Error())
	case strings.TrimSpace(s) == "":
		return "", damage("it is empty")
	case strings.ContainsAny(s, "\r\n"):
		return "", damage("it holds more than one line")
	case ValidName(s) != nil:
		return "", damage(fmt.Sprintf("%q is not a slot name", s))
	}
	return s, nil
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

// switchRecordFile is switchover's record, read here only for the slot it
// last made active (switchover imports this package).
const switchRecordFile = "switch.json"

// lostPointer decides whether a missing pointer is damage: the switch
// record names a slot that still exists (a switch began or ended there:
// the pointer was written), or, with no such record, the history records
// a switch and a slot's record says it passed its gate. Nil on a fresh
// site and in the first install before its switch.
func lostPointer(d *state.Dir) error {
	lost := func(name, why, fix string) error {
		return &LostPointerError{Slot: name, DamageError: &state.DamageError{Path: d.Join(ActiveFile),
			Problem: "it is missing, but " + why, Fix: fix}}
	}
	var sw struct{ Phase, Target, Previous string }
	if data, err := state.ReadSmall(d.Join(switchRecordFile), 1<<20); err == nil && json.Unmarshal(data, &sw) == nil &&
		ValidName(sw.Target) == nil && Exists(d, sw.Target) &&
		// The first switch ever, interrupted before it wrote the pointer:
		// no pointer was there to lose (switch status names the resume).
		!(sw.Phase == "SWITCHING" && sw.Previous == "") {
		fix := "kubectl bundle-switch to " + sw.Target + " --force"
		if _, err := Load(d, sw.Target); err != nil {
			fix = RepairCommand(sw.Target) // its record first; then the switch
		}
		return lost(sw.Target, "the switch record says slot "+sw.Target+" was made active", fix)
	}
	// The open blue-green transaction names the slot that serves: its
	// active slot until the switch, its candidate after it (the most
	// recently gated slot would be the untried candidate before it).
	if t, err := journal.New(d).Load(); err == nil && t != nil && t.Strategy == journal.BlueGreen {
		serving := t.Slots.Active
		switch {
		case t.Phase == journal.Switched && t.Status == "done", t.Phase == journal.Soaking, t.Phase == journal.Accepted, t.Phase == journal.Retired:
			serving = t.Slots.Candidate
		}
		if ValidName(serving) == nil && Exists(d, serving) {
			fix := "kubectl bundle-switch to " + serving + " --force"
			if _, err := Load(d, serving); err != nil {
				fix = RepairCommand(serving) // its record first; then the switch
			}
			return lost(serving, "the open blue-green transaction "+t.ID+" says slot "+serving+" serves", fix)
		}
	}
	// A slot that passed its gate on a site that never switched is the
	// first install's normal middle (gate --record, then switch to):
	// only a switch in the history makes the missing pointer a loss. An
	// adopted slot is not: adopt registers the site's running deployment
	// as the active slot, so with no switch since, a missing pointer is
	// an adopt killed before it wrote the pointer (or a pointer removed).
	if !switchedPerHistory(d) {
		names, _ := List(d)
		for _, n := range append(names, recordless(d)...) {
			if l := historyOf(d, n); l.exists && l.adopted {
				fix := "kubectl bundle-switch to " + n + " --force"
				if _, err := Load(d, n); err != nil {
					fix = RepairCommand(n) // its record first; then the switch
				}
				return lost(n, "the history says slot "+n+" was adopted as the active slot (the site's running deployment)", fix)
			}
		}
		return nil
	}
	// A slot whose pass no longer holds (a deploy into it since did not
	// finish) still says the site was switched, but is named only when no
	// slot still holds its pass, and then gated before the switch.
	names, _ := List(d)
	var gated, passed string
	var whenGated, whenPassed time.Time
	for _, n := range names {
		r, err := Load(d, n)
		if err != nil || r.Gate == nil || !r.Gate.Passed {
			continue
		}
		if Gated(r) && r.Gate.Time.After(whenGated) {
			gated, whenGated = n, r.Gate.Time
		}
		if r.Gate.Time.After(whenPassed) {
			passed, whenPassed = n, r.Gate.Time
		}
	}
	switch {
	case gated != "":
		return lost(gated, "the history records a switch and the record of slot "+gated+" says it passed its gate",
			"kubectl bundle-switch to "+gated)
	case passed != "":
		return lost(passed, "the history records a switch and the record of slot "+passed+" says it passed its gate (before a deploy into it that did not finish)",
			gateFirst(passed))
	}
	return nil
}

// gateFirst is the forced switch to slot n that runs only once n passes
// its gate (read-only: damage stops a recorded one).
func gateFirst(n string) string {
	return "kubectl bundle-gate --slot " + n + " && kubectl bundle-switch to " + n + " --force"
}

// Exists reports whether slot name exists as far as the state can tell:
// its record is there (readable or not), or the history says it was
// created and not destroyed since (its record was removed from outside;
// slot repair asks the machine).
func Exists(d *state.Dir, name string) bool {
	if _, err := Load(d, name); !errors.As(err, new(*NotFoundError)) {
		return true
	}
	return createdPerHistory(d, name)
}

// createdPerHistory reports whether the history's last create (or
// completed adopt) of slot name is not followed by its destroy.
func createdPerHistory(d *state.Dir, name string) bool { return historyOf(d, name).exists }

// switchedPerHistory reports whether the history records a completed
// switch (switchover's "switch" event).
func switchedPerHistory(d *state.Dir) bool {
	h, err := journal.ReadHistory(d.Join(journal.Dir, journal.HistoryFile))
	if err != nil {
		return false
	}
	for _, ev := range h.Events {
		if ev.Type == "switch" {
			return true
		}
	}
	return false
}

// DetailGone is the history's note that slot repair found nothing of a
// slot running whose record was gone: the slot no longer exists.
const DetailGone = "gone"

// recordless lists the slots the history says exist whose record is gone.
func recordless(d *state.Dir) []string {
	h, err := journal.ReadHistory(d.Join(journal.Dir, journal.HistoryFile))
	if err != nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, ev := range h.Events {
		if ev.Type == "slot" && !seen[ev.Slot] && ValidName(ev.Slot) == nil {
			seen[ev.Slot] = true
			if _, err := Load(d, ev.Slot); errors.As(err, new(*NotFoundError)) && createdPerHistory(d, ev.Slot) {
				out = append(out, ev.Slot)
			}
		}
	}
	return out
}

// noSlotFix is the repair when no slot has a readable record: a slot the
// history says exists gets its record rebuilt from what runs (slot repair
// asks the machine), and only with none is the pointer removed.
func noSlotFix(d *state.Dir) string {
	if gone := recordless(d); len(gone) > 0 {
		return RepairCommand(gone[0]) + "   # slot " + gone[0] + " has no record, but the history says it was created: rebuilds its record from what runs"
	}
	return state.RemoveCommand(d.Join(ActiveFile)) + "   # no slot exists: no slot is active"
}

// ActiveFix is the command that rewrites a damaged pointer: switch to a slot
// that exists (the operator picks when there are several), or remove the
// pointer when no slot exists.
//
// Like ActiveRepair, it names only slots that passed their gate for what
// they hold (a forced switch skips the gate); with none, ActiveRepair's
// one command (the gate first) when a slot holds a package, else every
// (empty) slot.
func ActiveFix(d *state.Dir) string {
	names, _ := List(d)
	var cmds, all []string
	held := false
	for _, n := range names {
		if r, err := Load(d, n); err == nil {
			all = append(all, "kubectl bundle-switch to "+n+" --force")
			held = held || r.Package != nil || r.Deploying != nil
			if Gated(r) {
				cmds = append(cmds, "kubectl bundle-switch to "+n+" --force")
			}
		}
	}
	if len(cmds) == 0 && held {
		return ActiveRepair(d)
	}
	if len(cmds) == 0 {
		cmds = all // empty slots: none is vouched for, any makes the pointer readable
	}
	switch len(cmds) {
	case 0:
		return noSlotFix(d)
	case 1:
		return cmds[0]
	}
	return "run the one for the slot that serves now: " + strings.Join(cmds, " | ")
}

// CheckActiveRecord decides whether the active pointer's slot has a
// record. A pointer to a slot with no record (destroyed with --force, or
// removed from outside) is damage, except while t, a recreate of that very
// slot, has torn it down to rebuild it, or t, a blue-green update, soaks
// on it (SoakGone: its revert is the way on). Its repair points the pointer at
// a slot that exists, or removes it when none does: never a switch to the
// slot that is gone.
func CheckActiveRecord(d *state.Dir, active string, t *journal.Transaction) error {
	if active == "" {
		return nil
	}
	_, err := Load(d, active)
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		return nil // present, or damaged: the record's own error says so
	}
	if t != nil && t.Strategy == journal.Recreate && t.Slots.Active == active {
		return nil
	}
	if SoakGone(d, active, t) != "" {
		return nil
	}
	fix := ActiveFix(d)
	if createdPerHistory(d, active) {
		fix = PointerRepair(d, active)
	}
	return &state.DamageError{Path: d.Join(ActiveFile), Problem: fmt.Sprintf("slot %q has no record", active), Fix: fix}
}

// SoakGone is the slot to go back to when active, the candidate that an
// open blue-green transaction t switched to, is gone (destroyed with
// --force during the soak) and the slot it replaced still has a record.
// That is no damage: t's revert is the way on (it gates that slot,
// switches back and closes t), and accept and a switch to the gone slot
// refuse, naming it.
func SoakGone(d *state.Dir, active string, t *journal.Transaction) string {
	if t == nil || t.Strategy != journal.BlueGreen || t.Slots.Candidate != active || t.Slots.Active == "" || t.Slots.Active == active {
		return ""
	}
	switch t.Phase {
	case journal.Switched, journal.Soaking, journal.SwitchedBack:
	default:
		return ""
	}
	if _, err := Load(d, t.Slots.Active); err != nil {
		return ""
	}
	return t.Slots.Active
}

// PointerRepair is the repair of a pointer naming slot active, which has
// no record: when the history says the slot was created and not destroyed
// (its record was removed from outside), slot repair rebuilds the record
// from what runs; else the pointer goes to a slot that exists (prefer
// first), or is removed.
func PointerRepair(d *state.Dir, active string, prefer ...string) string {
	if createdPerHistory(d, active) {
		return RepairCommand(active) + "   # the history says slot " + active + " was created and not destroyed: rebuilds its record from what runs"
	}
	return ActiveRepair(d, prefer...)
}

// ActiveRepair is one command that repairs the pointer, to run as printed
// where a single command is wanted (switch status's next): a forced switch
// to a slot with a readable record that passed its gate for what it holds
// (a forced switch skips the gate, so it must only ever name such a slot):
// the first of prefer that is one (callers name the slot the switch
// record or the pointer says serves first), else the first such slot.
// With slots but none gated, it gates the one it would name first (the
// switch runs only if that gate passes), unless it holds no package (an
// empty slot vouches for nothing: the switch only makes the pointer
// readable); with no slot, the pointer is removed.
func ActiveRepair(d *state.Dir, prefer ...string) string {
	names, _ := List(d)
	var ok, held, gated []string
	for _, n := range names {
		if r, err := Load(d, n); err == nil {
			ok = append(ok, n)
			if r.Package != nil || r.Deploying != nil {
				held = append(held, n)
			}
			if Gated(r) {
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
		return "kubectl bundle-switch to " + n + " --force"
	}
	if n := pick(held); n != "" {
		return gateFirst(n) + "   # no slot passed its gate for what it holds: the switch runs only once slot " + n + " passes it"
	}
	if n := pick(ok); n != "" {
		// No slot holds a package: none can pass a gate, and none is
		// vouched for; the switch only makes the pointer readable again.
		return "kubectl bundle-switch to " + n + " --force"
	}
	return noSlotFix(d)
}

// Gated reports whether r's last gate passed for the package r holds, and
// no deploy into r started since and did not finish (after one, what r
// holds is not known until a gate passes again).
func Gated(r *Record) bool {
	g := r.Gate
	return g != nil && g.Passed && r.Deploying == nil && (r.Package == nil || g.Package == "" || g.Package == r.Package.Digest)
}
