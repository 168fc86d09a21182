// Package record holds the types of the state dir's records (a slot's
// record, the switch record, the active pointer) and their one parser
// each. It decides nothing: which slot serves, which is protected and what
// a damaged file's repair is are internal/site's, which reads every record
// through this package.
package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// ActiveFile is the pointer file naming the active slot: the one authority
// on which slot serves.
const ActiveFile = "active"

// ReadActive parses the active pointer: ("", false, nil) when it is
// missing; a pointer that is a symlink, a directory, empty, several lines,
// or a name that is not a slot name is a problem (what is wrong, without a
// repair: the site names that).
func ReadActive(d *state.Dir) (name string, present bool, problem error) {
	s, err := state.ReadPointer(d.Join(ActiveFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", false, nil
	case err != nil:
		return "", true, err
	case strings.TrimSpace(s) == "":
		return "", true, errors.New("it is empty")
	case strings.ContainsAny(s, "\r\n"):
		return "", true, errors.New("it holds more than one line")
	case ValidName(s) != nil:
		return "", true, fmt.Errorf("%q is not a slot name", s)
	}
	return s, true, nil
}

// SwitchFile is the switch record in the state dir.
const SwitchFile = "switch.json"

// Phases of switch.json.
const (
	PhaseSwitching     = "SWITCHING"
	PhaseSwitched      = "SWITCHED" // soaking
	PhaseSwitchingBack = "SWITCHING_BACK"
	PhaseSwitchedBack  = "SWITCHED_BACK"
	PhaseAccepted      = "ACCEPTED"
)

// Switch is <state>/switch.json: the switch in progress or the last one.
// The authority on which slot is active is the active pointer file.
type Switch struct {
	APIVersion  string    `json:"apiVersion"`
	Kind        string    `json:"kind"`
	Phase       string    `json:"phase"`
	Target      string    `json:"target"`
	Previous    string    `json:"previous,omitempty"`
	SoakStarted time.Time `json:"soakStarted,omitzero"`
	SoakWindow  string    `json:"soakWindow,omitempty"`
	// Mode is the switch mode the switch was made with (journal.SwitchS2
	// "": S2; SwitchRepoint: S1, the workload clusters stay with the
	// previous slot; SwitchPivot: S3, their Cluster API objects moved to
	// the target, and back moves them back).
	Mode    string    `json:"mode,omitempty"`
	Updated time.Time `json:"updated"`
}

// Soaking reports whether the switch is in its soak (or moving into or
// out of it): the previous slot is then the revert target.
func (r *Switch) Soaking() bool {
	return r.Previous != "" && (r.Phase == PhaseSwitching || r.Phase == PhaseSwitched || r.Phase == PhaseSwitchingBack)
}

// Unfinished reports whether a switch or a switch back began and did not
// finish.
func (r *Switch) Unfinished() bool {
	return r.Phase == PhaseSwitching || r.Phase == PhaseSwitchingBack
}

// ReadSwitch parses switch.json strictly: (nil, nil) when no switch ever
// happened; unreadable, invalid or of an unknown phase is a problem (what
// is wrong, without a repair: the site names that), never "none".
func ReadSwitch(d *state.Dir) (*Switch, error) {
	data, err := state.ReadSmall(d.Join(SwitchFile), 1<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r Switch
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, err
	}
	switch r.Phase {
	case PhaseSwitching, PhaseSwitched, PhaseSwitchingBack, PhaseSwitchedBack, PhaseAccepted:
	default:
		return nil, fmt.Errorf("unknown phase %q", r.Phase)
	}
	if ValidName(r.Target) != nil || (r.Previous != "" && ValidName(r.Previous) != nil) {
		return nil, fmt.Errorf("target %q or previous %q is not a slot name", r.Target, r.Previous)
	}
	return &r, nil
}

// WriteSwitch writes switch.json atomically. The caller holds the lock.
func WriteSwitch(d *state.Dir, r *Switch, now time.Time) error {
	r.APIVersion, r.Kind, r.Updated = RecordAPIVersion, "Switch", now
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return state.WriteFile(d.Join(SwitchFile), append(data, '\n'))
}

// WriteActive writes the active pointer atomically. The caller holds the lock.
func WriteActive(d *state.Dir, name string) error {
	return state.WriteFile(d.Join(ActiveFile), []byte(name+"\n"))
}
