package journalcmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
	"github.com/kubectl-bundle/kubectl-bundle/internal/runner"
	statesession "github.com/kubectl-bundle/kubectl-bundle/internal/session"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/stage"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// runStep is `run PHASE -- COMMAND...`: the one primitive that makes a
// script resumable. A phase already done is skipped; otherwise it is
// started (a retry when it was started or failed before), the command runs
// without the lock held (it takes the lock itself), and the phase is
// recorded done or failed. The exit status is the command's.
func runStep(ctx context.Context, streams kcli.IOStreams, cmd *cli.Command) error {
	args := cmd.Args().Slice()
	if len(args) > 1 && args[1] == "--" {
		args = append(args[:1], args[2:]...)
	}
	if len(args) < 2 {
		return kcli.Usage("want PHASE -- COMMAND [ARGS...]")
	}
	s, err := openSession(streams, cmd, false)
	if err != nil {
		return err
	}
	t, err := site.ReadTxn(s.dir)
	if err != nil {
		return err
	}
	// Damaged state stops a step before it runs, and before a step already
	// done is skipped: a re-run must not go on to gate, record and end the
	// transaction past it.
	if err := s.Check(); err != nil {
		return err
	}
	// A history cut from outside, too (its damage otherwise is the
	// transaction's read above): a step the run records goes there, and a
	// refusal for another reason would leave the cut unsaid.
	if cut, err := s.j.CutHistory(); err == nil && cut != nil {
		return cut
	}
	if t == nil {
		return kcli.Conflict(errors.New(journal.NoTransactionMsg(s.dir)))
	}
	p, err := journal.ParsePhase(t.Strategy, strings.ToUpper(args[0]))
	if err != nil {
		return kcli.Usage("%v", err)
	}
	// As a line that runs as printed: the argv quoted for sh.
	command := advice.Program(args[1], args[2:]...).String()
	if site.SwitchOwned(t.Strategy, p) {
		return &site.ClaimError{Msg: fmt.Sprintf("%s is recorded by the switch plugin itself, never by journal run; nothing was run: %s records it", p, site.SwitchCommand(s.dir, t, p))}
	}
	claim, claimed := site.StepClaim(t, p)
	reopen := ""
	if st := t.Step(p); st != nil && st.Status == journal.StatusDone {
		// A step recorded done is a claim: the current step is skipped
		// only while the slot bears it out, else it is done again.
		if t.Phase == p {
			reopen = doubt(s.dir, t, p, claim, claimed)
		}
		if reopen == "" {
			if !s.common.Quiet {
				fmt.Fprintf(streams.ErrOut, "%s already done: skipping %s\n", p, command)
			}
			return nil
		}
		fmt.Fprintf(streams.ErrOut, "%s is recorded done, but %s: doing it again\n", p, reopen)
	}
	if err := confirmCommit(s.dir, t, p); err != nil {
		return err
	}
	// A step that changes the active slot starts only while the way back
	// is usable: nothing is recorded and nothing runs otherwise.
	if err := s.FallbackUsable(t, p, "start "+command); err != nil {
		return err
	}
	if err := rebuildable(s.dir, t, p, "start "+command); err != nil {
		return err
	}
	// The step is owned by this live process: it holds the step lock until
	// the outcome is recorded, and the kernel releases it if the process
	// dies, so a re-run takes the step over at once.
	stepID := t.ID + "/" + string(p)
	stepLock, err := s.Dir.LockStep(stepID)
	if err != nil {
		var le *state.LockedError
		if errors.As(err, &le) && le.Holder != nil {
			return kcli.Conflict(fmt.Errorf("step %s is running in pid %d (%s) since %s: wait for it to finish; if it hangs, stop it (kill %d) and re-run this command",
				le.Holder.Step, le.Holder.PID, le.Holder.Command, le.Holder.Since.Format(time.RFC3339), le.Holder.PID))
		}
		return err
	}
	defer stepLock.Unlock()
	var code int
	ran := false
	var claimErr error
	err = journal.RunStep(unlockedPhase{streams, cmd, p, stepID, reopen}, func() error {
		ran = true
		if !s.common.Quiet {
			fmt.Fprintf(streams.ErrOut, "==> %s: %s\n", p, command)
		}
		var runErr error
		code, runErr = runner.Attach(ctx, []string{statesession.EnvStep + "=" + stepID}, streams.In, streams.Out, streams.ErrOut, args[1], args[2:]...)
		switch {
		case runErr != nil:
			return runErr
		case code != 0:
			return fmt.Errorf("%s exited %d", args[1], code)
		}
		if claimed {
			// Done only when its plugin did it as this step.
			if perr := site.Read(s.dir).Proven(t, claim); perr != nil {
				claimErr = fmt.Errorf("%s exited 0, but %w", command, perr)
				return claimErr
			}
		}
		return nil
	})
	if ran {
		// What the step changed, kept for the audit (best effort).
		if t, lerr := site.ReadTxn(s.dir); lerr == nil {
			keepEvidence(streams.ErrOut, s.dir, t)
		}
	}
	if err == nil || !ran {
		// Not started (a conflict, the lock): that error is the answer.
		return err
	}
	if claimErr != nil {
		return &site.ClaimError{Msg: fmt.Sprintf("%s not done (recorded failed): %v", p, err)}
	}
	// The step's command failed: a plugin's code keeps its row of the table.
	return errkind.Wrap(kcli.KindOfExit(code), fmt.Errorf("%s failed: %w", p, err))
}

