package journalcmd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/runner"
)

// runNext is `journal next --run`: the planner's next step, printed as the
// operator would paste it, then run as its argv (never through a shell),
// with this command's terminal; its exit code is the step's. A live run
// that owns the transaction is waited for (exit 4); a site at rest has
// nothing to run (exit 0); a step the planner names only as text (not
// yet a value) is printed for the operator to run (exit 3).
func runNext(ctx context.Context, streams kcli.IOStreams, n journal.NextStep) error {
	switch {
	case n.Wait != "":
		return kcli.Conflict(fmt.Errorf("nothing to run here: %s", n.Why))
	case n.Run.IsZero() && n.Command == "":
		why := n.Why
		if why == "" {
			why = "no transaction is open and nothing is left to finish"
		}
		_, err := fmt.Fprintf(streams.Out, "nothing to run: %s\n", why)
		return err
	case n.Run.IsZero():
		return errkind.New(errkind.Environment, "the next step is not one this command runs for you: %s (%s); run it yourself", n.Command, n.Why)
	}
	if _, err := fmt.Fprintf(streams.Out, "==> next: %s\n", n.Run); err != nil {
		return err
	}
	name, args := program(n.Run.Argv)
	code, err := runner.Attach(ctx, n.Run.Env, streams.In, streams.Out, streams.ErrOut, name, args...)
	if err != nil {
		return errkind.New(errkind.Environment, "running %s: %v", n.Run, err)
	}
	if code != 0 {
		return &kcli.ExitError{Code: code}
	}
	return nil
}

// program is the program and arguments argv runs: `kubectl bundle-NAME`
// runs the plugin's binary itself, as kubectl would find it (either
// spelling on PATH: make install's kubectl-bundle-NAME, krew's
// kubectl-bundle_NAME), else the one beside this binary; so --run needs no
// kubectl. Anything else runs as it is.
func program(argv []string) (string, []string) {
	if len(argv) < 2 || argv[0] != "kubectl" || !strings.HasPrefix(argv[1], "bundle-") {
		return argv[0], argv[1:]
	}
	name := strings.TrimPrefix(argv[1], "bundle-")
	for _, b := range []string{"kubectl-bundle-" + name, "kubectl-bundle_" + name} {
		if p, err := runner.LookPath(b); err == nil {
			return p, argv[2:]
		}
	}
	if exe, err := os.Executable(); err == nil {
		for _, b := range []string{"kubectl-bundle-" + name, "kubectl-bundle_" + name} {
			p := filepath.Join(filepath.Dir(exe), b)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
				return p, argv[2:]
			}
		}
	}
	return "kubectl-bundle-" + name, argv[2:]
}

// scriptsDir is `journal scripts`: the directory of the strategy scripts,
// where the commands this plugin prints find them (journal.ScriptPath):
// $KUBECTL_BUNDLE_SCRIPTS_DIR, else beside the plugin (krew's store too),
// else the checkout it was built from. Exit 3 when none holds them.
func scriptsDir(streams kcli.IOStreams) error {
	p := journal.ScriptPath(journal.BlueGreen)
	if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
		return errkind.New(errkind.Environment, "the strategy scripts are not installed where this plugin looks (%s): install them beside the plugins (docs/install.md), or set %s to their directory", filepath.Dir(p), journal.EnvScriptsDir)
	}
	_, err := fmt.Fprintln(streams.Out, filepath.Dir(p))
	return err
}
