// Package cli holds what every kubectl-bundle binary shares: exit codes, the
// standard flags, output selection and the mapping from library errors to exit codes.
package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
)

// Exit codes shared by every binary (DESIGN.md).
const (
	ExitOK          = 0 // success
	ExitNegative    = 1 // negative verdict: verification failed, gate not satisfied
	ExitUsage       = 2 // bad invocation
	ExitEnvironment = 3 // docker/zarf/cluster unreachable, I/O
	ExitConflict    = 4 // locked, illegal transition
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

// ExitError carries an exit code chosen by the library or command layer.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Usage returns an error that exits with ExitUsage.
func Usage(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// Environment wraps err so that it exits with ExitEnvironment.
func Environment(err error) error {
	if err == nil {
		return nil
	}
	return &ExitError{Code: ExitEnvironment, Err: err}
}

// Conflict wraps err so that it exits with ExitConflict.
func Conflict(err error) error {
	if err == nil {
		return nil
	}
	return &ExitError{Code: ExitConflict, Err: err}
}

// Negative wraps err so that it exits with ExitNegative.
func Negative(err error) error {
	if err == nil {
		return nil
	}
	return &ExitError{Code: ExitNegative, Err: err}
}

// Coder is implemented by library errors that know their exit code.
type Coder interface {
	ExitCode() int
}

// ExitCode maps an error to the documented exit code. Errors that say
// nothing about themselves are environment errors: the command could not do
// its job, which is not a verdict on the input.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	if k := errkind.Of(err); k != errkind.Unknown {
		return kindCode[k]
	}
	var c Coder
	if errors.As(err, &c) {
		return c.ExitCode()
	}
	return ExitEnvironment
}

// kindCode is the one table from a kind of failure to its exit code.
var kindCode = map[errkind.Kind]int{
	errkind.Negative:    ExitNegative,
	errkind.Usage:       ExitUsage,
	errkind.Environment: ExitEnvironment,
	errkind.Conflict:    ExitConflict,
}
