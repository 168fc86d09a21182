package slot

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// ActiveFile is the pointer file naming the active slot: the one authority
// on which slot serves.
const ActiveFile = "active"

// ReadActive reads the active pointer strictly. A missing pointer is a site
// where no slot is active yet (""). A pointer that is a symlink, a
// directory, empty, several lines, or a name that is not a slot name is
// damage (*state.DamageError, naming the command that repairs it), never
// "none".
func ReadActive(d *state.Dir) (string, error) {
	p := d.Join(ActiveFile)
	s, err := state.ReadPointer(p)
	if errors.Is(err, fs.ErrNotExist) {
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

// ActiveFix is the command that rewrites a damaged pointer: switch to a slot
// that exists (the operator picks when there are several), or remove the
// pointer when no slot exists.
func ActiveFix(d *state.Dir) string {
	names, _ := List(d)
	var cmds []string
	for _, n := range names {
		if _, err := Load(d, n); err == nil {
			cmds = append(cmds, "kubectl bundle-switch to "+n+" --force")
		}
	}
	switch len(cmds) {
	case 0:
		return state.RemoveCommand(d.Join(ActiveFile)) + "   # no slot exists: no slot is active"
	case 1:
		return cmds[0]
	}
	return "run the one for the slot that serves now: " + strings.Join(cmds, " | ")
}

// CheckActiveRecord decides whether the active pointer's slot has a
// record. A pointer to a slot with no record (destroyed with --force, or
// removed from outside) is damage, except while t, a recreate of that very
// slot, has torn it down to rebuild it. Its repair points the pointer at
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
	return &state.DamageError{Path: d.Join(ActiveFile), Problem: fmt.Sprintf("slot %q has no record", active), Fix: ActiveFix(d)}
}

// ActiveRepair is one command that repairs the pointer, to run as printed
// where a single command is wanted (switch status's next): a forced switch
// to prefer when it is a slot with a readable record, else to the first
// such slot, else the removal of the pointer.
func ActiveRepair(d *state.Dir, prefer ...string) string {
	names, _ := List(d)
	var ok []string
	for _, n := range names {
		if _, err := Load(d, n); err == nil {
			ok = append(ok, n)
		}
	}
	for _, p := range prefer {
		for _, n := range ok {
			if p != "" && p == n {
				return "kubectl bundle-switch to " + n + " --force"
			}
		}
	}
	if len(ok) > 0 {
		return "kubectl bundle-switch to " + ok[0] + " --force"
	}
	return state.RemoveCommand(d.Join(ActiveFile)) + "   # no slot exists: no slot is active"
}
