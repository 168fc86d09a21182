package journalcmd

import (
	"fmt"
	"os"
	"strconv"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/plan"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
)

// Blue-green's runs (blue-green.sh apply, accept, revert), one step a
// call: build the update in a second slot next to the active one, gate
// it, switch, soak; the active slot is never touched before the switch.

// exit ends the run with code and no summary, as a script's failed
// command under errexit does.
func (x *run) exit(code int) error {
	x.sc.PC = "finished"
	return &done{code}
}

func (x *run) phaseStarted(p journal.Phase) bool {
	t := x.txn()
	return t != nil && t.Step(p) != nil
}

// selfOp is this script's op with this run's options, as a line to paste.
func (x *run) selfOp(op string) string {
	return x.self(append([]string{op}, x.r.rerun...)...).String()
}

// recordedGate: without --gate and --gate-timeout, the gate the open
// transaction was begun with, so that a revert or a rollback gates as the
// update did.
func (x *run) recordedGate() {
	t := x.txn()
	if t == nil || t.Gate == nil {
		return
	}
	if x.r.gateFile == "" && t.Gate.File != "" {
		x.r.gateFile = t.Gate.File
		x.r.gate = append(x.r.gate, "-f", t.Gate.File)
	}
	if x.r.gateTimeout == "" && t.Gate.Timeout != "" {
		x.r.gateTimeout = t.Gate.Timeout
		x.r.gate = append(x.r.gate, "--timeout", t.Gate.Timeout)
	}
}

// gateInPlace gates slot and records the result; its exit code as it is:
// only 1 says slot fails its gate.
func (x *run) gateInPlace(slot string) int {
	return x.callCmd(x.cmds().GateOf(slot))
}

func (x *run) blueGreen() error {
	switch x.r.op {
	case "apply":
		return x.bgApply()
	case "accept":
		return x.bgAccept()
	case "revert":
		return x.bgRevert()
	}
	return x.refuse(2, "unknown command \""+x.r.op+"\" for \"blue-green.sh\" (see --help)")
}

