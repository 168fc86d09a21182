package journalcmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/urfave/cli/v3"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// lockRunCommand gives the strategy scripts the run lock's path to open
// (scripts/lib.sh, drive; advance --hold takes it): the state dir is owned by the script's live process for its
// whole run. Hidden: operators never call it.
func lockRunCommand(streams kcli.IOStreams) *cli.Command {
	return &cli.Command{
		Name:   "lock-run",
		Hidden: true,
		Usage:  "hold the state dir for a strategy script's whole run (--path: where to open the lock; --fd N: take it on the script's descriptor N)",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "path", Usage: "print the run lock's path, for the script to open"},
			&cli.IntFlag{Name: "fd", Value: -1, Usage: "the script's descriptor open on the run lock, inherited"},
			&cli.StringFlag{Name: "command", Usage: "the command that re-runs the script, named to whoever is refused"},
		},
		Action: func(_ context.Context, cmd *cli.Command) error { return lockRun(streams, cmd) },
	}
}

func lockRun(streams kcli.IOStreams, cmd *cli.Command) error {
	common, err := kcli.ParseCommon(cmd)
	if err != nil {
		return err
	}
	d, err := state.Open(common.StateDir)
	if err != nil {
		return errkind.Wrap(errkind.Environment, err)
	}
	if cmd.Bool("path") {
		p, err := d.RunLockPath()
		if err != nil {
			return kinded(err)
		}
		fmt.Fprintln(streams.Out, p)
		return nil
	}
	fd := int(cmd.Int("fd"))
	if fd < 3 {
		return kcli.Usage("want --path, or --fd N (3 or more): the script's descriptor open on the run lock")
	}
	command := cmd.String("command")
	if command == "" {
		command = parentCommand()
	}
	return holdRun(d, fd, command)
}

// holdRun takes the run lock on the script's descriptor fd for its whole
// run. The script is this call's parent: it holds the lock, not this
// process. Its pid, command and start are written under the lock: what
// names it to every other process, on every system (no /proc needed).
func holdRun(d *state.Dir, fd int, command string) error {
	h := state.Holder{PID: os.Getppid(), Command: command, Since: time.Now().UTC(), Start: state.ProcStart(os.Getppid())}
	if err := d.HoldRun(fd, h); err != nil {
		if errkind.Of(err) != errkind.Unknown {
			return err // a live run (exit 4), a damaged run lock (exit 3)
		}
		return errkind.Wrap(errkind.Environment, fmt.Errorf("holding the run lock: %w", err))
	}
	// A command that started before the run and still holds the state lock
	// finishes first: from now on every other one sees the run and refuses.
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := d.Lock()
		if err == nil {
			return l.Unlock()
		}
		var le *state.LockedError
		if !errors.As(err, &le) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kinded is err with its own kind (a live run: exit 4; a damaged run lock:
// exit 3), else as the environment's.
func kinded(err error) error {
	if errkind.Of(err) != errkind.Unknown {
		return err
	}
	return errkind.Wrap(errkind.Environment, err)
}

// parentCommand is the calling script's command line, as the system tells
// it (/proc on Linux, sysctl on darwin).
func parentCommand() string {
	if c := state.ProcCommand(os.Getppid()); c != "" {
		return c
	}
	return "a strategy script"
}
