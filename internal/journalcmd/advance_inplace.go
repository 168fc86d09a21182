package journalcmd

import (
	"fmt"
	"os"

	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/plan"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
	"github.com/kubectl-bundle/kubectl-bundle/internal/stage"
	"github.com/kubectl-bundle/kubectl-bundle/internal/verify"
)

// linear is a strategy that changes the active slot itself, step after
// step (in-place, recreate): on a failure it recovers the same slot with
// the previous package and gates it again.
type linear struct {
	// verb is what the strategy does to the active slot ("updates").
	verb string
	// untouched is what a failure before any change says.
	untouched string
	// nothingTo ends "no previous package is recorded for slot A: ".
	nothingTo string
	recovery  journal.Phase
	// outside: the package's deploy actions (outside Zarf's record) are
	// listed once it is verified, and again as left by the recovery.
	outside bool
	// says is what the run says before the recovery step first runs.
	says func(t *journal.Transaction) string
	// recover is the recovery step's command.
	recover func(x *run, t *journal.Transaction) advice.Cmd
	// recovered is what the recovery did to slot.
	recovered func(slot string) string
	// steps are the steps between the verification and the gate.
	steps []linearStep
}

type linearStep struct {
	phase journal.Phase
	// losses: what the step discards is listed and confirmed first.
	losses bool
	cmd    func(x *run, t *journal.Transaction) advice.Cmd
	failed func(slot string) string
	passed func(slot string) string
}

var inPlaceRun = linear{
	verb: "updates", untouched: "nothing was deployed", nothingTo: "nothing to restore", recovery: journal.Restoring, outside: true,
	says: func(t *journal.Transaction) string {
		return fmt.Sprintf("BEST EFFORT: redeploying the previous package %s into slot %s (in-place cannot guarantee it comes back as it was)", short(t.Fallback), t.Slots.Active)
	},
	recover: func(x *run, t *journal.Transaction) advice.Cmd {
		return x.cmds().Deploy(t.Slots.Active, t.Fallback)
	},
	recovered: func(slot string) string { return "previous package redeployed into slot " + slot + " (best effort)" },
	steps: []linearStep{{
		phase: journal.Deploying,
		cmd: func(x *run, t *journal.Transaction) advice.Cmd {
			return x.cmds().Deploy(t.Slots.Active, t.Target)
		},
		failed: func(slot string) string { return "deploying into slot " + slot },
		passed: func(slot string) string { return "package deployed into slot " + slot },
	}},
}

var recreateRun = linear{
	verb: "rebuilds", untouched: "nothing was torn down", nothingTo: "nothing to rebuild with", recovery: journal.BuildingFallback,
	says: func(t *journal.Transaction) string {
		return fmt.Sprintf("rebuilding slot %s with the previous package %s", t.Slots.Active, short(t.Fallback))
	},
	recover: func(x *run, t *journal.Transaction) advice.Cmd {
		return x.build(t.Slots.Active, t.Fallback)
	},
	recovered: func(slot string) string { return "slot " + slot + " rebuilt with the previous package" },
	steps: []linearStep{{
		phase: journal.Teardown, losses: true,
		// Confirmed first (or the step is done): destroy does not ask again.
		cmd: func(x *run, t *journal.Transaction) advice.Cmd {
			return plan.Destroy(t.Slots.Active, true)
		},
		failed: func(slot string) string { return "tearing down slot " + slot },
		passed: func(slot string) string { return "slot " + slot + " torn down" },
	}, {
		phase: journal.Building,
		// One journal step, its commands run by kubectl bundle-journal rebuild.
		cmd: func(x *run, t *journal.Transaction) advice.Cmd {
			return x.build(t.Slots.Active, t.Target)
		},
		failed: func(slot string) string { return "building slot " + slot },
		passed: func(slot string) string { return "slot " + slot + " built with the package" },
	}},
}