func (x *run) bgApply() error {
	t := x.txn()
	if t == nil && x.sc.PC != "" && x.sc.PC != "rolledback" {
		return x.notOpenAnyMore()
	}
	// The candidate this update created, destroyed by hand since, is said
	// as such (goneCandidate) before the steps that need it. A run holds
	// the lock from its deploy step on, so a re-run, which passes through
	// deploy first, is where it is found.
	if x.sc.PC == "deploy" && t != nil && !site.Read(x.d).Exists(t.Slots.Candidate) {
		return x.goneCandidate(t.Slots.Candidate)
	}
	switch x.sc.PC {
	case "":
		if err := x.requireUpdate(); err != nil {
			return err
		}
		if err := x.checkGateFile("apply", x.r.pkg); err != nil {
			return err
		}
		if err := x.endAborted(); err != nil {
			return err
		}
		if err := x.checkOpen(); err != nil {
			return err
		}
		if t = x.txn(); t == nil {
			active := x.activeSlot()
			candidate, code := x.output("slot", "other", active)
			if code != 0 {
				return x.exit(code)
			}
			// With no active slot listed, begin decides why (exit 3
			// either way): a fresh site, or a damaged pointer (it names
			// the repair).
			args := []string{"begin", "--strategy", "blue-green", "--package", x.r.pkg}
			if active != "" {
				args = append(args, "--active", active)
			}
			args = append(args, "--candidate", candidate)
			if x.r.switchMode != "" {
				args = append(args, "--switch-mode", x.r.switchMode)
			}
			if code := x.call("journal", append(append(args, x.r.begin...), "-q")...); code != 0 {
				return x.exit(code)
			}
		}
		return x.goTo("resume")
	case "resume":
		switch {
		case site.RollingBack(t):
			return x.rollback("resuming an interrupted rollback")
		case site.PastSwitch(t):
			// Past the point of no return: only finish the switch.
			if code := x.callCmd(plan.SwitchTo(t.Slots.Candidate)); code != 0 {
				return x.exit(code)
			}
			x.pass("slot " + t.Slots.Candidate + " is active and soaking")
			return x.finish(0, "")
		}
		if t.Status == journal.StatusFailed {
			return x.rollback(string(t.Phase) + " failed before: " + t.LastError)
		}
		if err := x.offlineCheck(os.Getenv); err != nil {
			return err
		}
		return x.goTo("verify")
	case "verify":
		if !x.runCmd(journal.Verified, x.cmds().VerifyStage(), "-q") {
			return x.rollback("verification of " + x.r.pkg)
		}
		x.pass("package verified and staged (" + t.Target + ")")
		return x.goTo("provision")
	case "provision":
		c := t.Slots.Candidate
		if !x.donePhase(journal.Provisioning) {
			if err := x.preflight(c, t.Target); err != nil {
				return err
			}
			if x.sc.PC != "provision" {
				return nil // the rollback goes on
			}
		}
		if !x.runCmd(journal.Provisioning, plan.Create(c, t.Target)) {
			return x.rollback("creating candidate slot " + c)
		}
		x.pass("candidate slot " + c + " created")
		return x.goTo("deploy")
	case "deploy":
		c := t.Slots.Candidate
		if !x.runCmd(journal.Provisioned, x.cmds().Deploy(c, t.Target)) {
			return x.rollback("deploying into slot " + c)
		}
		x.pass("package deployed into slot " + c)
		return x.goTo("gate")
	case "gate":
		c := t.Slots.Candidate
		// S1: the workload clusters stay with the old slot, so the
		// candidate's gate checks its management cluster only.
		var scope []string
		if t.SwitchMode == journal.SwitchRepoint {
			scope = append(scope, "--management-only")
		}
		if !x.runCmd(journal.Healthy, x.cmds().GateOf(c, scope...)) {
			return x.rollback("gate of slot " + c)
		}
		x.pass("slot " + c + " passed its gate")
		return x.goTo("switch")
	case "switch":
		c := t.Slots.Candidate
		if code := x.callCmd(plan.SwitchTo(c)); code != 0 {
			if code != 4 && !x.phaseStarted(journal.Switched) {
				// The switch refused before its first write (a
				// precondition of its mode): nothing was switched, so the
				// update is rolled back, and the refusal's code is the run's.
				x.sc.Vars["rollbackCode"] = strconv.Itoa(code)
				x.sc.Vars["rollbackWhy"] = fmt.Sprintf("the switch to slot %s refused (exit %d, see above): the update was rolled back", c, code)
				return x.rollback("switch to slot " + c + " (refused before anything was switched)")
			}
			x.fail("switch to slot " + c + " did not finish: re-run it to complete it: " + x.rerun().String())
			return x.finish(3, "")
		}
		x.pass(fmt.Sprintf("switched to slot %s; soaking (accept: %s, revert: %s)", c, x.self("accept"), x.self("revert")))
		return x.finish(0, "")
	case "rollback":
		return x.rollbackStep()
	case "rolledback":
		return x.rolledBack()
	}
	return x.refuse(3, "the run's progress names no step it knows ("+x.sc.PC+"): run the script again")
}

// goneCandidate rolls the update back when candidate slot c, which this
// update created, was destroyed by hand (slot destroy of a slot that does
// not serve): there is nothing to deploy into, gate or switch to. Nothing
// of the package failed, so the run says what happened rather than blame
// the next step, with exit 3 (the update failed; not a plugin's 2 for a
// slot that does not exist), and a run of the apply again builds the slot
// anew.
func (x *run) goneCandidate(c string) error {
	x.sc.Vars["rollbackCode"] = "3"
	x.sc.Vars["rollbackWhy"] = fmt.Sprintf("candidate slot %s was destroyed outside the update: nothing was switched; the update was rolled back; run the apply again to build it anew", c)
	return x.rollback("candidate slot " + c + " does not exist any more (destroyed outside the update)")
}

// preflight: before the candidate is built, the machine can hold it and
// the package is fit for blue/green. Read only, so it runs again on a
// resume; when it refuses before anything was built, the transaction is
// closed and the refusal's code is the run's.
func (x *run) preflight(c, digest string) error {
	name, args := x.target(plan.Preflight(c, digest))
	code := x.quiet(nil, name, args...)
	if code == 0 {
		return nil
	}
	x.fail("preflight of candidate slot " + c + " (the ✗ findings above say why and what else to use)")
	if t := x.txn(); t != nil && t.Phase == journal.Verified {
		x.call("journal", "abort", "-q")
		if x.end() != 0 {
			x.fail("closing the transaction")
			return x.finish(3, "the transaction could not be closed")
		}
		x.say("nothing was built; slot %s untouched", x.activeSlot())
		return x.finish(code, "preflight refused the package: nothing was built")
	}
	return x.rollback("preflight of candidate slot " + c)
}

