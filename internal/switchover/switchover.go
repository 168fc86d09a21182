// Package switchover moves the active slot: one atomic pointer write, then
// the kubeconfig alias context and the registry network alias follow it.
// Every step is idempotent, so re-running a switch after a crash finishes it.
package switchover

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/pivot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
	"github.com/kubectl-bundle/kubectl-bundle/internal/runner"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// Switcher performs switches. The cmd layer holds the state dir's lock.
type Switcher struct {
	Dir     *state.Dir
	Run     runner.Runner
	Journal *journal.Journal
	// AliasContext is the kube context that follows the active slot.
	AliasContext string
	// RegistryAlias is the network alias that follows the active slot's registry.
	RegistryAlias string
	Network       string
	// Kubeconfig is the explicit kubeconfig file ("" : kubectl's rules).
	Kubeconfig string
	SoakWindow time.Duration
	MaxGateAge time.Duration
	// CheckCluster checks that a slot still reaches the cluster its record
	// names (slot.Manager.CheckCluster) before To or Back makes it active;
	// nil: not checked.
	CheckCluster func(ctx context.Context, rec *slot.Record, what string) error
	// GateBack runs the gate against the slot Back returns to, before it
	// switches: nil for a pass, a Negative error when the gate fails. Nil
	// GateBack: Back refuses unless forced, as it cannot check.
	GateBack func(ctx context.Context, slot string) error
	// Mode is the switch mode of To (journal.SwitchS2, SwitchRepoint or
	// SwitchPivot); "" takes the open transaction's, "s2" names the
	// default over it, and a resumed switch keeps its own.
	Mode string
	// Yes accepts a pivot that a revert could not move back.
	Yes bool
	// Pivot moves the Cluster API objects (internal/pivot/mover.Run).
	// Only the switch plugin sets it: Cluster API's packages would double
	// the start-up of every plugin process that linked them. Nil: a switch
	// that must pivot refuses, naming kubectl bundle-switch.
	Pivot func(ctx context.Context, o pivot.Options) (*pivot.Result, error)
	// Workloads lists the workload clusters a slot runs (for the S1
	// accept, which records them as the previous slot's).
	Workloads func(ctx context.Context, slot string) ([]string, error)
	// WorkloadAccess reads how to reach each workload cluster of a slot
	// (slot.Manager.Workloads): the switch moves each workload alias
	// context (kind-airgap-wl) the kubeconfig holds to the slot switched
	// to. Nil: the workload contexts are not moved.
	WorkloadAccess func(ctx context.Context, slot string) ([]*slot.Workload, error)
	// RegistryService writes a slot's in-cluster registry Service again
	// with its registry container's address as it is now
	// (slot.Manager.RefreshRegistryService): the alias moves reconnect
	// registry containers, and Docker gives each another address. Nil:
	// not written.
	RegistryService func(ctx context.Context, slot string) error
	// RunsWorkload says whether a slot runs the workload cluster named
	// cluster: its names say so (slot.Manager.NamesOf), or its management
	// cluster holds Cluster API's kubeconfig of it (a cluster the package
	// names as its alias, not renamed per slot). An error: the slot could
	// not be asked. Nil: none does.
	RunsWorkload func(ctx context.Context, slot, cluster string) (bool, error)
	// WorkloadAliases are the configured workload-cluster base names
	// (workloadClusters: airgap-wl): a context kind-<base> whose cluster
	// entry has its own name was merged by a version before the entries
	// carried the slot, and is moved as an alias too.
	WorkloadAliases []string
	Now             func() time.Time
	Log             io.Writer

	pivoted *pivot.Result
}

// Pivoted is what the last To or Back moved with journal.SwitchPivot (nil without).
func (s *Switcher) Pivoted() *pivot.Result { return s.pivoted }

func (s *Switcher) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

func (s *Switcher) logf(format string, args ...any) {
	if s.Log != nil {
		fmt.Fprintf(s.Log, format+"\n", args...)
	}
}

func (s *Switcher) recordPath() string { return s.Dir.Join(record.SwitchFile) }

func (s *Switcher) save(r *Record) error { return record.WriteSwitch(s.Dir, r, s.now()) }

// Load reads switch.json (nil when no switch ever happened).
func (s *Switcher) Load() (*Record, error) { return site.Read(s.Dir).Switch() }

// Record is the switch record (record.Switch), which To, Back and Accept
// return.
type Record = record.Switch

// Active reads the active pointer ("" when none; damage is an error).
func (s *Switcher) Active() (string, error) { return site.Read(s.Dir).Active() }

// isDamage reports whether err is damaged state, which a forced switch
// overwrites.
func isDamage(err error) bool {
	var de *state.DamageError
	return errors.As(err, &de)
}

