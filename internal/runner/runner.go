// Package runner runs external programs (docker, zarf) for the suite through
// one injectable interface, keeping the argv and output of a failed command
// in its error so an operator can paste and rerun it.
package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
)

// Runner runs one external command and returns its standard output.
type Runner interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// Exec runs commands as child processes. Stderr, when set, receives the
// child's standard error as it is written (progress of long commands); it is
// also kept for the error either way.
type Exec struct {
	Env    []string // extra environment, appended to the process's own
	Dir    string
	Stderr io.Writer
}

// Run implements Runner.
func (e Exec) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = e.Dir
	if len(e.Env) > 0 {
		cmd.Env = append(cmd.Environ(), e.Env...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if e.Stderr != nil {
		cmd.Stderr = io.MultiWriter(&stderr, e.Stderr)
	}
	err := cmd.Run()
	if err != nil {
		return stdout.Bytes(), &RunError{Argv: append([]string{name}, args...), Stderr: stderr.Bytes(), Err: err}
	}
	return stdout.Bytes(), nil
}

// RunAttached runs a command on the given streams, so that the operator
// sees its output as it happens, and returns its exit status. err is set
// only when it could not run at all (or was killed by a signal).
func (e Exec) RunAttached(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, name string, args ...string) (int, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = e.Dir
	if len(e.Env) > 0 {
		cmd.Env = append(cmd.Environ(), e.Env...)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return -1, &RunError{Argv: append([]string{name}, args...), Err: err}
	}
	return 0, nil
}

// WithEnv returns r with env added to the environment of the commands it
// runs, when r supports that (Exec does, and fakes may, with a WithEnv
// method); otherwise r itself.
func WithEnv(r Runner, env ...string) Runner {
	switch e := r.(type) {
	case Exec:
		e.Env = append(append([]string{}, e.Env...), env...)
		return e
	case interface{ WithEnv(...string) Runner }:
		return e.WithEnv(env...)
	}
	return r
}

// RunError is a command that could not be started or exited non-zero.
type RunError struct {
	Argv   []string
	Stderr []byte
	Err    error
}

func (e *RunError) Error() string {
	msg := fmt.Sprintf("running %s: %v", quote(e.Argv), e.Err)
	if out := strings.TrimSpace(lastLines(string(e.Stderr), 5)); out != "" {
		msg += ": " + out
	}
	return msg
}

func (e *RunError) Unwrap() error { return e.Err }

// ErrorKind makes a failed external command an environment failure,
// whatever the command's own exit status; without it the wrapped
// *exec.ExitError's status would leak through as ours.
func (e *RunError) ErrorKind() errkind.Kind { return errkind.Environment }

// NotFound reports whether err is a command that does not exist on PATH.
func NotFound(err error) bool {
	return errors.Is(err, exec.ErrNotFound)
}

func quote(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$*?[]{}|&;<>()`") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "; ")
}

type contextKey struct{}

// NewContext returns ctx carrying r: a command that runs docker or zarf
// takes its runner from the context (From), so that a test can run the
// plugins in-process on the fakes without a global.
func NewContext(ctx context.Context, r Runner) context.Context {
	return context.WithValue(ctx, contextKey{}, r)
}

// From is the runner ctx carries (NewContext), else Exec{}.
func From(ctx context.Context) Runner {
	if r, ok := ctx.Value(contextKey{}).(Runner); ok && r != nil {
		return r
	}
	return Exec{}
}

// Attacher is a runner that can run a command on the caller's streams
// (journal run's step command): Exec does it with a child process, an
// in-process test's runner with the plugin's package.
type Attacher interface {
	RunAttached(ctx context.Context, env []string, stdin io.Reader, stdout, stderr io.Writer, name string, args ...string) (int, error)
}

// Attach runs name on the streams with env added to its environment,
// through ctx's runner when it is an Attacher, else as a child process
// (Exec.RunAttached).
func Attach(ctx context.Context, env []string, stdin io.Reader, stdout, stderr io.Writer, name string, args ...string) (int, error) {
	if a, ok := From(ctx).(Attacher); ok {
		return a.RunAttached(ctx, env, stdin, stdout, stderr, name, args...)
	}
	return Exec{Env: env}.RunAttached(ctx, stdin, stdout, stderr, name, args...)
}

// LookPath is exec.LookPath: the file name runs as when it has no slash.
func LookPath(name string) (string, error) { return exec.LookPath(name) }