// rollback destroys the candidate (never the active slot) and closes the
// transaction; before anything was built there is nothing to destroy.
func (x *run) rollback(msg string) error {
	x.recovering(msg)
	t := x.txn()
	if err := x.closeIfUntouched("nothing was built; slot " + t.Slots.Active + " untouched"); err != nil {
		return err
	}
	x.sc.Vars["active"], x.sc.Vars["candidate"] = t.Slots.Active, t.Slots.Candidate
	return x.goTo("rollback")
}

func (x *run) rollbackStep() error {
	x.recordedGate()
	c := x.sc.Vars["candidate"]
	// --yes: the candidate holds only what this update built in it,
	// which its rollback discards.
	if x.runCmd(journal.Destroying, plan.Destroy(c, false)) && x.runStep(journal.RolledBack, "") && x.end() == 0 {
		x.pass("candidate slot " + c + " destroyed; the active slot was not touched")
		return x.goTo("rolledback")
	}
	x.fail("destroying candidate slot " + c)
	return x.finish(3, "")
}

// rolledBack: the previous deployment is said to be in place only once
// it passed its gate.
func (x *run) rolledBack() error {
	x.recordedGate()
	a := x.sc.Vars["active"]
	if !site.Read(x.d).Exists(a) {
		// Destroyed with --force during the update: there is nothing to
		// gate, and nothing serves (exit 3: the update failed; not the
		// gate plugin's 2 for a slot that does not exist).
		x.fail("the active slot " + a + " does not exist any more (destroyed with --force since the update began): nothing serves")
		return x.finish(3, "the update was rolled back, but the active slot "+a+" does not exist any more")
	}
	code := x.gateInPlace(a)
	if code != 0 && code != 1 {
		x.notGated(a, code)
		return x.finish(code, "the update was rolled back, but the active slot "+a+" could not be gated")
	}
	if code == 1 {
		x.fail("gate of the active slot " + a)
		x.warn("BROKEN: the update was rolled back (candidate slot %s destroyed), but the active slot %s fails its gate: the previous deployment is NOT confirmed in place", x.sc.Vars["candidate"], a)
		x.warn("see what fails: %s", x.gateCmd(a))
		return x.finish(3, "the active slot "+a+" fails its gate; see BROKEN above")
	}
	x.pass("slot " + a + " passed its gate")
	rc := 1
	if v := x.sc.Vars["rollbackCode"]; v != "" {
		rc, _ = strconv.Atoi(v)
	}
	return x.finish(rc, x.sc.Vars["rollbackWhy"])
}

func (x *run) bgAccept() error {
	t := x.txn()
	switch x.sc.PC {
	case "":
		if err := x.checkOpen(); err != nil {
			return err
		}
		if err := x.notSwitched(t, "accept"); err != nil {
			return err
		}
		if t != nil && t.Slots.Active != "" && !x.donePhase(journal.Retired) && t.SwitchMode != journal.SwitchRepoint {
			if err := x.confirmLosses(t.Slots.Active, "retiring slot "+t.Slots.Active); err != nil {
				return err
			}
			x.sc.Vars["confirmed"] = "1"
		}
		return x.goTo("accept")
	case "accept":
		if code := x.callCmd(plan.SwitchAccept()); code != 0 {
			return x.exit(code)
		}
		if t == nil {
			x.pass("update accepted")
			return x.finish(0, "")
		}
		return x.goTo("retire")
	case "retire":
		if t == nil {
			x.pass("update accepted")
			return x.finish(0, "")
		}
		old := t.Slots.Active
		owns := ""
		if old != "" && t.SwitchMode == journal.SwitchRepoint {
			owns, _ = x.output("slot", "describe", old, "-o", "jsonpath={.ownsWorkloads[*]}")
		}
		switch {
		case owns != "":
			// S1: the old slot runs the workload clusters; it is kept.
			if !x.runStep(journal.Retired, "") {
				return x.exit(3)
			}
			x.pass("old slot " + old + " kept: it owns workload clusters " + owns)
		case old != "":
			// An S1 accept that kept no workload clusters retires the slot
			// too: what it holds is listed and confirmed first.
			if x.sc.Vars["confirmed"] == "" && !x.donePhase(journal.Retired) {
				if err := x.confirmLosses(old, "retiring slot "+old); err != nil {
					return err
				}
			}
			if !x.runCmd(journal.Retired, plan.Destroy(old, false)) {
				x.fail("retiring slot " + old)
				return x.finish(3, "")
			}
			x.pass("old slot " + old + " retired")
		default:
			if !x.runStep(journal.Retired, "") {
				return x.exit(3)
			}
		}
		if code := x.end(); code != 0 {
			return x.exit(code)
		}
		x.pass("update accepted")
		return x.finish(0, "")
	}
	return x.refuse(3, "the run's progress names no step it knows ("+x.sc.PC+"): run the script again")
}

