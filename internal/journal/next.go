package journal

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"github.com/kubectl-bundle/kubectl-bundle/internal/checkout"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// ScriptsDir is the directory beside the plugin binaries that make install
// and the kubectl-bundle-scripts release archive put the strategy scripts in.
const ScriptsDir = "kubectl-bundle-scripts"

// EnvScriptsDir names the directory of the strategy scripts when they are
// neither installed beside the plugins nor in the checkout the plugins
// were built in (krew's store; the scripts archive unpacked elsewhere).
// lib.sh sets it for the plugins a script runs, so that what they print
// names the script that runs.
const EnvScriptsDir = "KUBECTL_BUNDLE_SCRIPTS_DIR"

// ScriptPath is the strategy's script as a command that runs as printed,
// from any directory: always an absolute path. It is the first that holds
// the script of: $KUBECTL_BUNDLE_SCRIPTS_DIR; ScriptsDir beside this binary
// (or beside the file its symlink names); the scripts/ of the source
// checkout around the binary (make build's bin/) or that it was built
// from (a build without -trimpath: go run, go test); scripts/ under the
// working directory. With none, it is where make install and the scripts
// archive put it beside this binary.
func ScriptPath(s Strategy) string {
	name := string(s) + ".sh"
	var dirs []string
	if d := os.Getenv(EnvScriptsDir); filepath.IsAbs(d) {
		dirs = append(dirs, d)
	}
	var exeDirs []string
	if exe, err := os.Executable(); err == nil {
		exeDirs = append(exeDirs, filepath.Dir(exe))
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exeDirs = append(exeDirs, filepath.Dir(real))
		}
	}
	for _, d := range exeDirs {
		dirs = append(dirs, filepath.Join(d, ScriptsDir))
	}
	for _, d := range exeDirs {
		dirs = append(dirs, filepath.Join(filepath.Dir(d), "scripts"))
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		// internal/journal/next.go in the checkout this binary was built from.
		dirs = append(dirs, filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(file))), "scripts"))
	}
	if wd, err := os.Getwd(); err == nil {
		dirs = append(dirs, filepath.Join(wd, "scripts"))
		if root := checkout.Around(wd); root != "" {
			// The source checkout the working directory is in (a test runs
			// in its package's directory; -trimpath leaves no source path).
			dirs = append(dirs, filepath.Join(root, "scripts"))
		}
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return filepath.Clean(p)
		}
	}
	if len(exeDirs) > 0 {
		return filepath.Join(exeDirs[0], ScriptsDir, name)
	}
	return filepath.Join(string(filepath.Separator), "usr", "local", "bin", ScriptsDir, name)
}

// NextStep is what an operator should do next, as a command to paste.
type NextStep struct {
	Phases []Phase `json:"phases"`
	// Run is the command as a value (its argv); Command is its line, or
	// a repair's line where the repair is not a value yet.
	Run     advice.Cmd `json:"cmd,omitzero"`
	Command string     `json:"command"`
	// Also are other commands that also make progress (during a soak:
	// revert beside accept); Alternatives are their lines.
	Also         []advice.Cmd `json:"also,omitempty"`
	Alternatives []string     `json:"alternatives,omitempty"`
	Why          string       `json:"why"`
	// Restore: the orchestrator's re-run restores the previous package
	// instead of redoing the interrupted step (RestoresNext).
	Restore bool `json:"restore,omitempty"`
	// Wait names the live run to wait for (e.g. "pid 123") when one owns
	// the transaction: its next step is that run's to make, so there is
	// no command to run (Command is empty) and Why says how to stop it.
	Wait string `json:"wait,omitempty"`
	// MissingGate is the gate file the transaction was begun with (its
	// --gate) when it cannot be read: the command refuses (exit 2,
	// nothing changed) until the file is restored there, or another gate
	// is passed in its place; Why says so.
	MissingGate string `json:"missingGate,omitempty"`
}

// Do is n running c, with also as the other commands that make progress:
// the values, and their lines rendered by advice.
func (n *NextStep) Do(c advice.Cmd, also ...advice.Cmd) {
	n.Run, n.Command, n.Also, n.Alternatives = c, c.String(), also, nil
	for _, a := range also {
		n.Alternatives = append(n.Alternatives, a.String())
	}
}

// Fix makes a repair the next step: its one command as Run when it is
// one, its line (with why) as Command.
func (n *NextStep) Fix(f advice.Fix) {
	n.Run, n.Command, n.Also, n.Alternatives = advice.Cmd{}, f.String(), nil, nil
	if len(f.Run) == 1 {
		n.Run = f.Run[0]
	}
}

