package fakes

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/kubectl-bundle/kubectl-bundle/internal/runner"
)

// Docker is the fake docker as a program, for testscript.Main.
func Docker() { exit(docker(os.Getenv, os.Args[1:], os.Stdout, os.Stderr)) }

// Zarf is the fake zarf as a program, for testscript.Main.
func Zarf() { exit(zarf(os.Getenv, os.Args[1:], os.Stdout, os.Stderr)) }

// exit ends a fake program; inside a FAKE_KILL step it kills its process
// group instead (the plugin that ran it, and the script that ran that).
func exit(code int) {
	if code == killedExit {
		killGroup()
	}
	os.Exit(code)
}

// Runner runs the fake docker and zarf in-process, as a runner.Runner for
// library tests: a failure is a *runner.RunError like a real command's.
type Runner struct {
	// Env overrides the process's environment for the fakes (KEY=VALUE).
	Env []string
	// OnKill, when set, is called when a FAKE_KILL step is reached, in
	// place of returning the error of a killed child: a caller that
	// simulates the death of the whole process (every plugin in-process)
	// panics there and recovers at its top.
	OnKill func(step string)
}

func (r Runner) getenv(k string) string {
	for i := len(r.Env) - 1; i >= 0; i-- {
		if ek, v, ok := strings.Cut(r.Env[i], "="); ok && ek == k {
			return v
		}
	}
	return os.Getenv(k)
}

// Run implements runner.Runner.
func (r Runner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	code := 0
	switch name {
	case "docker":
		code = docker(r.getenv, args, &stdout, &stderr)
	case "zarf":
		code = zarf(r.getenv, args, &stdout, &stderr)
	default:
		code = reject(r.getenv, &stderr, name, args, &unsupported{"program " + name})
	}
	if code == killedExit && r.OnKill != nil {
		r.OnKill(name + " " + strings.Join(args, " "))
	}
	if code == killedExit {
		// In-process there is no child to kill without killing the test:
		// the caller sees what exec reports for a child killed by SIGKILL.
		return stdout.Bytes(), &runner.RunError{Argv: append([]string{name}, args...), Stderr: stderr.Bytes(), Err: killedError(name)}
	}
	if code != 0 {
		return stdout.Bytes(), &runner.RunError{Argv: append([]string{name}, args...), Stderr: stderr.Bytes(), Err: fmt.Errorf("exit status %d", code)}
	}
	return stdout.Bytes(), nil
}

// WithEnv returns r with env added (runner.WithEnv uses it).
func (r Runner) WithEnv(env ...string) runner.Runner {
	return Runner{Env: append(append([]string{}, r.Env...), env...), OnKill: r.OnKill}
}

// Implemented lists what the fakes imitate, one line per subcommand with
// its flags (=: takes a value) and, for docker, its --format templates.
func Implemented() []string {
	var out []string
	flagList := func(flags map[string]bool) string {
		fs := make([]string, 0, len(flags))
		for f, v := range flags {
			if v {
				f += "="
			}
			fs = append(fs, f)
		}
		sort.Strings(fs)
		return strings.Join(fs, " ")
	}
	for name, c := range dockerCommands {
		out = append(out, fmt.Sprintf("docker %s [%s] formats %q", name, flagList(c.flags), c.formats))
	}
	for name, flags := range zarfCommands {
		out = append(out, fmt.Sprintf("zarf %s [%s]", name, flagList(flags)))
	}
	sort.Strings(out)
	return out
}
