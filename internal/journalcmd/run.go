package journalcmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/runner"
	statesession "github.com/kubectl-bundle/kubectl-bundle/internal/session"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
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
	t, err := site.Read(s.dir).Txn()
	if err != nil {
		return err
	}
	// Damaged state stops a step before it runs, and before a step already
	// done is skipped: a re-run must not go on to gate, record and end the
	// transaction past it.
	if err := s.Check(); err != nil {
		return err
	}
	if t == nil {
		return kcli.Conflict(errors.New("no transaction in progress; start one with: kubectl bundle-journal begin --strategy STRATEGY --package PATH|DIGEST"))
	}
	p, err := journal.ParsePhase(t.Strategy, strings.ToUpper(args[0]))
	if err != nil {
		return kcli.Usage("%v", err)
	}
	command := strings.Join(args[1:], " ")
	if st := t.Step(p); st != nil && st.Status == journal.StatusDone {
		if !s.common.Quiet {
			fmt.Fprintf(streams.ErrOut, "%s already done: skipping %s\n", p, command)
		}
		return nil
	}
	// A step that changes the active slot starts only while the way back
	// is usable: nothing is recorded and nothing runs otherwise.
	if err := s.FallbackUsable(t, p, "start "+command); err != nil {
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
	err = journal.RunStep(unlockedPhase{streams, cmd, p, stepID}, func() error {
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
		return nil
	})
	if ran {
		// What the step changed, kept for the audit (best effort).
		if t, lerr := site.Read(s.dir).Txn(); lerr == nil {
			keepEvidence(streams.ErrOut, s.dir, t)
		}
	}
	if err == nil || !ran {
		// Not started (a conflict, the lock): that error is the answer.
		return err
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
	return s.j.PhaseStep(u.p).Start()
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
