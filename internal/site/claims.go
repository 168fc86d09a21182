package site

import (
	"fmt"
	"strings"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
	"github.com/kubectl-bundle/kubectl-bundle/internal/stage"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// A recorded step is a claim, not a fact (issue 32, class 3): a step that
// changes a slot is recorded done only when the plugin that does the
// change did it as that step, and a step recorded done is confirmed
// against the slot before an update commits or is gone on from.

// GateFresh is how old a slot's last passing gate may be for a switch to
// it (kubectl bundle-switch to --max-gate-age's default) and for an update
// to commit on it.
const GateFresh = 15 * time.Minute

// Change is what a step does to a slot, as its plugin records it in the
// history.
type Change string

// The changes a step can claim.
const (
	ChangeDeploy  Change = "deploy"
	ChangeCreate  Change = "create"
	ChangeDestroy Change = "destroy"
)

// Claim is what step p of a transaction says it did: Change to Slot
// (Digest: the package a deploy deployed).
type Claim struct {
	Phase  journal.Phase
	Change Change
	Slot   string
	Digest string
}

// Command is the plugin call that makes the claim true, acting on the
// state dir d.
func (c Claim) Command(d *state.Dir) advice.Cmd {
	switch c.Change {
	case ChangeDeploy:
		return d.Plugin("slot", "deploy", c.Slot, c.Digest)
	case ChangeCreate:
		return d.Plugin("slot", "create", c.Slot)
	}
	return d.Plugin("slot", "destroy", c.Slot)
}

// StageFirst is what must come before c's command when c deploys a
// package that is not staged (the plugin deploys staged packages only):
// "" when it is staged or c deploys nothing, else a clause naming the
// staging of t's package file with the material t was begun with.
func (c Claim) StageFirst(d *state.Dir, t *journal.Transaction) string {
	if c.Change != ChangeDeploy || d == nil || c.Digest == "" {
		return ""
	}
	if _, err := stage.Lookup(d, &stage.Ref{Digest: c.Digest}); err == nil {
		return ""
	}
	short := c.Digest
	if len(short) > 12 {
		short = short[:12]
	}
	pkg := ""
	if c.Digest == t.Target {
		pkg = t.Package
	}
	if pkg == "" {
		return fmt.Sprintf("; package %s is not staged: stage its file first (%s)", short, d.Plugin("verify", "--stage", "PACKAGE"))
	}
	_, v := Material(d, t)
	stageIt := d.Plugin("verify", "--stage", pkg).With(v.Args()...)
	if v.Args() == nil {
		return fmt.Sprintf("; package %s is not staged: stage %s first, with the material it is signed with (%s)", short, pkg, stageIt.With("--key", "KEY"))
	}
	return fmt.Sprintf("; package %s is not staged: stage it first: %s", short, stageIt)
}

// StepClaim is the claim of step p of t: which plugin records it done and
// what it changes; false for a step that changes no slot (VERIFIED, a
// gate, the markers COMMITTED, RESTORED, ROLLED_BACK) or one that may be
// done by no plugin at all (RETIRED: an S1 accept keeps the old slot).
// The switch's own phases are SwitchOwned.
func StepClaim(t *journal.Transaction, p journal.Phase) (Claim, bool) {
	c := Claim{Phase: p}
	switch t.Strategy {
	case journal.InPlace:
		switch p {
		case journal.Deploying:
			c.Change, c.Slot, c.Digest = ChangeDeploy, t.Slots.Active, t.Target
		case journal.Restoring:
			c.Change, c.Slot, c.Digest = ChangeDeploy, t.Slots.Active, t.Fallback
		}
	case journal.Recreate:
		switch p {
		case journal.Teardown:
			c.Change, c.Slot = ChangeDestroy, t.Slots.Active
		case journal.Building:
			c.Change, c.Slot, c.Digest = ChangeDeploy, t.Slots.Active, t.Target
		case journal.BuildingFallback:
			c.Change, c.Slot, c.Digest = ChangeDeploy, t.Slots.Active, t.Fallback
		}
	case journal.BlueGreen:
		switch p {
		case journal.Provisioning:
			c.Change, c.Slot = ChangeCreate, t.Slots.Candidate
		case journal.Provisioned:
			c.Change, c.Slot, c.Digest = ChangeDeploy, t.Slots.Candidate, t.Target
		case journal.Destroying:
			c.Change, c.Slot = ChangeDestroy, t.Slots.Candidate
		}
	}
	if c.Change == "" || c.Slot == "" || (c.Change == ChangeDeploy && c.Digest == "") {
		return Claim{}, false
	}
	return c, true
}

// SwitchOwned reports whether kubectl bundle-switch records phase p of
// strategy st itself (to: SWITCHED and SOAKING; back: SWITCHED_BACK;
// accept: ACCEPTED): journal step and journal run never record it.
func SwitchOwned(st journal.Strategy, p journal.Phase) bool {
	if st != journal.BlueGreen {
		return false
	}
	switch p {
	case journal.Switched, journal.Soaking, journal.SwitchedBack, journal.Accepted:
		return true
	}
	return false
}

// SwitchCommand is the command that records the switch-owned phase p.
// Its commands name the state dir d where it is relative.
func SwitchCommand(d *state.Dir, t *journal.Transaction, p journal.Phase) string {
	script := func(op string) advice.Cmd {
		return advice.Program(journal.ScriptPath(journal.BlueGreen), op).WithEnv(d.CommandEnv())
	}
	switch p {
	case journal.SwitchedBack:
		return fmt.Sprintf("%s (%s)", script("revert"), d.Plugin("switch", "back"))
	case journal.Accepted:
		return fmt.Sprintf("%s (%s)", script("accept"), d.Plugin("switch", "accept"))
	}
	return d.Plugin("switch", "to", t.Slots.Candidate).String()
}

// ClaimError is a step a command other than its plugin would record done.
type ClaimError struct{ Msg string }

func (e *ClaimError) Error() string { return e.Msg }

// ErrorKind: recording a step its plugin did not do is a conflict.
func (e *ClaimError) ErrorKind() errkind.Kind { return errkind.Conflict }

// Proven reports whether the history shows c's plugin making c's change
// since step c.Phase of t last started (as that step, run by journal run,
// or by hand in between): nil, or why not.
func (s *Site) Proven(t *journal.Transaction, c Claim) error {
	step := t.ID + "/" + string(c.Phase)
	evs := s.events()
	start := -1
	for i, ev := range evs {
		if ev.TxnID == t.ID && ev.Type == journal.EventStep && ev.Phase == c.Phase && ev.Status == journal.StatusStarted {
			start = i
		}
	}
	for _, ev := range evs[start+1:] {
		// The plugin's own event: as the step (journal run), or by hand
		// between the step's start and its done; never another step's.
		if ev.Type != "slot" || (ev.Step != step && ev.Step != "") || ev.Slot != c.Slot || ev.Status != journal.StatusDone {
			continue
		}
		switch c.Change {
		case ChangeDeploy:
			if len(c.Digest) >= 12 && ev.Detail == "deploy/"+c.Digest[:12] {
				return nil
			}
		case ChangeCreate:
			if ev.Detail == "create" || ev.Detail == record.DetailAlreadyCreated {
				return nil
			}
		case ChangeDestroy:
			if ev.Detail == "destroy" {
				return nil
			}
		}
	}
	return &ClaimError{fmt.Sprintf("step %s of transaction %s is recorded done only once the plugin that does it did it (%s), and the history shows no %s of slot %s since the step started%s",
		c.Phase, t.ID, c.Command(s.Dir), c.Change, c.Slot, c.StageFirst(s.Dir, t))}
}

// WorldError is a recorded step the slot does not bear out.
type WorldError struct{ Msg string }

func (e *WorldError) Error() string { return e.Msg }

// ErrorKind: the state does not allow the step.
func (e *WorldError) ErrorKind() errkind.Kind { return errkind.Environment }

// Holds checks that slot name holds package digest as its record says:
// ready, digest deployed, and no deploy into it started since that did
// not finish.
func (s *Site) Holds(name, digest string) error {
	rec, err := s.Slot(name)
	if err != nil {
		return err
	}
	d := digest[:min(12, len(digest))]
	switch {
	case rec.Deploying != nil:
		return &WorldError{fmt.Sprintf("slot %s does not hold package %s as far as its record tells: its %s", name, d, rec.Deploying.Describe())}
	case rec.Package == nil:
		return &WorldError{fmt.Sprintf("slot %s holds no package: package %s was never deployed into it", name, d)}
	case rec.Package.Digest != digest:
		return &WorldError{fmt.Sprintf("slot %s holds package %.12s, not %s", name, rec.Package.Digest, d)}
	}
	return nil
}

// FreshGate checks that slot name's last gate passed for package digest,
// no earlier than since (zero: any time) and at most maxAge before now.
func (s *Site) FreshGate(name, digest string, since, now time.Time, maxAge time.Duration) error {
	rec, err := s.Slot(name)
	if err != nil {
		return err
	}
	g := rec.Gate
	d := digest[:min(12, len(digest))]
	switch {
	case g == nil:
		return &WorldError{fmt.Sprintf("slot %s has no recorded gate result", name)}
	case !g.Passed:
		return &WorldError{fmt.Sprintf("slot %s's last gate FAILED at %s (failing: %s)", name, g.Time.UTC().Format(time.RFC3339), strings.Join(g.Failed, ", "))}
	case rec.Deploying != nil:
		return &WorldError{fmt.Sprintf("slot %s's last gate no longer counts: its %s", name, rec.Deploying.Describe())}
	case g.Package != "" && g.Package != digest:
		return &WorldError{fmt.Sprintf("slot %s's last passing gate was for package %.12s, not %s", name, g.Package, d)}
	case !since.IsZero() && g.Time.Before(since):
		return &WorldError{fmt.Sprintf("slot %s's last passing gate (%s) predates %s", name, g.Time.UTC().Format(time.RFC3339), since.UTC().Format(time.RFC3339))}
	case now.Sub(g.Time) > maxAge:
		return &WorldError{fmt.Sprintf("slot %s's last passing gate is %s old, older than %s", name, now.Sub(g.Time).Round(time.Second), maxAge)}
	}
	return nil
}

// GatedSlot is the slot whose gate HEALTHY of t records: the candidate of
// a blue-green update, else the active slot.
func GatedSlot(t *journal.Transaction) string {
	if t.Strategy == journal.BlueGreen {
		return t.Slots.Candidate
	}
	return t.Slots.Active
}
