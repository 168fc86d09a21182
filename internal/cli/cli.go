// Package cli holds what every kubectl-bundle binary shares: exit codes, the
// standard flags, output selection and the mapping from library errors to exit codes.
package cli

import (
	"errors"
	"io"
	"os"
	"runtime/debug"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
)

// Exit codes shared by every binary and script (docs/exit-codes.md). Only
// this package turns errors into numbers, in ExitCode.
const (
	ExitOK          = 0 // done; for a check: it passed
	ExitNegative    = 1 // the thing checked is bad or not ready
	ExitUsage       = 2 // what the operator typed is wrong
	ExitEnvironment = 3 // the machine or the state does not allow the step
	ExitConflict    = 4 // a lock, a running step, an illegal transition, a protected slot
)

// Version is set at link time with -X github.com/kubectl-bundle/kubectl-bundle/internal/cli.Version=v1.2.3.
var Version = ""

// ToolVersion returns the version this binary was built as: the link-time
// version when set, else the module version from build info, else "devel".
func ToolVersion() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// IOStreams are the standard streams a command writes to. Data goes to Out,
// progress and diagnostics to ErrOut.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// OSStreams returns the process's standard streams.
func OSStreams() IOStreams {
	return IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
}

// Usage returns an error of kind Usage: what the operator typed is wrong.
func Usage(format string, args ...any) error {
	return errkind.New(errkind.Usage, format, args...)
}

// Environment marks err as the machine or the state not allowing the step.
func Environment(err error) error { return errkind.Wrap(errkind.Environment, err) }

// Conflict marks err as a conflict: a lock, an illegal transition, a protected slot.
func Conflict(err error) error { return errkind.Wrap(errkind.Conflict, err) }

// Negative marks err as a negative verdict: the thing checked is bad or not ready.
func Negative(err error) error { return errkind.Wrap(errkind.Negative, err) }

// Reported is a failure of kind k that the command has already reported in
// full (a text or JSON verdict): RunCommand prints nothing more for it.
func Reported(k errkind.Kind) error { return errkind.Wrap(k, errReported) }

var errReported = errors.New("")

// ExitMore is the code of a strategy script's step (kubectl bundle-journal
// advance) that ran and left more to run: the script's loop calls it
// again. It is never the exit code of a script or of an operator's command.
const ExitMore = 10

// ExitError is an exit code a command chose after it reported all it had
// to say: the strategy scripts' loop, whose codes are the run's own (a
// script's result, or ExitMore). RunCommand prints nothing for it.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return "" }

// KindOfExit reads an exit code of the table back as a kind: a step that
// ran one of the suite's binaries fails as that binary did. Any other code
// (a signal, 127, a foreign tool's own numbers) is an environment failure.
func KindOfExit(code int) errkind.Kind {
	switch code {
	case ExitNegative:
		return errkind.Negative
	case ExitUsage:
		return errkind.Usage
	case ExitConflict:
		return errkind.Conflict
	}
	return errkind.Environment
}

// ExitCode is the suite's one table from error kinds to exit codes. An
// error that says nothing of itself exits as an environment failure: the
// command could not do its job, which is not a verdict on the input.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ex *ExitError
	if errors.As(err, &ex) {
		return ex.Code
	}
	switch errkind.Of(err) {
	case errkind.Negative:
		return ExitNegative
	case errkind.Usage:
		return ExitUsage
	case errkind.Conflict:
		return ExitConflict
	}
	return ExitEnvironment
}
