package session

import (
	"errors"
	"fmt"
	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"os"
	"strings"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/stage"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
	"github.com/kubectl-bundle/kubectl-bundle/internal/switchover"
)

// EnvStep names the variable `journal run` sets for the command of a step:
// TXN/PHASE, the step that command runs on behalf of. The step is owned by
// the live journal run process (it holds the step lock); its command
// inherits the ownership through this variable.
const EnvStep = "KUBECTL_BUNDLE_STEP"

// Change is what a command is about to do to a slot.
type Change string

// The changes the guard rules on.
const (
	Create  Change = "create"
	Deploy  Change = "deploy into"
	Destroy Change = "destroy"
)

// owners is the one table of which running step may change a protected
// slot, and how (issue: the promise as an invariant). Blue-green needs no
// entry: its candidate is never protected, and accept ends the soak before
// RETIRED destroys the old slot.
var owners = map[journal.Strategy]map[journal.Phase][]Change{
	journal.InPlace: {
		journal.Deploying: {Deploy},
		journal.Restoring: {Deploy},
	},
	journal.Recreate: {
		journal.Teardown:         {Destroy},
		journal.Building:         {Create, Deploy},
		journal.BuildingFallback: {Destroy, Create, Deploy},
	},
}

// Protection is what the state says is protected now (site.Protection).
type Protection = site.Protection

// Protected reads which slots are protected (site.Site.Protected).
func (s *Session) Protected() (active, soaking string, err error) {
	return site.Read(s.Dir).Protected()
}

// Protection reads what is protected, failing closed (site.Site.Protection).
func (s *Session) Protection() (*Protection, error) {
	return site.Read(s.Dir).Protection()
}

// Check reads the state every mutating command relies on (the active
// pointer, the switch record, the protected slots' records and the open
// transaction), failing closed: damage is an error naming its repair. A
// command that changes the site calls it before its first write, even when
// it touches no slot itself (a journal step, a gate result).
func (s *Session) Check() error {
	_, err := s.Protection()
	return err
}

// LoadSlot reads the record of slot name. A damaged record's error names
// the repair that fits the slot: rebuilding it (slot repair) when it is
// protected, clearing it (slot destroy --force) when it is not; damage to
// the pointer or the switch record, which decide that, comes first.
func (s *Session) LoadSlot(name string) (*slot.Record, error) {
	rec, err := slot.Load(s.Dir, name)
	if errors.As(err, new(*slot.NotFoundError)) && site.Read(s.Dir).Lineage(name).Exists {
		// Removed from outside: the slot still runs, and naming it is no
		// usage error (exit 2); its record is rebuilt from what runs.
		return nil, &state.DamageError{Path: record.SlotPath(s.Dir, name),
			Problem: "it is missing, but the history says slot " + name + " was created and not destroyed",
			Fix:     advice.Do(slot.RepairOf(s.Dir, name)).Because("rebuilds its record from what runs")}
	}
	var dmg *slot.DamagedError
	if errors.As(err, &dmg) {
		p, perr := site.Read(s.Dir).Protects(name)
		if perr != nil {
			return nil, perr
		}
		dmg.Protected = p
	}
	return rec, err
}

// Guard refuses change to a protected slot unless the running step of the
// open transaction owns that change (the owners table, and this process
// runs that step), or force is set: then the override is said on log and
// recorded in the history. Every mutating command that touches a slot
// calls it before its first write.
func (s *Session) Guard(name string, c Change, force bool) error {
	if !s.Mutating() {
		return errors.New("guard: the session is read-only")
	}
	p, err := s.Protection()
	if err != nil {
		return err
	}
	why := p.Why(name)
	if why == "" {
		return nil
	}
	if s.owns(p.Txn, name, c) {
		return s.FallbackUsable(p.Txn, p.Txn.Phase, fmt.Sprintf("%s slot %s", c, name))
	}
	if force {
		msg := fmt.Sprintf("%s slot %s although %s", c, name, why)
		if s.log != nil {
			fmt.Fprintf(s.log, "WARNING: --force: %s\n", msg)
		}
		return s.Journal.Record(journal.Event{Type: "force", Slot: name, Detail: msg + " (--force)", Status: journal.StatusDone})
	}
	return errkind.New(errkind.Conflict, "slot %s is protected: %s; %s; or pass --force (said and recorded in the history)", name, why, s.protectedAdvice(p, name, c))
}

// replacing are the steps that change the active slot while its previous
// package is the way back: in-place deploys over it, recreate tears it
// down. Recreate's BUILDING is not one: once the slot is torn down,
// building the target is the only way to a serving slot when the fallback
// is gone, and refusing it would leave none. (The recovery steps deploy
// the fallback itself, and resolving it checks it.)
var replacing = map[journal.Strategy]map[journal.Phase]bool{
	journal.InPlace:  {journal.Deploying: true},
	journal.Recreate: {journal.Teardown: true},
}