// linearRun is the run of l, one step a call.
func (x *run) linearRun(l linear) error {
	t := x.txn()
	if t == nil && x.sc.PC != "" {
		return x.notOpenAnyMore()
	}
	if x.sc.PC != "" {
		if n := site.Read(x.d).MovedOff(); n != nil {
			return x.movedOff(n)
		}
	}
	switch pc := x.sc.PC; pc {
	case "":
		if err := x.requireUpdate(); err != nil {
			return err
		}
		if err := x.checkGateFile(x.r.pkg); err != nil {
			return err
		}
		if err := x.beginOnActive(l.verb); err != nil {
			return err
		}
		return x.goTo("resume")
	case "resume":
		switch {
		case t.Phase == l.recovery || t.Phase == journal.Restored:
			if x.donePhase(l.recovery) {
				x.recovering(fmt.Sprintf("resuming after %s (done): the restored slot %s is gated again", l.recovery, t.Slots.Active))
			} else {
				x.recovering("resuming an interrupted " + string(l.recovery))
			}
			return x.goTo("recover")
		case t.Phase == journal.Committed:
			return x.commit(false)
		case t.Status == journal.StatusFailed:
			x.recovering(string(t.Phase) + " failed before: " + t.LastError)
			return x.goTo("recover")
		}
		// U4 (in place): a deploy killed once is deployed again; killed
		// twice, the journal says restore (docs/strategies.md).
		if n := journal.Next(t); n.Restore {
			x.recovering(n.Why)
			return x.goTo("recover")
		}
		if err := x.offlineCheck(os.Getenv); err != nil {
			return err
		}
		return x.goTo("verify")
	case "verify":
		if !x.runCmd(journal.Verified, x.cmds().VerifyStage(), "-q") {
			return x.failed("verification of "+x.r.pkg, "recover")
		}
		x.pass("package verified and staged (" + t.Target + ")")
		if l.outside {
			if acts := x.outsideRecord(t.Target); len(acts) > 0 {
				x.say("NOTE: the package's deploy actions run commands whose changes Zarf does not record; a restore of the previous package redeploys over them and cannot remove them:")
				for _, a := range acts {
					x.say("  %s", a)
				}
			}
		}
		return x.goTo("0")
	case "gate":
		if !x.runCmd(journal.Healthy, x.cmds().GateOf(t.Slots.Active)) {
			return x.failed("gate of slot "+t.Slots.Active, "recover")
		}
		x.pass("slot " + t.Slots.Active + " passed its gate")
		return x.goTo("commit")
	case "commit":
		return x.commit(true)
	case "recover":
		if err := x.closeIfUntouched(l.untouched + "; slot " + t.Slots.Active + " untouched"); err != nil {
			return err
		}
		if t.Fallback == "" {
			x.fail("no previous package is recorded for slot " + t.Slots.Active + ": " + l.nothingTo)
			return x.finish(3, "")
		}
		if !x.donePhase(l.recovery) {
			x.say("%s", l.says(t))
			if l.outside {
				for _, a := range x.outsideRecord(t.Target) {
					x.say("  left in place (a deploy action outside Zarf's record): %s", a)
				}
			}
		}
		if !x.runCmd(l.recovery, l.recover(x, t)) {
			x.fail(l.recovered(t.Slots.Active) + ": the recovery step failed")
			return x.finish(3, "")
		}
		return x.goTo("recovered")
	case "recovered":
		return x.recoverGate(l.recovery, t.Slots.Active, l.recovered(t.Slots.Active))
	default:
		var i int
		if _, err := fmt.Sscanf(pc, "%d", &i); err != nil || i < 0 || i >= len(l.steps) {
			break
		}
		st := l.steps[i]
		if st.losses && !x.donePhase(st.phase) {
			if err := x.confirmLosses(t.Slots.Active, "the teardown"); err != nil {
				return err
			}
		}
		if !x.runCmd(st.phase, st.cmd(x, t)) {
			return x.failed(st.failed(t.Slots.Active), "recover")
		}
		x.pass(st.passed(t.Slots.Active))
		if i+1 < len(l.steps) {
			return x.goTo(fmt.Sprint(i + 1))
		}
		return x.goTo("gate")
	}
	return x.refuse(3, "the run's progress names no step it knows ("+x.sc.PC+"): run the script again")
}

// movedOff stops the run of an update whose slot no longer serves (a
// forced switch moved the pointer away: site.MovedOff), before any step,
// naming what closes or resumes it, as journal status does.
func (x *run) movedOff(n *journal.NextStep) error {
	m := withStateDir(x.d, *n)
	x.fail(m.Why)
	x.warn("next: %s", m.Command)
	for _, a := range m.Alternatives {
		x.warn("  or: %s", a)
	}
	return x.finish(exitOf(errkind.Conflict), "the slot this update changes no longer serves")
}

// commit records COMMITTED (record: not recorded yet) and closes the
// transaction: the update is said committed only once both are done (a
// refused COMMITTED, a fresh-gate or deployed-package check of the
// journal, or an end that could not be written leaves the transaction
// open, and the run says so with its re-run).
func (x *run) commit(record bool) error {
	if record && !x.runStep(journal.Committed, "") {
		x.fail("recording COMMITTED (see above): the transaction stays open; run again: " + x.rerun().String())
		return x.finish(3, "the update could not be committed")
	}
	if code := x.end(); code != 0 {
		x.fail("closing the transaction (see above): it stays open, committed; run again: " + x.rerun().String())
		return x.finish(code, "the committed transaction could not be closed")
	}
	x.pass("update committed")
	return x.finish(0, "")
}

// outsideRecord is the deploy actions of the staged package digest, one
// line each (component, when, command): what a restore cannot remove.
// Nothing when it is not staged or its report names none.
func (x *run) outsideRecord(digest string) []string {
	p, err := stage.Lookup(x.d, &stage.Ref{Arg: digest, Digest: digest})
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range p.Record.Report.DeployActions {
		out = append(out, fmt.Sprintf("%s (%s): %s", a.Component, a.When, verify.FirstLine(a.Cmd, 120)))
	}
	return out
}