// MaxInterruptedDeploys is how many times in-place's DEPLOYING may be
// interrupted (its process killed inside the step) before the re-run
// restores the previous package instead of deploying the target again
// (U4; docs/strategies.md gives the reason).
const MaxInterruptedDeploys = 2

// RestoresNext reports whether the orchestrator's re-run of t restores
// the previous package rather than redoing the interrupted step: in-place's
// DEPLOYING found interrupted after MaxInterruptedDeploys attempts. A first
// interruption is redone (the target deployed again), like every step.
func RestoresNext(t *Transaction) bool {
	s := t.Step(Deploying)
	return t.Strategy == InPlace && t.Phase == Deploying && t.Status == StatusStarted &&
		s != nil && s.Attempts >= MaxInterruptedDeploys
}

// Verification is the material a strategy script verifies a package with,
// as the staged package's record keeps it: a key, or a keyless signer's
// identity and issuer with the trusted root.
type Verification struct {
	Key         string `json:"key,omitempty"`
	TrustedRoot string `json:"trustedRoot,omitempty"`
	Identity    string `json:"identity,omitempty"`
	Issuer      string `json:"issuer,omitempty"`
}

// Args are v as the scripts' flags (one argument each), nil when v says
// nothing usable.
func (v *Verification) Args() []string {
	switch {
	case v == nil:
		return nil
	case v.Key != "":
		return []string{"--key", v.Key}
	case v.Identity != "" && v.Issuer != "":
		a := []string{"--certificate-identity", v.Identity, "--certificate-oidc-issuer", v.Issuer}
		if v.TrustedRoot != "" {
			a = append(a, "--trusted-root", v.TrustedRoot)
		}
		return a
	}
	return nil
}

// MaterialHint says what to add to a script's command when the package's
// verification material is not known.
const MaterialHint = "add the verification material the package is signed with: --key ABS_PATH, or --certificate-identity ID --certificate-oidc-issuer URL [--trusted-root ABS_PATH] (or set ZARF_VERIFY_KEY, or the state dir's config.yaml verify: policy)"

// Next says what comes next for t when its verification material is not
// known; NextWith is the same with it.
func Next(t *Transaction) NextStep { return NextWith(t, nil) }

// Soak is what the switch record says of a blue-green soak.
type Soak struct {
	// Ends is when the soak window ends (zero when unknown).
	Ends time.Time
	// Over says the window has passed.
	Over bool
	// RevertTarget says the previous slot still exists, so revert can work.
	RevertTarget bool
}

// NextWith says what comes next for t: the legal phases and the exact
// command. The strategy's orchestrator resumes from the journal, so
// re-running it is always right; the command names it, with its
// subcommand, the package's absolute path and v's verification material.
func NextWith(t *Transaction, v *Verification) NextStep { return NextWithSoak(t, v, nil) }

// NextWithSoak is NextWith knowing the soak (nil: unknown): once its window
// has passed the next command is accept, and revert is offered only while
// the previous slot exists.
func NextWithSoak(t *Transaction, v *Verification, soak *Soak) NextStep {
	return NextWithGate(t, v, soak, nil)
}

// FailingGate is the failing gate result recorded for the slot a recovery
// step (in-place's RESTORING, recreate's BUILDING_FALLBACK) restored, for
// the package it holds now.
type FailingGate struct {
	Slot   string
	Time   time.Time
	Failed []string
}

// GateCommand is the gate of t's runs against slot, recording its result,
// as a line to paste: the gate file and timeout t was begun with (the
// scripts print the same line).
func GateCommand(slot string, g *Gate) string { return GateCmd(slot, g).String() }

// GateCmd is GateCommand as a value.
func GateCmd(slot string, g *Gate) advice.Cmd {
	a := []string{"--slot", slot, "--record"}
	if g != nil && g.File != "" {
		a = append(a, "-f", g.File)
	}
	if g != nil && g.Timeout != "" {
		a = append(a, "--timeout", g.Timeout)
	}
	return advice.Plugin("gate", a...)
}

// NextWithGate is NextWithSoak knowing the restored slot's failing gate
// (nil: none recorded, or it passed). After a recovery step that is done,
// a slot that fails its gate is what stops the transaction: re-running
// the orchestrator only gates it again, so the next command is the gate
// that shows what fails (recording the result); once it passes, the
// orchestrator closes the transaction.
func NextWithGate(t *Transaction, v *Verification, soak *Soak, failing *FailingGate) NextStep {
	return NextWithGateFile(t, v, soak, failing, nil)
}