// FallbackUsable refuses step p of t, which changes the active slot (what
// says how), when the package t would restore is no longer usable as
// staged: its copy gone, incomplete, or no longer the bytes verified
// (sha256 against the digest it was verified under). journal run checks
// it before the step starts, on every run and re-run, and the guard again
// when the step's command changes the slot: a copy truncated to free
// disk, or removed after a killed run, would otherwise be found only by
// the restore, with the active slot already changed and no known-good
// slot left.
func (s *Session) FallbackUsable(t *journal.Transaction, p journal.Phase, what string) error {
	if t == nil || t.Fallback == "" || !replacing[t.Strategy][p] {
		return nil // a first install has nothing to fall back to
	}
	pkg, err := stage.Lookup(s.Dir, &stage.Ref{Digest: t.Fallback})
	if err == nil {
		err = pkg.Check()
	}
	if err != nil {
		return errkind.New(errkind.Environment, "refusing to %s in step %s of transaction %s: its fallback, the package %s that a failure restores, is not usable: %v; nothing was changed; stage the fallback again, then re-run the same command",
			what, p, t.ID, t.Fallback[:min(12, len(t.Fallback))], err)
	}
	return nil
}

// owns reports whether this process runs the step of t that may make
// change c to slot name.
func (s *Session) owns(t *journal.Transaction, name string, c Change) bool {
	if t == nil || t.Status != journal.StatusStarted || s.step != StepID(t) || t.Slots.Active != name {
		return false
	}
	// The variable alone proves nothing (set by hand, or left by a killed
	// run): a live journal run must hold the step lock for this very step.
	if h, err := s.Dir.StepRunning(); err != nil || h == nil || h.Step != s.step {
		return false
	}
	for _, allowed := range owners[t.Strategy][t.Phase] {
		if allowed == c {
			return true
		}
	}
	return false
}

// StepID names the running step of t as EnvStep carries it.
func StepID(t *journal.Transaction) string { return t.ID + "/" + string(t.Phase) }

func (s *Session) protectedAdvice(p *Protection, name string, c Change) string {
	if t := p.Txn; t != nil && t.Strategy == journal.BlueGreen && p.Soaking != "" && (name == p.Active || name == p.Soaking) {
		// The soak belongs to the transaction: a plain switch back would
		// leave it soaking on a slot no longer active, so the switch
		// refuses it; the script's revert and accept end it.
		script := journal.ScriptPath(journal.BlueGreen)
		return fmt.Sprintf("end the soak of transaction %s first: revert it (%s revert), which switches back to slot %s and destroys slot %s, or accept it (%s accept), which keeps slot %s",
			t.ID, script, p.Soaking, p.Active, script, p.Active)
	}
	switch {
	case name == p.Soaking && !p.Unfinished().IsZero():
		// Nothing soaks yet (accept and back refuse): the switch is
		// completed first, as switch status says (an adopt or a switch
		// killed half way).
		return "complete the switch first: " + p.Unfinished().WithEnv(s.Dir.CommandEnv()).String() + " (then the soak it starts is accepted or reverted)"
	case name == p.Soaking && p.Switch == nil && p.Active != "":
		// Only the history keeps the soak (switch.json is gone): accept
		// and back refuse without a record, so the repair writes it again
		// first, keeping this slot as the revert target.
		return fmt.Sprintf("the switch record is gone, but the history says slot %s was switched to from slot %s and not accepted: write the record again with %s (it keeps slot %s as the revert target), then accept (%s) or revert (%s)",
			p.Active, name, s.Dir.Plugin("switch", "to", p.Active, "--force"), name, s.Dir.Plugin("switch", "accept"), s.Dir.Plugin("switch", "back"))
	case name == p.Soaking:
		return fmt.Sprintf("end the soak first: accept it (%s) or revert (%s)", s.Dir.Plugin("switch", "accept"), s.Dir.Plugin("switch", "back"))
	case len(p.Owners[name]) > 0:
		advice := "destroying it deletes those workload clusters; move them first (an S2 update rebuilds them in the slot it builds)"
		if _, err := slot.Load(s.Dir, name); err != nil {
			advice += fmt.Sprintf("; its record is missing or damaged (the history keeps what it owns): rebuild it with %s", slot.RepairOf(s.Dir, name))
		}
		return advice
	case c == Destroy:
		other := "SLOT"
		if names, _ := slot.List(s.Dir); len(names) > 0 {
			for _, n := range names {
				if n != name {
					other = n
					break
				}
			}
		}
		return fmt.Sprintf("make another slot active first (%s), or rebuild it through a recreate update (%s)", s.Dir.Plugin("switch", "to", other), s.script(journal.Recreate, "PACKAGE"))
	}
	return fmt.Sprintf("update it through a strategy (%s or %s), or build another slot and switch to it (%s)",
		s.script(journal.InPlace, "PACKAGE"), s.script(journal.Recreate, "PACKAGE"), s.script(journal.BlueGreen, "apply", "PACKAGE"))
}