// ConflictError is a switch that may not run now.
type ConflictError struct{ Msg string }

func (e *ConflictError) Error() string { return e.Msg }

// ErrorKind: a conflict.
func (e *ConflictError) ErrorKind() errkind.Kind { return errkind.Conflict }

// GateError is a target slot without a recent passing gate.
type GateError struct{ Msg string }

func (e *GateError) Error() string { return e.Msg }

// ErrorKind: a negative verdict.
func (e *GateError) ErrorKind() errkind.Kind { return errkind.Negative }

func (s *Switcher) checkGate(rec *slot.Record) error {
	g := rec.Gate
	hint := fmt.Sprintf("run %s, or pass --force", s.Dir.Plugin("gate", "--slot", rec.Name, "--record"))
	switch {
	case rec.Deploying != nil:
		return &GateError{fmt.Sprintf("slot %s: its %s, so what it holds is not known and its last gate no longer counts: %s", rec.Name, rec.Deploying.Describe(), hint)}
	case g == nil:
		return &GateError{fmt.Sprintf("slot %s has no recorded gate result: %s", rec.Name, hint)}
	case !g.Passed:
		return &GateError{fmt.Sprintf("slot %s's last gate FAILED at %s (failing: %v): %s", rec.Name, g.Time.Format(time.RFC3339), g.Failed, hint)}
	case s.now().Sub(g.Time) > s.MaxGateAge:
		return &GateError{fmt.Sprintf("slot %s's last passing gate is %s old, older than --max-gate-age %s: %s",
			rec.Name, s.now().Sub(g.Time).Round(time.Second), s.MaxGateAge, hint)}
	case rec.Package != nil && g.Package != "" && g.Package != rec.Package.Digest:
		return &GateError{fmt.Sprintf("slot %s's passing gate was for package %.12s, not the deployed %.12s: %s", rec.Name, g.Package, rec.Package.Digest, hint)}
	}
	return nil
}