// NextWithGateFile is NextWithGate knowing that the gate file t was begun
// with cannot be read or is not a valid gate (gateErr, nil when it is
// one, or there is none): a
// command that gates with it refuses until it is back, so the gate with
// that file is never the next command, and the re-run, which keeps the
// run's verification material and gate timeout, says where the file must
// be restored (or that another gate may be passed with --gate).
func NextWithGateFile(t *Transaction, v *Verification, soak *Soak, failing *FailingGate, gateErr error) NextStep {
	n := nextWithGate(t, v, soak, failing, gateErr)
	named := n.Run.Has("--gate")
	// A revert gates with the run's file without naming it.
	revert := t.Strategy == BlueGreen && len(n.Run.Argv) > 1 && n.Run.Argv[1] == "revert"
	if gateErr == nil || t.Gate == nil || t.Gate.File == "" || n.Run.IsZero() || !named && !revert {
		return n
	}
	file := advice.Word(t.Gate.File)
	other := "the same command with --gate ABS_PATH in place of --gate " + file
	if !named {
		other = "the same command with --gate ABS_PATH added"
	}
	n.MissingGate = t.Gate.File
	n.Why += fmt.Sprintf("; but the gate file %s this run used is gone, unreadable or invalid (%v), so the command refuses (exit 2, nothing changed) until it is back: restore it at %s and run the command as printed, or pass another gate: %s",
		file, gateErr, file, other)
	return n
}

func nextWithGate(t *Transaction, v *Verification, soak *Soak, failing *FailingGate, gateErr error) NextStep {
	n := NextStep{Phases: Legal(t)}
	script := ScriptPath(t.Strategy)
	material := v.Args()
	apply := ApplyCmd(t, v)
	hint := ""
	if material == nil {
		hint = "; " + MaterialHint
	}
	switch {
	case IsFinal(t.Phase) && t.Status == StatusDone:
		n.Do(advice.Plugin("journal", "end"))
		n.Why = fmt.Sprintf("the transaction reached %s", t.Phase)
		if t.Phase == Aborted {
			n.Why = "the transaction was aborted; run the cleanup it printed, then end it"
		}
		return n
	case t.Strategy == BlueGreen && ((t.Phase == Switched && t.Status == StatusDone) || (t.Phase == Soaking && t.Status != StatusFailed)):
		// The switch leaves SOAKING started for the whole soak (accept
		// finishes it): that is a normal soak, not an interrupted step.
		// accept and revert take the same material as apply (parse_args),
		// so the line runs as printed whatever the script checks.
		accept := advice.Program(script, "accept").With(material...)
		revert := advice.Program(script, "revert").With(material...)
		n.Do(accept)
		canRevert := soak == nil || soak.RevertTarget
		switch {
		case soak != nil && soak.Over:
			n.Why = fmt.Sprintf("the soak is over (its window ended %s): accept retires the previous slot", soak.Ends.Format(time.RFC3339))
			if canRevert {
				n.Do(accept, revert)
				n.Why += fmt.Sprintf("; revert is still possible while slot %s exists", t.Slots.Active)
			}
		case canRevert:
			n.Do(accept, revert)
			n.Why = "soaking: accept or revert (accept retires the previous slot; revert switches back to it and destroys the candidate)"
		default:
			n.Why = fmt.Sprintf("soaking, but the previous slot %s is gone, so there is nothing to revert to: accept", t.Slots.Active)
		}
		if soak != nil && !soak.Over && !soak.Ends.IsZero() {
			n.Why += fmt.Sprintf("; the soak window ends %s", soak.Ends.Format(time.RFC3339))
		}
		return n
	case t.Strategy == BlueGreen && (t.Phase == Accepted || t.Phase == Retired):
		n.Do(advice.Program(script, "accept"))
		n.Why = fmt.Sprintf("%s is %s: accept finishes retiring the previous slot", t.Phase, t.Status)
		return n
	case t.Strategy == BlueGreen && t.Step(SwitchedBack) != nil:
		n.Do(advice.Program(script, "revert"))
		n.Why = fmt.Sprintf("a revert was under way (%s %s): revert finishes it", t.Phase, t.Status)
		return n
	case failing != nil && t.Status == StatusDone && (t.Phase == Restoring || t.Phase == BuildingFallback) && gateErr != nil:
		// The gate that would show what fails cannot run without its
		// file: the re-run, once a gate file is back, gates the slot
		// again and closes the transaction when it passes.
		n.Do(apply)
		failed := failedNames(failing.Failed)
		n.Why = fmt.Sprintf("%s is done, but slot %s, holding the previous package, failed its gate at %s (failing: %s): the previous deployment is NOT confirmed in place. "+
			"Once a gate file is back, re-running the orchestrator gates the slot again and closes the transaction as RESTORED when it passes (fix what the gate reports first: the workload, or the gate file if it is wrong)",
			t.Phase, failing.Slot, failing.Time.UTC().Format(time.RFC3339), failed)
	case failing != nil && t.Status == StatusDone && (t.Phase == Restoring || t.Phase == BuildingFallback):
		n.Do(GateCmd(failing.Slot, t.Gate), apply)
		failed := failedNames(failing.Failed)
		n.Why = fmt.Sprintf("%s is done, but slot %s, holding the previous package, failed its gate at %s (failing: %s): the previous deployment is NOT confirmed in place. "+
			"The gate shows what fails and records the result; fix what it reports (the workload, or the gate file if it is wrong). Once it passes, the orchestrator gates the slot again and closes the transaction as RESTORED; re-running it before then changes nothing",
			t.Phase, failing.Slot, failing.Time.UTC().Format(time.RFC3339), failed)
	case t.Strategy == BlueGreen && t.Phase == Switched && t.Status == StatusFailed:
		// A switch that failed (a pivot the target refused, undone) fails
		// the same way on every re-run until what refused changes: the
		// way back is named too.
		n.Do(apply, advice.Program(script, "revert").With(material...))
		n.Why = fmt.Sprintf("the switch to the candidate failed (%s): re-running the orchestrator retries it, once what failed is fixed; to stay on the previous slot instead, revert switches back to it and destroys the candidate", t.Step(t.Phase).Error)
	case t.Status == StatusFailed && t.Strategy != BlueGreen && t.Fallback == "":
		// The run's recovery restores the fallback: with none recorded, a
		// re-run fails the same way for ever.
		n.Do(advice.Plugin("journal", "abort"))
		n.Why = fmt.Sprintf("%s failed (%s), and no previous package is recorded for slot %s: there is nothing to restore, and re-running the orchestrator fails the same way; abort closes the transaction (slot %s stays as the failed step left it: %s shows it)",
			t.Phase, t.Step(t.Phase).Error, t.Slots.Active, t.Slots.Active, advice.Plugin("slot", "describe", t.Slots.Active))
	case t.Status == StatusFailed:
		n.Do(apply)
		n.Why = fmt.Sprintf("%s failed (%s): re-running the orchestrator retries it from a clean state or rolls back", t.Phase, t.Step(t.Phase).Error)
	case RestoresNext(t):
		n.Do(apply)
		n.Restore = true
		n.Why = fmt.Sprintf("%s was interrupted %d times (the deploy itself may be what stops the process): re-running the orchestrator restores the previous package into slot %s, best effort",
			t.Phase, t.Step(Deploying).Attempts, t.Slots.Active)
	case t.Status == StatusStarted && t.Strategy == InPlace && t.Phase == Deploying:
		n.Do(apply)
		n.Why = fmt.Sprintf("%s started but did not finish (the process was interrupted): re-running the orchestrator deploys the target again (a failed deploy or gate then restores the previous package; a deploy interrupted %d times is not retried)",
			t.Phase, MaxInterruptedDeploys)
	case t.Status == StatusStarted:
		n.Do(apply)
		n.Why = fmt.Sprintf("%s started but did not finish (the process was interrupted): re-running the orchestrator redoes it from a clean state", t.Phase)
	default:
		n.Do(apply)
		n.Why = fmt.Sprintf("%s is done: the orchestrator goes on with %s", t.Phase, phaseList(n.Phases))
	}
	n.Why += hint
	return n
}