// stepConflict refuses a mutating command while a live process other than
// this one's owner runs a step of the transaction.
func stepConflict(d *state.Dir, step string) error {
	h, err := d.StepRunning()
	if err != nil || h == nil || (step != "" && h.Step == step) {
		return err
	}
	return errkind.New(errkind.Conflict, "step %s is running in pid %d (%s) since %s: wait for it to finish; if it hangs, stop it (kill %d) and re-run the same script, which takes the step over",
		h.Step, h.PID, h.Command, h.Since.Format("2006-01-02T15:04:05Z07:00"), h.PID)
}

// script is strategy st's script with args, acting on this state dir
// from anywhere.
func (s *Session) script(st journal.Strategy, args ...string) advice.Cmd {
	return advice.Program(journal.ScriptPath(st), args...).WithEnv(s.Dir.CommandEnv())
}

func envStep() string { return os.Getenv(EnvStep) }

// firstInstall is the first install's sequence from the first step that
// works on this site: the slot created, a package deployed, its gate
// recorded, the switch to it. (A slot whose gate passed makes a missing
// pointer damage: its repair is the switch.)
func (s *Session) firstInstall() string {
	// The first configured slot (slots: in config.yaml), whatever it is
	// named ("a" is only the default's), unless one is ready already.
	name, skip := "a", 0
	if cfg, err := slot.LoadConfig(s.Dir.Join("config.yaml"), os.Getenv, nil); err == nil && len(cfg.Slots) > 0 {
		name = cfg.Slots[0]
	}
	names, _ := slot.List(s.Dir)
	for _, n := range names {
		rec, err := slot.Load(s.Dir, n)
		if err != nil || rec.State != slot.StateReady {
			continue
		}
		name, skip = n, 1
		if rec.Package != nil {
			skip = 3
		}
		break
	}
	steps := []advice.Cmd{s.Dir.Plugin("slot", "create", name), s.Dir.Plugin("verify", "--stage", "PACKAGE", "--key", "KEY"),
		s.Dir.Plugin("slot", "deploy", name, "PACKAGE"), s.Dir.Plugin("gate", "--slot", name, "--record"), s.Dir.Plugin("switch", "to", name)}
	lines := make([]string, 0, len(steps))
	for _, c := range steps[skip:] {
		lines = append(lines, c.String())
	}
	return strings.Join(lines, ", then ")
}

// GuardBegin checks, before a transaction is opened, that its slots agree
// with the state: the slot a strategy names as active is the active one,
// the candidate is not protected, and blue-green has an active slot to
// build next to (a fresh site's first install is in-place or recreate).
func (s *Session) GuardBegin(st journal.Strategy, active, candidate string) error {
	p, err := s.Protection()
	if err != nil {
		return err
	}
	if st == journal.BlueGreen && p.Active == "" {
		return errkind.New(errkind.Environment, "no slot is active yet: blue-green builds a candidate next to the active slot, never from none; make the first install by hand (in-place and recreate update an active slot too), first step: %s; then update with blue-green",
			s.firstInstall())
	}
	if active != "" && p.Active != "" && active != p.Active {
		return errkind.New(errkind.Conflict, "--active %s is not the active slot: %s is (%s)", active, p.Active, s.Dir.Plugin("switch", "status"))
	}
	if active == "" && p.Active != "" {
		if st == journal.BlueGreen {
			return errkind.New(errkind.Usage, "blue-green builds the update in --candidate next to --active: add --active %s", p.Active)
		}
		return errkind.New(errkind.Usage, "%s updates the active slot: add --active %s", st, p.Active)
	}
	if candidate != "" {
		// The candidate is built from nothing, but a damaged record of it
		// says nothing true of what runs there: its repair first.
		if _, err := s.LoadSlot(candidate); errors.As(err, new(*slot.DamagedError)) {
			return err
		}
		if why := p.Why(candidate); why != "" {
			if len(p.Owners[candidate]) > 0 && candidate != p.Active && candidate != p.Soaking {
				return errkind.New(errkind.Conflict, "--candidate %s cannot be built: %s. %s", candidate, why, switchover.ReturnToOwner(s.Dir, candidate))
			}
			return errkind.New(errkind.Conflict, "--candidate %s cannot be built: %s", candidate, why)
		}
	}
	return nil
}
