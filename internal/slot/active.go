package slot

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

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