// move performs the pointer flip and the alias moves to target; previous
// is recorded for back. Each part checks before it writes.
func (s *Switcher) move(ctx context.Context, target, previous, during, after, mode string) (*Record, error) {
	rec, err := slot.Load(s.Dir, target)
	if err != nil {
		return nil, err
	}
	sw := &Record{Phase: during, Target: target, Previous: previous, Mode: mode}
	if after == record.PhaseSwitched {
		// The same switch again (a re-run that only completes or repeats
		// the moves) keeps its soak: its start and window carry over, in
		// the intent too, so that a kill inside the moves keeps them.
		if cur, err := s.Load(); err == nil && cur != nil && cur.Target == target && cur.Previous == previous &&
			(cur.Phase == record.PhaseSwitched || cur.Phase == during) && !cur.SoakStarted.IsZero() {
			sw.SoakStarted, sw.SoakWindow = cur.SoakStarted, cur.SoakWindow
		}
	}
	state.CrashPoint("switch:before-intent")
	if err := s.save(sw); err != nil {
		return nil, err
	}
	if mode == journal.SwitchPivot {
		// The workload clusters move before the pointer: until they are
		// on target, the previous slot stays the one that manages them.
		// The way back was checked before the switch began.
		if err := s.pivotObjects(ctx, previous, target, during, true); err != nil {
			return nil, err
		}
	}
	if a, err := s.Active(); err != nil && !isDamage(err) {
		return nil, err
	} else if err != nil || a != target {
		state.CrashPoint("switch:before-active")
		if err := record.WriteActive(s.Dir, target); err != nil {
			return nil, err
		}
		s.logf("active slot: %s (was %s)", target, orNone(a))
	}
	state.CrashPoint("switch:before-kubeconfig")
	if err := pointAlias(s.Kubeconfig, s.AliasContext, rec.Context); err != nil {
		return nil, fmt.Errorf("pointing context %s at slot %s: %w", s.AliasContext, target, err)
	}
	s.logf("context %s -> %s", s.AliasContext, rec.Context)
	s.moveWorkloadContexts(ctx, target)
	if rec.Registry != "" {
		var others []string
		slotOf := map[string]string{}
		names, _ := slot.List(s.Dir)
		for _, n := range names {
			if o, err := slot.Load(s.Dir, n); err == nil && n != target && o.Registry != "" {
				others = append(others, o.Registry)
				slotOf[o.Registry] = n
			}
		}
		if err := s.placeRegistryAlias(ctx, rec.Registry, others); err != nil {
			return nil, err
		}
		s.logf("registry alias %s -> %s (network %s)", s.RegistryAlias, rec.Registry, s.Network)
		if err := s.refreshRegistryServices(ctx, target, others, slotOf); err != nil {
			return nil, err
		}
	}
	sw.Phase = after
	if after == record.PhaseSwitched && sw.SoakStarted.IsZero() {
		sw.SoakStarted, sw.SoakWindow = s.now(), s.SoakWindow.String()
	}
	state.CrashPoint("switch:before-done")
	if err := s.save(sw); err != nil {
		return nil, err
	}
	return sw, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// To makes target the active slot. It requires target's last gate to have
// passed within MaxGateAge, unless force or this resumes an interrupted
// switch to the same slot.
func (s *Switcher) To(ctx context.Context, target string, force bool) (*Record, error) {
	rec, err := slot.Load(s.Dir, target)
	if dmg := (*slot.DamagedError)(nil); errors.As(err, &dmg) {
		// The repair of a protected slot's record keeps the slot.
		if p, perr := site.Read(s.Dir).Protects(target); perr == nil {
			dmg.Protected = p
		}
	}
	if errors.As(err, new(*slot.NotFoundError)) {
		if t, terr := s.transaction(); terr == nil {
			if a, aerr := s.Active(); aerr == nil && a == target && site.Read(s.Dir).SoakGone(target) != "" {
				return nil, &ConflictError{goneSoaking(s.Dir, target, t.Slots.Active)}
			}
		}
	}
	if err != nil {
		return nil, err
	}
	if rec.State != slot.StateReady {
		return nil, &ConflictError{fmt.Sprintf("slot %s is %s, not ready", target, rec.State)}
	}
	// A forced switch rewrites a damaged pointer or switch record: it is
	// the repair their errors name.
	sw, err := s.Load()
	if err != nil && !(force && isDamage(err)) {
		return nil, err
	}
	recordDamaged := err != nil
	active, err := s.Active()
	// A lost pointer (missing while the state says a slot was made active)
	// is written back by the forced switch to that slot its repair names:
	// a plain switch meets it as damage (it would take the lost pointer
	// for "none" and rewrite the switch record without what it kept).
	var lost *site.LostPointerError
	lostHere := errors.As(err, &lost) && lost.Slot == target
	if err != nil && !(force && isDamage(err)) {
		return nil, err
	}
	pointerDamaged := err != nil
	if lostHere && sw != nil && sw.Target == target {
		active = target // the switch record's slot: its switch resumes, or is kept as it was
	}
	if active != "" && active != target {
		// A pointer to a slot that has no record is no revert target; it
		// is damage a plain switch meets (its repair is named), unless the
		// state explains it (a recreate rebuilding that slot, a soak whose
		// candidate is gone).
		if _, err := slot.Load(s.Dir, active); errors.As(err, new(*slot.NotFoundError)) {
			if derr := site.Read(s.Dir).CheckActiveRecord(active); derr != nil && !force {
				return nil, derr
			}
			active = ""
		}
	}
	if active != "" && active != target {
		// The slot this switch leaves becomes the revert target: a damaged
		// record of it is repaired first, --force or not (the revert, and
		// the slot's protection, need it).
		if _, err := slot.Load(s.Dir, active); err != nil {
			if dmg := (*slot.DamagedError)(nil); errors.As(err, &dmg) {
				dmg.Protected = true
				return nil, err
			}
		}
	}
	// Resuming an interrupted switch, or completing the moves to the slot
	// that is already active: the gate was checked when it began.
	resuming := sw != nil && sw.Target == target && (sw.Phase == record.PhaseSwitching || active == target)
	t, err := s.transaction()
	if err != nil {
		return nil, err
	}
	if err := s.checkTransaction(t, target, force, site.SwitchToSteps...); err != nil {
		return nil, err
	}
	// A pointer that disagrees with a finished switch record (an old
	// backup restored) does not make going back anything but the
	// transaction's revert: the record says which slot serves.
	serving := active
	if !pointerDamaged && sw != nil && sw.Target != "" && sw.Target != active &&
		(sw.Phase == record.PhaseSwitched || sw.Phase == record.PhaseAccepted) && site.Read(s.Dir).Exists(sw.Target) {
		serving = sw.Target
	}
	if err := site.NotBack(t, target, serving); err != nil {
		return nil, err
	}
	if !force && !resuming {
		if err := s.checkGate(rec); err != nil {
			return nil, err
		}
		// A blue-green switch goes to the candidate only while it holds
		// the update (a PROVISIONED recorded done is a claim).
		if bg := blueGreen(t); bg != nil && target == bg.Slots.Candidate {
			if err := site.Read(s.Dir).Holds(target, bg.Target); errors.As(err, new(*site.WorldError)) {
				return nil, fmt.Errorf("refusing to switch to slot %s for transaction %s: %w; nothing was switched; re-run the script, which deploys it again: %s", target, bg.ID, err, site.Rerun(s.Dir, bg))
			}
		}
	}
	if err := checkAlias(s.Kubeconfig, rec.Context); err != nil {
		return nil, err
	}
	// Resumed too: the moves point the alias context at the slot's
	// context, which may reach another cluster since the switch began.
	if s.CheckCluster != nil {
		if err := s.CheckCluster(ctx, rec, "switch to"); err != nil {
			return nil, err
		}
	}
	// Re-pointing the aliases at the slot that is active and accepted (status
	// said DIVERGED) is a repair: no gate, no new soak, no revert target.
	// So is writing back a lost pointer after a switch back.
	realign := sw != nil && sw.Target == target && active == target &&
		(sw.Phase == record.PhaseAccepted || (lostHere && sw.Phase == record.PhaseSwitchedBack))
	// So is a forced switch, during a blue-green update that has not
	// switched yet, to the slot it updates from (the repair of a damaged
	// pointer or switch record): it re-points the aliases at the slot that
	// serves, records no step of the update, and keeps the switch record's
	// phase when it names that slot.
	repointOnly := false
	if bg := blueGreen(t); force && bg != nil && target == bg.Slots.Active && !site.PastSwitch(bg) && !site.RollingBack(bg) {
		realign, repointOnly = true, true
		if sw == nil || sw.Target != target || sw.Phase == record.PhaseSwitching || sw.Phase == record.PhaseSwitchingBack {
			// No record of that slot's switch to keep: the history's soak
			// of it, if it records one, else none.
			sw = &record.Switch{Target: target, Phase: record.PhaseAccepted}
			if to, from := site.Read(s.Dir).HistorySoak(); to == target && from != "" && from != target {
				sw.Phase, sw.Previous = record.PhaseSwitched, from
			}
		}
	}
	previous, after := active, record.PhaseSwitched
	if resuming {
		previous = sw.Previous
	}
	if previous == target || realign {
		previous = "" // a switch to the slot already active keeps no revert target
	}
	if realign {
		after = sw.Phase
		if after == record.PhaseSwitchedBack || after == record.PhaseSwitched {
			previous = sw.Previous // a soak's revert target, or the slot switched back from, is kept
		}
	}
	// The soak of an open blue-green transaction keeps its revert target
	// when switch.json is missing or damaged (its forced repair lands here).
	if bg := site.SoakingOn(t, target); previous == "" && !realign && bg != nil {
		previous = bg.Slots.Active
	}
	// So does the soak the history records when both records are gone.
	if to, from := site.Read(s.Dir).HistorySoak(); previous == "" && !realign && sw == nil && to == target && from != target {
		previous = from
	}
	// The mode: a resumed switch or a repair keeps its own; otherwise the
	// flag's, else the open transaction's.
	mode := s.Mode
	switch {
	case resuming || realign:
		mode = sw.Mode
		if repointOnly && mode == journal.SwitchPivot {
			// This repair re-points the aliases at the slot the update
			// builds from: the workload clusters' objects stay where the
			// last pivot left them.
			mode = ""
		}
	case mode == "" && t != nil:
		mode = t.SwitchMode
	case mode == "s2":
		mode = journal.SwitchS2 // named on the command line: not the transaction's
	}
	if interrupted, err := s.interruptedPivot(); err != nil {
		return nil, err
	} else if interrupted && mode != journal.SwitchPivot {
		s.logf("a pivot did not finish: this switch resumes or undoes it first (mode pivot)")
		mode = journal.SwitchPivot
	}
	if mode == journal.SwitchPivot && !resuming {
		// Every precondition of the pivot, before the first write.
		if previous == "" {
			return nil, &ConflictError{fmt.Sprintf("--mode pivot moves the workload clusters from the active slot to %s, and no other slot is active", target)}
		}
		plan, err := s.PivotPlan(ctx, previous, target)
		if err != nil {
			return nil, err
		}
		if err := plan.Check(s.Yes); err != nil {
			return nil, err
		}
		s.logf("%s", plan.Summary())
	}
	// A damaged entry that is not a file (a directory) cannot be replaced
	// by a rename: it is moved aside first, kept for inspection.
	for _, f := range []struct {
		damaged bool
		path    string
	}{{recordDamaged, s.recordPath()}, {pointerDamaged, s.Dir.Join(record.ActiveFile)}} {
		if !f.damaged {
			continue
		}
		aside, err := state.SetAsideIfNotFile(f.path)
		if err != nil {
			return nil, err
		}
		if aside != "" {
			s.logf("moved the damaged %s aside to %s", f.path, aside)
		}
	}
	var out *Record
	doMove := func() error {
		out, err = s.move(ctx, target, previous, record.PhaseSwitching, after, mode)
		return err
	}
	bg := blueGreen(t)
	if realign {
		err = doMove()
	} else if bg != nil && bg.Phase == journal.Soaking {
		err = doMove() // the transaction is past SWITCHED: only finish the moves
	} else {
		err = s.phaseStep(bg, journal.Switched, doMove)
	}
	if err != nil {
		return nil, err
	}
	if bg != nil && bg.Phase != journal.Soaking && !realign {
		if _, err := s.Journal.Start(journal.Soaking); err != nil {
			return nil, err
		}
	}
	s.event("to", target, previous)
	return out, nil
}

// goneSoaking refuses to accept, or switch again to, slot target that
// soaks and is gone (destroyed with --force): accepting it would retire
// previous, the slot that still holds the previous deployment.
func goneSoaking(d *state.Dir, target, previous string) string {
	return fmt.Sprintf("slot %s, the slot soaking, is gone (destroyed with --force): there is nothing to accept or switch to, and slot %s still holds the previous deployment. Go back to it: %s (without the script: %s)",
		target, previous, advice.Program(journal.ScriptPath(journal.BlueGreen), "revert").WithEnv(d.CommandEnv()), d.Plugin("switch", "back"))
}

// goneTarget refuses to accept slot target, switched to with no
// transaction and then destroyed: slot previous holds the deployment
// that was known good, and the way on is back to it.
func goneTarget(d *state.Dir, target, previous string) string {
	if !site.Read(d).Lineage(target).Destroyed {
		return fmt.Sprintf("slot %s, the slot switched to, has no record (destroyed, or its record lost): there is nothing known to accept, and accepting would leave slot %s, which still holds the previous deployment, to be retired. If slot %s still runs, rebuild its record: %s; else go back to slot %s: %s",
			target, previous, target, d.Plugin("slot", "repair", target), previous, site.Read(d).PointerRepair(target, previous))
	}
	return fmt.Sprintf("slot %s, the slot switched to, is gone (the history says it was destroyed): there is nothing to accept, and accepting would leave slot %s, which still holds the previous deployment, to be retired. Go back to it: %s",
		target, previous, site.Read(d).PointerRepair(target, previous))
}

// BackGateError is Back's refusal: the previous slot fails its gate, so
// nothing was switched and the candidate keeps serving. An environment
// error (exit 3): the previous deployment is broken.
type BackGateError struct {
	Previous, Active string
	Err              error
	// Dir is the state dir the printed commands act on.
	Dir *state.Dir
}

func (e *BackGateError) Error() string {
	return fmt.Sprintf("slot %s, the previous slot, fails its gate (%v): nothing was switched, slot %s stays active and is kept. "+
		"See what fails: %s; once it passes, run %s again; "+
		"to switch back anyway: %s; or keep slot %s: %s",
		e.Previous, e.Err, e.Active, e.Dir.Plugin("gate", "--slot", e.Previous), e.Dir.Plugin("switch", "back"),
		e.Dir.Plugin("switch", "back", "--force"), e.Active, e.Dir.Plugin("switch", "accept"))
}

func (e *BackGateError) Unwrap() error { return e.Err }

// ErrorKind: the previous deployment is broken (exit 3).
func (e *BackGateError) ErrorKind() errkind.Kind { return errkind.Environment }

// ReturnToOwner is the way back to slot owner, which an S1 (repoint)
// update kept for the workload clusters it runs: it still holds the
// previous package, so returning is a new switch to it, not a build (a
// build there would delete those clusters).
func ReturnToOwner(d *state.Dir, owner string) string {
	return fmt.Sprintf("To return to the previous package, which slot %s still holds and serves its workload clusters with, gate it and switch to it: %s, then %s",
		owner, d.Plugin("gate", "--slot", owner, "--record"), d.Plugin("switch", "to", owner))
}

// Back returns to the previous slot during the soak. Unless force, the
// previous slot must pass its gate first (GateBack): a revert never
// switches to a slot that is broken. Resuming an interrupted switch back
// is not gated again (the pointer may already name that slot).
func (s *Switcher) Back(ctx context.Context, force bool) (*Record, error) {
	sw, err := s.Load()
	if err != nil {
		return nil, err
	}
	if sw == nil || sw.Previous == "" {
		// switch.json missing (or without a previous slot) during the
		// soak of an open blue-green transaction: the transaction names
		// the way back.
		if t, terr := s.transaction(); terr == nil {
			if a, aerr := s.Active(); aerr == nil {
				if bg := site.SoakingOn(t, a); bg != nil {
					sw = &Record{Phase: record.PhaseSwitched, Target: a, Previous: bg.Slots.Active}
				}
			}
		}
	}
	if sw == nil || sw.Previous == "" {
		return nil, &ConflictError{"there is no previous slot to switch back to (no switch recorded)"}
	}
	switch sw.Phase {
	case record.PhaseSwitched, record.PhaseSwitchingBack, record.PhaseSwitching:
	case record.PhaseSwitchedBack:
		return sw, nil
	case record.PhaseAccepted:
		prev, err := slot.Load(s.Dir, sw.Previous)
		if err == nil && sw.Mode == journal.SwitchRepoint {
			return nil, &ConflictError{fmt.Sprintf("the switch to %s was accepted in mode repoint (S1): slot %s is no longer a revert target; it keeps running the workload clusters it owns (%s), and slot %s stays active. %s",
				sw.Target, sw.Previous, orNone(strings.Join(prev.OwnsWorkloads, ", ")), sw.Target, ReturnToOwner(s.Dir, sw.Previous))}
		}
		if errors.As(err, new(*slot.NotFoundError)) {
			return nil, &ConflictError{fmt.Sprintf("the switch to %s was accepted and the previous slot %s was retired (destroyed): there is nothing to go back to, and slot %s stays active. "+
				"To return to the previous package, update to it as to any package: %s apply PACKAGE --key KEY builds it in a new slot next to %s (the previous transaction's fallback digest: %s)",
				sw.Target, sw.Previous, sw.Target, journal.ScriptPath(journal.BlueGreen), sw.Target, s.Dir.Plugin("journal", "log"))}
		}
		return nil, &ConflictError{fmt.Sprintf("the switch to %s was accepted: the soak is over; going to %s again is a new switch (%s, with a fresh gate)", sw.Target, sw.Previous, s.Dir.Plugin("switch", "to", sw.Previous))}
	}
	t, err := s.transaction()
	if err != nil {
		return nil, err
	}
	if err := s.checkTransaction(t, "", false, site.SwitchBackSteps...); err != nil {
		return nil, err
	}
	from, to := sw.Target, sw.Previous
	if sw.Phase == record.PhaseSwitchingBack {
		from, to = sw.Previous, sw.Target // resuming: the record already names the way back
	}
	if s.CheckCluster != nil {
		// Resumed too (the alias context is pointed at the slot's context
		// again). A record lost or damaged is refused below, naming its
		// repair.
		if rec, err := slot.Load(s.Dir, to); err == nil {
			if err := s.CheckCluster(ctx, rec, "switch back to"); err != nil {
				return nil, err
			}
		}
	}
	if sw.Phase != record.PhaseSwitchingBack {
		switch {
		case force:
			s.logf("switching back to slot %s WITHOUT gating it (--force): it may be broken", to)
			s.event("back --force (ungated)", to, from)
		case s.GateBack == nil:
			return nil, &BackGateError{Previous: to, Active: from, Err: errors.New("no gate can be run here"), Dir: s.Dir}
		default:
			if err := s.GateBack(ctx, to); err != nil {
				if errkind.Of(err) == errkind.Negative {
					return nil, &BackGateError{Previous: to, Active: from, Err: err, Dir: s.Dir}
				}
				return nil, fmt.Errorf("gating slot %s before switching back to it: %w", to, err)
			}
		}
	}
	if sw.Mode == journal.SwitchPivot && sw.Phase != record.PhaseSwitchingBack {
		// The way back must be served before the pointer moves.
		plan, err := s.PivotPlan(ctx, from, to)
		if err != nil {
			return nil, err
		}
		if err := plan.Check(true); err != nil {
			return nil, err
		}
		s.logf("%s", plan.Summary())
	}
	var out *Record
	err = s.phaseStep(blueGreen(t), journal.SwitchedBack, func() error {
		out, err = s.move(ctx, to, from, record.PhaseSwitchingBack, record.PhaseSwitchedBack, sw.Mode)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.event("back", to, from)
	return out, nil
}

// AcceptResult says what accept did. Not accepted, the slot is still
// soaking: SoakEnds says when the window ends and Left how long that is.
type AcceptResult struct {
	Accepted bool   `json:"accepted"`
	Slot     string `json:"slot"`
	Mode     string `json:"mode,omitempty"`
	Retire   string `json:"retire,omitempty"`
	// Keeps is the previous slot kept by an S1 accept for the workload
	// clusters it owns (Owns).
	Keeps    string        `json:"keeps,omitempty"`
	Owns     []string      `json:"owns,omitempty"`
	Left     time.Duration `json:"soakLeftNs,omitempty"`
	SoakEnds *time.Time    `json:"soakEnds,omitempty"`
}

// Accept ends the soak; with ifSoaked, only once the soak window passed.
// In mode repoint (S1) the previous slot keeps the workload clusters it
// runs: they are recorded in its record, which keeps it from being
// retired.
func (s *Switcher) Accept(ctx context.Context, ifSoaked bool) (*AcceptResult, error) {
	sw, err := s.Load()
	if err != nil {
		return nil, err
	}
	if sw == nil || (sw.Phase != record.PhaseSwitched && sw.Phase != record.PhaseAccepted) {
		phase := "none"
		if sw != nil {
			phase = sw.Phase
		} else if n := site.Read(s.Dir).SoakLost(); n != nil {
			return nil, &ConflictError{"nothing is soaking: " + n.Why + ": " + n.Run.String()}
		}
		return nil, &ConflictError{fmt.Sprintf("nothing is soaking (switch phase %s): accept follows %s", phase, s.Dir.Plugin("switch", "to", "SLOT"))}
	}
	if _, err := slot.Load(s.Dir, sw.Target); errors.As(err, new(*slot.NotFoundError)) {
		if site.Read(s.Dir).SoakGone(sw.Target) != "" {
			return nil, &ConflictError{goneSoaking(s.Dir, sw.Target, sw.Previous)}
		}
		// Without a transaction, too: a target the history says was
		// destroyed is nothing to accept, and accepting would leave the
		// previous slot unprotected, to be retired as accept advises.
		// The history may have lost the destroy (cut from outside, then
		// repaired): a target with no record while the previous slot has
		// one is never accepted either.
		if _, perr := slot.Load(s.Dir, sw.Previous); sw.Previous != "" && perr == nil {
			return nil, &ConflictError{goneTarget(s.Dir, sw.Target, sw.Previous)}
		}
	}
	// Damage is met before anything is said accepted (an accept already
	// made, too): the pointer, the protected slots' records.
	if _, err := site.Read(s.Dir).Protection(); err != nil {
		return nil, err
	}
	res := &AcceptResult{Slot: sw.Target, Mode: sw.Mode}
	if sw.Phase == record.PhaseSwitched && ifSoaked {
		window, _ := time.ParseDuration(sw.SoakWindow)
		ends := sw.SoakStarted.Add(window).UTC()
		if left := ends.Sub(s.now()); left > 0 {
			res.Left, res.SoakEnds = left, &ends
			return res, nil
		}
	}
	if sw.Previous != "" && sw.Mode != journal.SwitchRepoint {
		res.Retire = s.Dir.Plugin("slot", "destroy", sw.Previous).String()
	}
	if sw.Phase == record.PhaseAccepted {
		if sw.Mode == journal.SwitchRepoint && sw.Previous != "" {
			if prev, err := slot.Load(s.Dir, sw.Previous); err == nil && len(prev.OwnsWorkloads) > 0 {
				res.Keeps, res.Owns = prev.Name, prev.OwnsWorkloads
			} else if err == nil {
				res.Retire = s.Dir.Plugin("slot", "destroy", sw.Previous).String()
			}
		}
		res.Accepted = true
		return res, nil
	}
	t, err := s.transaction()
	if err != nil {
		return nil, err
	}
	if err := s.checkTransaction(t, "", false, journal.Soaking); err != nil {
		return nil, err
	}
	bg := blueGreen(t)
	if bg != nil && sw.Target == bg.Slots.Candidate {
		// Accepting keeps the candidate for good: it must hold the update.
		if err := site.Read(s.Dir).Holds(sw.Target, bg.Target); errors.As(err, new(*site.WorldError)) {
			return nil, fmt.Errorf("refusing to accept transaction %s: %w; nothing was accepted; revert it: %s revert", bg.ID, err, journal.ScriptPath(journal.BlueGreen))
		}
	}
	if bg != nil && bg.Phase == journal.Soaking {
		if _, err := s.Journal.Done(journal.Soaking); err != nil {
			return nil, err
		}
	}
	if err := s.phaseStep(bg, journal.Accepted, func() error {
		if sw.Mode == journal.SwitchRepoint && sw.Previous != "" {
			owns, err := s.keepWorkloads(ctx, sw.Previous)
			if err != nil {
				return err
			}
			res.Keeps, res.Owns = sw.Previous, owns
			if len(owns) == 0 {
				res.Keeps, res.Retire = "", s.Dir.Plugin("slot", "destroy", sw.Previous).String()
			}
		}
		if err := s.releaseWorkloads(sw.Target); err != nil {
			return err
		}
		sw.Phase = record.PhaseAccepted
		return s.save(sw)
	}); err != nil {
		return nil, err
	}
	s.event("accept", sw.Target, sw.Previous)
	res.Accepted = true
	return res, nil
}

// releaseWorkloads ends the ownership of slot name, an S1 owner made the
// accepted active slot again (the way back of an S1 update): its workload
// clusters are the active slot's, as any active slot's are, and a later
// update's accept may retire it like any previous slot. The history first,
// then the record: a crash between them leaves the slot an owner (kept),
// and the re-run of the accept finishes it.
func (s *Switcher) releaseWorkloads(name string) error {
	rec, err := slot.Load(s.Dir, name)
	if err != nil || len(rec.OwnsWorkloads) == 0 {
		return nil
	}
	owned := rec.OwnsWorkloads
	rec.OwnsWorkloads = nil
	if s.Journal != nil && len(site.Read(s.Dir).OwnedPerHistory(name)) > 0 {
		if err := s.Journal.Record(slot.IdentityEvent(rec, record.DetailOwns, journal.StatusDone)); err != nil {
			return err
		}
	}
	if err := slot.Save(s.Dir, rec); err != nil {
		return err
	}
	s.logf("slot %s, which an S1 update kept for workload clusters %s, is the accepted active slot again: it is no longer kept as their owner", name, strings.Join(owned, ", "))
	return nil
}

// keepWorkloads records the workload clusters slot name runs as its own,
// before the accept that ends its soak: from then on the guard keeps the
// slot for them. Re-run after a crash, it records them again.
func (s *Switcher) keepWorkloads(ctx context.Context, name string) ([]string, error) {
	rec, err := slot.Load(s.Dir, name)
	if err != nil {
		return nil, err
	}
	var running []string
	if s.Workloads != nil {
		if running, err = s.Workloads(ctx, name); err != nil {
			return nil, err
		}
	}
	owns := slices.Clone(rec.OwnsWorkloads)
	for _, w := range running {
		if !slices.Contains(owns, w) {
			owns = append(owns, w)
		}
	}
	if len(owns) > 0 && !slices.Equal(owns, rec.OwnsWorkloads) {
		rec.OwnsWorkloads = owns
		if err := slot.Save(s.Dir, rec); err != nil {
			return nil, err
		}
	}
	// The history keeps the ownership too (again after a crash here): a
	// lost or damaged record must not make the slot destroyable with its
	// workloads.
	if len(owns) > 0 && s.Journal != nil && !slices.Equal(site.Read(s.Dir).OwnedPerHistory(name), owns) {
		if err := s.Journal.Record(slot.IdentityEvent(rec, record.DetailOwns, journal.StatusDone)); err != nil {
			return nil, err
		}
	}
	if len(owns) > 0 {
		s.logf("slot %s keeps workload clusters %s (switch mode repoint): it is kept, not retired", name, strings.Join(owns, ", "))
	} else {
		s.logf("slot %s runs no workload clusters: nothing to keep it for", name)
	}
	return owns, nil
}

func (s *Switcher) event(what, to, from string) {
	if s.Journal == nil {
		return
	}
	detail := fmt.Sprintf("%s %s from %s", what, to, orNone(from))
	if what == "accept" {
		detail = "accept " + to
	}
	_ = s.Journal.Record(journal.Event{Type: "switch", Slot: to, Detail: detail, Status: "done"})
}

// Register makes target, a slot adopt just recorded on a site where no
// slot was active, the active slot as an accepted switch with no previous
// slot: the pointer, the switch record and the alias context (pointed at
// the slot's own context). The registry alias is left alone: moving it
// reconnects the site's registry container, which adopt does not touch;
// the first switch gives it to the slot switched to.
func (s *Switcher) Register(target string) error {
	rec, err := slot.Load(s.Dir, target)
	if err != nil {
		return err
	}
	if err := checkAlias(s.Kubeconfig, rec.Context); err != nil {
		return err
	}
	sw := &Record{Phase: record.PhaseSwitching, Target: target}
	if err := s.save(sw); err != nil {
		return err
	}
	state.CrashPoint("register:before-active")
	if err := state.WriteFile(s.Dir.Join(record.ActiveFile), []byte(target+"\n")); err != nil {
		return err
	}
	if err := pointAlias(s.Kubeconfig, s.AliasContext, rec.Context); err != nil {
		return fmt.Errorf("pointing context %s at slot %s: %w", s.AliasContext, target, err)
	}
	s.logf("active slot: %s; context %s -> %s", target, s.AliasContext, rec.Context)
	sw.Phase = record.PhaseAccepted
	if err := s.save(sw); err != nil {
		return err
	}
	s.event("to", target, "")
	return nil
}
