package journalcmd

import (
	"os"

	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
)

// inPlace is in-place.sh's run, one step a call: deploy the update into
// the active slot, gate it, commit; on a failed deploy or gate, redeploy
// the previous package into the same slot (best effort). A deploy
// interrupted once is done again, twice restores.
func (x *run) inPlace() error {
	switch x.sc.PC {
	case "":
		if err := x.requireUpdate(); err != nil {
			return err
		}
		if err := x.checkGateFile(x.r.pkg); err != nil {
			return err
		}
		if err := x.beginOnActive("updates"); err != nil {
			return err
		}
		return x.goTo("resume")
	case "resume":
		t := x.txn()
		switch {
		case t.Phase == journal.Restoring || t.Phase == journal.Restored:
			if x.donePhase(journal.Restoring) {
				x.recovering("resuming after RESTORING (done): the restored slot " + t.Slots.Active + " is gated again")
			} else {
				x.recovering("resuming an interrupted RESTORING")
			}
			return x.goTo("restore")
		case t.Phase == journal.Committed:
			x.call("journal", "end", "-q")
			x.pass("update committed")
			return x.finish(0, "")
		case t.Status == journal.StatusFailed:
			x.recovering(string(t.Phase) + " failed before: " + t.LastError)
			return x.goTo("restore")
		}
		// U4: a deploy killed once is deployed again; killed twice, the
		// journal says restore (docs/strategies.md: in-place after a crash).
		if n := journal.Next(t); n.Restore {
			x.recovering(n.Why)
			return x.goTo("restore")
		}
		if err := x.offlineCheck(os.Getenv); err != nil {
			return err
		}
		return x.goTo("verify")
	case "verify":
		t := x.txn()
		if !x.runStep(journal.Verified, "verify", append(append([]string{"--stage", "-q"}, x.r.verify...), x.r.pkg)...) {
			return x.failed("verification of "+x.r.pkg, "restore")
		}
		x.pass("package verified and staged (" + t.Target + ")")
		return x.goTo("deploy")
	case "deploy":
		t := x.txn()
		if !x.runStep(journal.Deploying, "slot", append([]string{"deploy", t.Slots.Active, t.Target}, x.r.deploy...)...) {
			return x.failed("deploying into slot "+t.Slots.Active, "restore")
		}
		x.pass("package deployed into slot " + t.Slots.Active)
		return x.goTo("gate")
	case "gate":
		t := x.txn()
		if !x.runStep(journal.Healthy, "gate", append([]string{"--slot", t.Slots.Active, "--record"}, x.r.gate...)...) {
			return x.failed("gate of slot "+t.Slots.Active, "restore")
		}
		x.pass("slot " + t.Slots.Active + " passed its gate")
		return x.goTo("commit")
	case "commit":
		x.runStep(journal.Committed, "")
		x.call("journal", "end", "-q")
		x.pass("update committed")
		return x.finish(0, "")
	case "restore":
		t := x.txn()
		if err := x.closeIfUntouched("nothing was deployed; slot " + t.Slots.Active + " untouched"); err != nil {
			return err
		}
		if t.Fallback == "" {
			x.fail("no previous package is recorded for slot " + t.Slots.Active + ": nothing to restore")
			return x.finish(3, "")
		}
		if !x.donePhase(journal.Restoring) {
			x.say("BEST EFFORT: redeploying the previous package %s into slot %s (in-place cannot guarantee it comes back as it was)", short(t.Fallback), t.Slots.Active)
		}
		if !x.runStep(journal.Restoring, "slot", append([]string{"deploy", t.Slots.Active, t.Fallback}, x.r.deploy...)...) {
			x.fail("previous package redeployed into slot " + t.Slots.Active + " (best effort): the recovery step failed")
			return x.finish(3, "")
		}
		return x.goTo("restored")
	case "restored":
		t := x.txn()
		return x.recoverGate(journal.Restoring, t.Slots.Active, "previous package redeployed into slot "+t.Slots.Active+" (best effort)")
	}
	return x.refuse(3, "the run's progress names no step it knows ("+x.sc.PC+"): run the script again")
}