// unlockedPhase records phase p with the state lock held only while it
// records: the command of the step takes the lock itself.
type unlockedPhase struct {
	streams kcli.IOStreams
	cmd     *cli.Command
	p       journal.Phase
	step    string // the step this process owns
	// reopen, when set, is why the step recorded done is done again.
	reopen string
}

func (u unlockedPhase) Start() error {
	s, err := openStepSession(u.streams, u.cmd, u.step)
	if err != nil {
		return err
	}
	defer s.close()
	if err := s.Check(); err != nil {
		return err
	}
	if u.reopen != "" {
		if _, err := s.j.Reopen(u.p, u.reopen); err != nil {
			return err
		}
	}
	return s.j.PhaseStep(u.p).Start()
}

// doubt says why step p of t, recorded done and still the current step,
// is not borne out by the slot ("" when it is): a deploy whose slot does
// not hold its package, a create whose slot is not ready, a destroy whose
// slot still has a record, a gate that did not pass for the target in
// this run (a run killed after HEALTHY, re-run: the gate runs again).
func doubt(d *state.Dir, t *journal.Transaction, p journal.Phase, c site.Claim, claimed bool) string {
	st := site.Read(d)
	var err error
	switch {
	case claimed && c.Change == site.ChangeDeploy:
		err = st.Holds(c.Slot, c.Digest)
		if errors.As(err, new(*record.NotFoundError)) && !st.Lineage(c.Slot).Exists {
			// Destroyed since (a forced destroy): what the step deployed is gone.
			err = &site.WorldError{Msg: fmt.Sprintf("slot %s was destroyed since", c.Slot)}
		}
	case claimed && c.Change == site.ChangeCreate:
		rec, lerr := st.Slot(c.Slot)
		switch {
		case lerr == nil && rec.State != slot.StateReady:
			err = fmt.Errorf("slot %s is %s, not ready", c.Slot, rec.State)
		case errors.As(lerr, new(*record.NotFoundError)) && !st.Lineage(c.Slot).Exists:
			// Destroyed since (the history says so): not a lost record.
			err = &site.WorldError{Msg: fmt.Sprintf("slot %s was destroyed since", c.Slot)}
		}
	case claimed && c.Change == site.ChangeDestroy:
		if _, lerr := st.Slot(c.Slot); lerr == nil {
			err = fmt.Errorf("slot %s still has a record", c.Slot)
		}
	case p == journal.Healthy:
		// This run's gate: the run began after the slot was last gated.
		err = st.FreshGate(site.GatedSlot(t), t.Target, runSince(d), time.Now(), site.GateFresh)
	case p == journal.Verified && t.Target != "":
		// The steps after it take the package from the stage: a staged
		// copy removed or changed since is verified and staged again.
		pkg, lerr := stage.Lookup(d, &stage.Ref{Digest: t.Target})
		if lerr == nil {
			lerr = pkg.Check()
		}
		if lerr != nil {
			err = &site.WorldError{Msg: fmt.Sprintf("package %s is no longer staged as it was verified", t.Target[:min(12, len(t.Target))])}
		}
	}
	// A record lost or damaged is not the slot's word: the step's own
	// checks (and the guard) name its repair.
	if err != nil && (errors.As(err, new(*site.WorldError)) || !isRecordError(err)) {
		return err.Error()
	}
	return ""
}

