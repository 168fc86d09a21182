package journal

import (
	"fmt"
	"os"
	"path/filepath"
)

// ScriptsDir is the directory beside the plugin binaries that make install
// and the kubectl-bundle-scripts release archive put the strategy scripts in.
const ScriptsDir = "kubectl-bundle-scripts"

// ScriptPath is the strategy's script as a command that runs as printed:
// the installed copy in ScriptsDir beside this binary (or beside the file
// its symlink names) when there is one, else its path in a source checkout.
func ScriptPath(s Strategy) string {
	name := string(s) + ".sh"
	if exe, err := os.Executable(); err == nil {
		dirs := []string{filepath.Dir(exe)}
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			dirs = append(dirs, filepath.Dir(real))
		}
		for _, d := range dirs {
			p := filepath.Join(d, ScriptsDir, name)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
				return p
			}
		}
	}
	return "scripts/" + name
}

// NextStep is what an operator should do next, as a command to paste.
type NextStep struct {
	Phases  []Phase `json:"phases"`
	Command string  `json:"command"`
	Why     string  `json:"why"`
}

// Next says what comes next for t: the legal phases and the exact command.
// The strategy's orchestrator resumes from the journal, so re-running it is
// always right; the command names it.
func Next(t *Transaction) NextStep {
	n := NextStep{Phases: Legal(t)}
	script := fmt.Sprintf("%s %s", ScriptPath(t.Strategy), pkgArg(t))
	switch {
	case IsFinal(t.Phase) && t.Status == StatusDone:
		n.Command = "kubectl bundle-journal end"
		n.Why = fmt.Sprintf("the transaction reached %s", t.Phase)
		if t.Phase == Aborted {
			n.Why = "the transaction was aborted; run the cleanup it printed, then end it"
		}
	case t.Status == StatusFailed:
		n.Command = script
		n.Why = fmt.Sprintf("%s failed (%s): re-running the orchestrator retries it from a clean state or rolls back", t.Phase, t.Step(t.Phase).Error)
	case t.Status == StatusStarted:
		n.Command = script
		n.Why = fmt.Sprintf("%s started but did not finish (the process was interrupted): re-running the orchestrator redoes it from a clean state", t.Phase)
	default:
		n.Command = script
		n.Why = fmt.Sprintf("%s is done: the orchestrator goes on with %s", t.Phase, phaseList(n.Phases))
	}
	return n
}

func pkgArg(t *Transaction) string {
	if t.Package != "" {
		return t.Package
	}
	return t.Target
}

// Cleanup lists what an operator must still run after aborting t.
func Cleanup(t *Transaction) []string {
	var out []string
	if t.Strategy == BlueGreen && t.Slots.Candidate != "" && t.Step(Provisioning) != nil {
		out = append(out, fmt.Sprintf("kubectl bundle-slot destroy %s   # the candidate slot may hold a half-built environment", t.Slots.Candidate))
	}
	out = append(out, "kubectl bundle-journal end")
	return out
}