// ApplyCmd is the line that runs t's strategy script again: its package,
// the verification material v (nil: none) and t's gate.
func ApplyCmd(t *Transaction, v *Verification) advice.Cmd {
	apply := advice.Program(ScriptPath(t.Strategy))
	if t.Strategy == BlueGreen {
		apply = apply.With("apply")
	}
	return apply.With(pkgArg(t)).With(v.Args()...).With(t.Gate.Args()...)
}

func pkgArg(t *Transaction) string {
	if t.Package != "" {
		return t.Package
	}
	return t.Target
}

// Cleanup lists what an operator must still run after aborting t, each
// a plugin of the state dir d.
func Cleanup(d *state.Dir, t *Transaction) []advice.Fix {
	var out []advice.Fix
	if t.Strategy == BlueGreen && t.Slots.Candidate != "" && t.Step(Provisioning) != nil {
		out = append(out, advice.Do(d.Plugin("slot", "destroy", t.Slots.Candidate)).Because("the candidate slot may hold a half-built environment"))
	}
	return append(out, advice.Do(d.Plugin("journal", "end")))
}

// failedNames lists a failed gate's failing checks for a sentence.
func failedNames(failed []string) string {
	if len(failed) == 0 {
		return "none named"
	}
	return strings.Join(failed, ", ")
}