// isRecordError reports whether err is a slot record missing or damaged.
func isRecordError(err error) bool {
	return errors.As(err, new(*record.NotFoundError)) || errors.As(err, new(*record.DamagedError))
}

// runSince is when the strategy run this process is part of began (zero
// when it is part of none).
func runSince(d *state.Dir) time.Time {
	if h := d.OwnRun(); h != nil {
		return h.Since
	}
	return time.Time{}
}

// confirmCommit confirms the world before an in-place or recreate update
// commits: the active slot holds the target package and passed its gate
// for it since HEALTHY last started (and in this run), within
// site.GateFresh. A HEALTHY recorded by an earlier run is done again by
// the script's re-run first (doubt).
func confirmCommit(d *state.Dir, t *journal.Transaction, p journal.Phase) error {
	if p != journal.Committed || t.Strategy == journal.BlueGreen {
		return nil
	}
	st := site.Read(d)
	since := runSince(d)
	if h := t.Step(journal.Healthy); h != nil && h.StartedAt.After(since) {
		since = h.StartedAt
	}
	err := st.Holds(t.Slots.Active, t.Target)
	if err == nil {
		err = st.FreshGate(t.Slots.Active, t.Target, since, time.Now(), site.GateFresh)
	}
	if err != nil {
		return &site.WorldError{Msg: fmt.Sprintf("refusing to commit transaction %s: %v; nothing was recorded; gate it again (%s) or re-run the script, which gates it again before it commits: %s",
			t.ID, err, d.Plugin("gate", "--slot", t.Slots.Active, "--record"), site.Rerun(d, t))}
	}
	return nil
}

func (u unlockedPhase) Finish(stepErr error) error {
	s, err := relock(u.streams, u.cmd, u.step)
	if err != nil {
		return err
	}
	defer s.close()
	return s.j.PhaseStep(u.p).Finish(stepErr)
}

// relock takes the lock again after the command, waiting a little for a
// command that holds it briefly.
func relock(streams kcli.IOStreams, cmd *cli.Command, step string) (*session, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := openStepSession(streams, cmd, step)
		var le *state.LockedError
		if err == nil || !errors.As(err, &le) || time.Now().After(deadline) {
			return s, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// rebuildable: a recreate's TEARDOWN starts only while the slot can be
// created again, by the update or by the way back: the zarf init package
// its create takes is in the archives (issue 32, class 1: the way back
// checked before the step that changes the active slot, on every run).
func rebuildable(d *state.Dir, t *journal.Transaction, p journal.Phase, what string) error {
	if t.Strategy != journal.Recreate || p != journal.Teardown {
		return nil
	}
	cfg, err := slot.LoadConfig(d.Join("config.yaml"), os.Getenv, nil)
	if err != nil {
		return errkind.Wrap(errkind.Environment, err)
	}
	if err := (&slot.Manager{Dir: d, Config: cfg}).Recreatable(t.Slots.Active); err != nil {
		return errkind.New(errkind.Environment, "refusing to %s in step %s of transaction %s: slot %s could not be created again (by the update or by the way back): %v; nothing was changed; put it back, then re-run the same command",
			what, p, t.ID, t.Slots.Active, err)
	}
	return nil
}