// notSwitched refuses op (revert, accept) of a blue-green transaction
// that has not switched to its candidate: the previous slot still
// serves, there is no soak to end, and the switch back or the retire
// would act on the slot that serves.
func (x *run) notSwitched(t *journal.Transaction, op string) error {
	if t == nil || t.Strategy != journal.BlueGreen || t.Step(journal.Switched) != nil {
		return nil
	}
	return x.refuse(4, fmt.Sprintf("transaction %s has not switched to slot %s: slot %s is still active and serving, so there is nothing to %s; nothing was changed. Finish the update (%s names the apply that gates slot %s and switches), or abandon it (%s, then %s)",
		t.ID, t.Slots.Candidate, t.Slots.Active, op, x.d.Plugin("journal", "status"), t.Slots.Candidate, x.d.Plugin("journal", "abort"), x.d.Plugin("slot", "destroy", t.Slots.Candidate)))
}

// revertHelp is what helps when the previous slot fails its gate.
func (x *run) revertHelp(slot string) {
	x.warn("see what fails: %s", x.gateCmd(slot))
	x.warn("once it passes, run: %s", x.selfOp("revert"))
	x.warn("to revert anyway: %s --force", x.selfOp("revert"))
}

// bgRevert: during the soak, return to the previous slot. Its gate runs
// BEFORE the switch: when it fails nothing is switched or destroyed, the
// candidate keeps serving, and the run exits 3 naming what helps. After
// the switch the gate runs again; only then is the candidate retired and
// the previous deployment said to be in place. --force reverts anyway
// (said, and the run still exits 3 while the previous slot fails its gate).
func (x *run) bgRevert() error {
	t := x.txn()
	if t == nil && x.sc.PC != "" {
		return x.notOpenAnyMore()
	}
	x.recordedGate()
	switch x.sc.PC {
	case "":
		if err := x.checkOpen(); err != nil {
			return err
		}
		if t == nil {
			// A transaction lost (transaction.json gone, the history
			// says it is open) is damage, never "nothing to revert".
			if _, err := site.ReadTxn(x.d); err != nil {
				return x.refuse(kcli.ExitCode(err), err.Error())
			}
			if out, _ := x.output("switch", "status", "-o", "jsonpath={.mode}/{.phase}"); out == "repoint/ACCEPTED" {
				// An accepted S1 update kept the old slot for its workload
				// clusters: the switch's refusal names them.
				if code := x.callCmd(plan.SwitchBack(nil, false)); code != 0 {
					return x.exit(code)
				}
			}
			return x.refuse(4, "no blue-green transaction is open: nothing to revert ("+x.d.Plugin("switch", "status").String()+")")
		}
		c, p := t.Slots.Candidate, t.Slots.Active
		if site.Accepted(t) {
			return x.refuse(4, fmt.Sprintf("transaction %s was accepted: slot %s stays active and slot %s is no revert target any more, so there is nothing to revert; finish the update with: %s", t.ID, c, p, x.self("accept")))
		}
		if err := x.notSwitched(t, "revert"); err != nil {
			return err
		}
		if err := x.checkGateFile("revert"); err != nil {
			return err
		}
		if !x.donePhase(journal.Destroying) {
			if err := x.confirmLosses(c, "revert"); err != nil {
				return err
			}
		}
		return x.goTo("back")
	case "back":
		c, p := t.Slots.Candidate, t.Slots.Active
		if x.donePhase(journal.SwitchedBack) {
			x.pass("switched back to slot " + p)
			return x.goTo("after")
		}
		code := 0
		if x.phaseStarted(journal.SwitchedBack) {
			// A switch back that began has moved the pointer already: the
			// re-run completes it, and the gate after it says whether the
			// previous slot is well.
			x.warn("the switch back to slot %s began and did not finish: completing it", p)
		} else {
			code = x.gateInPlace(p)
		}
		switch {
		case code != 0 && code != 1:
			x.notGated(p, code)
			if !x.r.force {
				x.warn("nothing was switched or destroyed; slot %s stays active and keeps serving (transaction %s stays open)", c, t.ID)
				x.warn("once slot %s can be gated, run: %s", p, x.selfOp("revert"))
				return x.finish(code, "slot "+p+" could not be gated: nothing was switched")
			}
			x.warn("reverting anyway (--force): switching back to slot %s, which was not gated", p)
		case code == 1:
			x.fail("gate of the previous slot " + p)
			if !x.r.force {
				x.warn("BROKEN: slot %s, the previous deployment, fails its gate: nothing was switched or destroyed; slot %s stays active and keeps serving (transaction %s stays open, soaking)", p, c, t.ID)
				x.revertHelp(p)
				x.warn("or keep the update: %s", x.selfOp("accept"))
				return x.finish(3, "the previous slot "+p+" fails its gate: nothing was switched; see BROKEN above")
			}
			x.warn("reverting anyway (--force): switching back to slot %s, which fails its gate", p)
		}
		if x.callCmd(plan.SwitchBack(&journal.Gate{File: x.r.gateFile, Timeout: x.r.gateTimeout}, x.r.force)) != 0 {
			x.fail("switching back did not finish: re-run it to complete it: " + x.rerun().String())
			return x.finish(3, "")
		}
		x.pass("switched back to slot " + p)
		return x.goTo("after")
	case "after":
		c, p := t.Slots.Candidate, t.Slots.Active
		code := x.gateInPlace(p)
		if code != 0 && code != 1 && !x.r.force {
			x.notGated(p, code)
			x.warn("candidate slot %s is kept, not destroyed (transaction %s stays open in SWITCHED_BACK); once slot %s can be gated, run: %s", c, t.ID, p, x.selfOp("revert"))
			return x.finish(code, "slot "+p+" could not be gated after the switch back")
		}
		if code != 0 {
			x.fail("gate of slot " + p + " after the switch back")
			if !x.r.force {
				x.warn("BROKEN: switched back to slot %s, but it fails its gate: candidate slot %s is kept, not destroyed (transaction %s stays open in SWITCHED_BACK)", p, c, t.ID)
				x.revertHelp(p)
				return x.finish(3, "slot "+p+" fails its gate after the switch back; see BROKEN above")
			}
			x.sc.Vars["broken"] = "1"
		} else {
			x.pass("slot " + p + " passed its gate")
		}
		return x.goTo("destroy")
	case "destroy":
		c, p := t.Slots.Candidate, t.Slots.Active
		// Confirmed by confirmLosses first (or the step is done).
		if !x.runCmd(journal.Destroying, plan.Destroy(c, false)) {
			x.fail("destroying slot " + c)
			return x.finish(3, "")
		}
		if !x.runStep(journal.RolledBack, "") {
			return x.exit(3)
		}
		if code := x.end(); code != 0 {
			return x.exit(code)
		}
		x.pass("candidate slot " + c + " destroyed")
		if x.sc.Vars["broken"] != "" {
			x.warn("BROKEN: reverted with --force: slot %s is active but fails its gate; the previous deployment is NOT confirmed in place", p)
			x.warn("see what fails: %s", x.gateCmd(p))
			return x.finish(3, "slot "+p+" is active but fails its gate; see BROKEN above")
		}
		x.say("the previous deployment is in place: slot %s is active and passed its gate", p)
		return x.finish(0, "")
	}
	return x.refuse(3, "the run's progress names no step it knows ("+x.sc.PC+"): run the script again")
}
