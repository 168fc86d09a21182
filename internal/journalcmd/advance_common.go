package journalcmd

import (
	"fmt"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
	"os"
	"strings"

	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/plan"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
)

// What the strategies' runs share: the checks before a run begins, the
// recovery step and its gate, the offline check.

// dryRun is --dry-run: the planner's plan of this command on this site,
// with its exit code; nothing is changed.
func (x *run) dryRun() error {
	args := []string{"plan", "--strategy", string(x.r.strategy), "--op", x.r.op}
	if x.r.pkg != "" {
		args = append(args, "--package", x.r.pkg)
	}
	if x.r.switchMode != "" {
		args = append(args, "--switch-mode", x.r.switchMode)
	}
	if x.r.output != "" {
		args = append(args, "-o", x.r.output)
	}
	args = append(args, x.r.begin...)
	return &kcli.ExitError{Code: x.quiet(nil, "journal", args...)}
}

// requireUpdate: a PACKAGE and verification material were given, or the
// site's policy in config.yaml supplies it (verify --policy says so, or
// exits 2 naming what to give).
func (x *run) requireUpdate() error {
	if x.r.pkg == "" {
		return kcli.Usage("a PACKAGE is required (see --help)")
	}
	// The offline check's wait, read before anything begins, named by
	// where it came from (the check itself runs after the begin).
	if args := offlineCheckArgs(x.r.offlineWait, os.Getenv); len(args) == 3 {
		if _, err := parseWait(args[2]); err != nil {
			from := "--offline-wait " + x.r.offlineWait
			if x.r.offlineWait == "" {
				from = "$OFFLINE_WAIT_SECONDS"
			}
			return kcli.Usage("%s: %v; nothing was changed", from, err)
		}
	}
	if x.d != nil {
		// config.yaml as the steps will read it (its wait, even when the
		// flag or the environment overrides it: every setting is checked
		// on loading): a typo there is refused before anything begins.
		if _, err := slot.LoadConfig(x.d.Join("config.yaml"), os.Getenv, nil); err != nil {
			return kcli.Usage("%v; nothing was changed: fix config.yaml, then run again", err)
		}
	}
	if len(x.r.verify) == 0 {
		if code := x.quiet(nil, "verify", "--policy", "-q"); code != 0 {
			return x.refuse(code, "the scripts take the same flags, or ZARF_VERIFY_KEY, or AIRGAP_VERIFY_WORKFLOW_REF (or AIRGAP_VERIFY_REPO and AIRGAP_VERIFY_REF) for the site's keyless signer")
		}
	}
	return nil
}

// refuse says msg as an error and ends the run with code, changing nothing.
func (x *run) refuse(code int, msg string) error {
	fmt.Fprintf(x.errOut, "error: %s\n", msg)
	x.sc.PC = "finished"
	return &done{code}
}

// checkGateFile: the gate file (--gate) can be read and parses as a gate,
// checked by the gate itself before any step: a missing or bad file is a
// usage error (exit 2) that changes nothing.
func (x *run) checkGateFile(verb ...string) error {
	if x.r.gateFile == "" {
		return nil
	}
	code := x.quiet(nil, "gate", "-f", x.r.gateFile, "--parse-only", "-q")
	if code == 0 {
		return nil
	}
	return x.refuse(code, fmt.Sprintf("the gate file %s cannot be used (above): nothing was changed; restore or fix it, then run: %s; or name another gate file in its place (--gate ABS_PATH)",
		x.r.gateFile, x.rerunWithGate(x.r.gateFile, verb...)))
}

// rerunWithGate is this script with verb and this run's options, its gate
// file file (in place of --gate, else added), as a line to paste.
func (x *run) rerunWithGate(file string, verb ...string) string {
	args := append([]string(nil), verb...)
	gate, timeout := false, false
	for i := 0; i < len(x.r.rerun); i++ {
		switch a := x.r.rerun[i]; a {
		case "--gate":
			args = append(args, a, file)
			gate = true
			i++
		case "--gate-timeout":
			args = append(args, a, x.r.rerun[i+1])
			timeout = true
			i++
		default:
			args = append(args, a)
		}
	}
	if !gate {
		args = append(args, "--gate", file)
	}
	if !timeout && x.r.gateTimeout != "" {
		args = append(args, "--gate-timeout", x.r.gateTimeout)
	}
	return x.self(args...).String()
}

// endAborted ends an open transaction that was aborted (journal abort,
// done) and not ended: there is nothing of it to resume, and resuming it
// failed its first step and blamed the package ("FAIL: verification")
// with exit 1. An apply then starts anew. When end refuses (damaged
// state) the run ends with exit 3: end printed the repair.
func (x *run) endAborted() error {
	t := x.txn()
	if t == nil || t.Phase != journal.Aborted || t.Status != journal.StatusDone {
		return nil
	}
	x.say("transaction %s (%s) was aborted and not ended: ending it", t.ID, t.Strategy)
	if x.end() != 0 {
		return x.refuse(3, "transaction "+t.ID+" was aborted and could not be ended (see above)")
	}
	return nil
}

// checkOpen: an open transaction must be this strategy's, for this
// PACKAGE; then the run resumes it.
func (x *run) checkOpen() error {
	t := x.txn()
	if t == nil {
		return nil
	}
	if t.Strategy != x.r.strategy || (x.r.pkg != "" && !plan.SamePackage(t, x.r.pkg)) {
		pkg := t.Package
		if pkg == "" {
			pkg = t.Target
		}
		x.warn("error: transaction %s (%s, package %s) is open; finish it first:", t.ID, t.Strategy, pkg)
		x.quiet(x.errOut, "journal", "status")
		x.sc.PC = "finished"
		return &done{exitOf(errkind.Conflict)}
	}
	x.say("resuming transaction %s in phase %s (%s)", t.ID, t.Phase, t.Status)
	return nil
}

// activeSlot is the active slot from the slot records alone (no docker
// call: a rejected package must not touch the site at all).
func (x *run) activeSlot() string {
	out, _ := x.output("slot", "list", "-o", "jsonpath={[?(@.active==true)].name}")
	return out
}

// beginOnActive resumes the open transaction, or opens one on the active
// slot (begin takes the package deployed there as the fallback).
func (x *run) beginOnActive(verb string) error {
	if err := x.endAborted(); err != nil {
		return err
	}
	if err := x.checkOpen(); err != nil {
		return err
	}
	if x.txn() != nil {
		return nil
	}
	active := x.activeSlot()
	if active == "" {
		// A journal that cannot be read, or a history cut from outside,
		// is said first, with its repair: it is the way on, not a switch
		// (the slot list reads no journal).
		if cut, err := journal.New(x.d).CutHistory(); err != nil {
			return x.refuse(exitOf(errkind.Of(err)), err.Error())
		} else if cut != nil {
			return x.refuse(exitOf(errkind.Of(cut)), cut.Error())
		}
		// So is a damaged or lost pointer (the slot list names no active
		// slot then): its repair is the way on.
		if _, err := site.Read(x.d).Active(); err != nil {
			return x.refuse(exitOf(errkind.Of(err)), err.Error())
		}
		return x.refuse(exitOf(errkind.Environment), fmt.Sprintf("no active slot: %s %s the active slot (%s; %s)", x.r.strategy, verb, x.d.Plugin("slot", "list"), x.d.Plugin("switch", "to", "SLOT")))
	}
	args := append([]string{"begin", "--strategy", string(x.r.strategy), "--package", x.r.pkg, "--active", active}, x.r.begin...)
	if code := x.call("journal", append(args, "-q")...); code != 0 {
		x.sc.PC = "finished"
		return &done{code}
	}
	return nil
}

// closeIfUntouched: when the package was rejected before anything
// changed, close the transaction, say msg and end the run with 1.
func (x *run) closeIfUntouched(msg string) error {
	t := x.txn()
	if t == nil || x.donePhase(journal.Verified) && t.Phase != journal.Verified {
		return nil
	}
	x.call("journal", "abort", "-q")
	// Only a closed transaction is "the previous deployment is in place":
	// end refuses while the state is damaged (it printed the repair).
	if x.end() != 0 {
		x.fail("closing the transaction")
		return x.finish(3, "the transaction could not be closed")
	}
	x.say("%s", msg)
	return x.finish(1, "")
}

// failed starts the recovery after a step of this run failed: said once.
func (x *run) failed(msg, pc string) error {
	x.fail(msg)
	x.sc.Failed = true
	return x.goTo(pc)
}

// recovering says why a run recovers: a failure this run found is said
// already; one it resumes is said now.
func (x *run) recovering(msg string) {
	if !x.sc.Failed {
		x.fail(msg)
		x.sc.Failed = true
	}
}

// recoverGate gates slot again after the recovery step phase, and only
// when that gate passes closes the transaction as RESTORED and ends the
// run with 1 (the previous deployment is in place). It ends with 3 when
// the restored slot fails its gate: the transaction stays open in phase,
// and a re-run gates it again; when it fails as the last run's did, with
// nothing changed since, it says so rather than repeating the same BROKEN.
func (x *run) recoverGate(phase journal.Phase, slot, what string) error {
	before := x.gateOutcome(slot)
	code := x.callCmd(x.cmds().GateOf(slot))
	t := x.txn()
	id, fallback := "", ""
	if t != nil {
		id, fallback = t.ID, t.Fallback
	}
	if code != 0 && code != 1 {
		x.notGated(slot, code)
		x.warn("the transaction %s stays open in %s; once slot %s can be gated, run: %s", id, phase, slot, x.rerun())
		return x.finish(code, "the restored slot "+slot+" could not be gated")
	}
	if code == 1 {
		x.fail(what + ", but its gate fails")
		if before != "" && before == x.gateOutcome(slot) {
			x.warn("BROKEN: unchanged since the last run: slot %s still holds the previous package %s and fails its gate as the last run found it (failing: %s), and nothing changed since: the same package is deployed and the gate file is the same. The restore is not redone, and running this again cannot help until what the gate reports is fixed (transaction %s stays open in %s)",
				slot, short(fallback), x.gateFailing(slot), id, phase)
			x.warn("fix what the gate reports (the workload in slot %s, or the gate file if it is wrong); once it passes, this closes the transaction: %s", slot, x.rerun())
			x.warn("see what fails, run: %s", x.gateLine(slot))
			return x.finish(3, "the restored slot "+slot+" still fails its gate, unchanged since the last run: see BROKEN above")
		}
		x.warn("BROKEN: slot %s holds the previous package %s but fails its gate: the previous deployment is NOT confirmed in place (transaction %s stays open in %s)", slot, short(fallback), id, phase)
		x.warn("once it passes, this closes the transaction: %s", x.rerun())
		x.warn("see what fails, run: %s", x.gateLine(slot))
		return x.finish(3, "the restored slot "+slot+" fails its gate: see BROKEN above")
	}
	x.pass(what + " and its gate passes")
	if !x.runStep(journal.Restored, "") || x.end() != 0 {
		// The previous deployment is in place, but the journal does not
		// say so yet: the run says it, and its re-run closes it.
		x.fail("recording RESTORED and closing the transaction (see above): it stays open; run again: " + x.rerun().String())
		return x.finish(3, "the restored transaction could not be closed")
	}
	return x.finish(1, "")
}

// gateOutcome is the gate result recorded for slot as one line: what
// makes two results "the same failure"; "" when none is recorded.
func (x *run) gateOutcome(slot string) string {
	out, code := x.output("slot", "describe", slot, "-o", "jsonpath={.gate.passed}|{.package.digest}|{.gate.package}|{.gate.file}|{.gate.digest}|{.gate.failed}")
	if code != 0 || strings.HasPrefix(out, "|") {
		return ""
	}
	return out
}

// gateFailing is the checks slot's recorded gate failed.
func (x *run) gateFailing(slot string) string {
	out, _ := x.output("slot", "describe", slot, "-o", "jsonpath={.gate.failed[*]}")
	return strings.ReplaceAll(out, " ", ", ")
}

// notGated: the gate of slot did not run to a verdict (exit code): said,
// with how to gate it, and nothing about slot's health.
func (x *run) notGated(slot string, code int) {
	x.fail(fmt.Sprintf("slot %s could not be gated (the gate plugin exited %d; the error above says why): its health is not known", slot, code))
	x.warn("once that is fixed, gate it: %s", x.gateCmd(slot))
}

// notOpenAnyMore refuses going on when the transaction this run began was
// closed under it.
func (x *run) notOpenAnyMore() error {
	return x.refuse(3, fmt.Sprintf("the transaction this run began is not open any more (%s says what closed it): run the script again", x.d.Plugin("journal", "log")))
}

// gateCmd is the gate of slot with this run's gate flags, to run by hand.
func (x *run) gateCmd(slot string) advice.Cmd {
	return x.cmds().GateBy(slot).WithEnv(x.d.CommandEnv())
}

// offlineCheck: before the first step of an update, refuse while a public
// registry still answers, as offline-run.sh does: on by default
// (offlineCheckArgs says how long it waits, and SKIP_OFFLINE_CHECK=1
// records it skipped). A refused update that changed nothing is closed;
// one resumed past its first step stays open.
func (x *run) offlineCheck(getenv func(string) string) error {
	out, code := x.output("journal", offlineCheckArgs(x.r.offlineWait, getenv)...)
	if code == 0 {
		x.pass("isolation " + strings.TrimPrefix(out, "offline: "))
		return nil
	}
	out = strings.TrimPrefix(out, "offline: ")
	if out == "" {
		out = "check failed (see above)"
	}
	x.fail("isolation " + out)
	if !x.donePhase(journal.Verified) {
		x.call("journal", "abort", "-q")
		if x.end() != 0 {
			x.fail("closing the transaction")
			return x.finish(3, "the transaction could not be closed")
		}
		return x.finish(code, "the offline check refused; nothing was changed and the transaction is closed: run again once the uplink is cut")
	}
	x.warn("once offline, run: %s", x.rerun())
	return x.finish(code, "the offline check refused; the transaction stays open")
}

// offlineCheckArgs is the journal offline-check a run makes, as
// offline-run.sh reads its variables: SKIP_OFFLINE_CHECK=1 skips (the
// caller enforces isolation and monitors egress); else the wait is
// --offline-wait (flag), else $OFFLINE_WAIT_SECONDS, else the check's own
// (config.yaml's offline.waitSeconds, else 900 seconds).
func offlineCheckArgs(flag string, getenv func(string) string) []string {
	switch {
	case getenv("SKIP_OFFLINE_CHECK") == "1":
		return []string{"offline-check", "--skip"}
	case flag != "":
		return []string{"offline-check", "--wait", flag}
	case getenv("OFFLINE_WAIT_SECONDS") != "":
		return []string{"offline-check", "--wait", getenv("OFFLINE_WAIT_SECONDS")}
	}
	return []string{"offline-check"}
}

// confirmLosses: before what discards slot, list what it holds
// (PersistentVolumeClaims, registry content, workload clusters), recorded
// in the journal; when there is any, a terminal asks, and without one it
// refuses unless --yes was given. A refusal changes nothing: the run ends
// with its code (2 names --yes).
func (x *run) confirmLosses(slot, what string) error {
	args := []string{"losses", slot}
	if x.r.yes {
		args = append(args, "--yes")
	}
	code := x.quiet(nil, "slot", args...)
	switch code {
	case 0:
		return nil
	case 1, 2:
		x.fail(what + " would discard what slot " + slot + " holds (listed above); nothing was changed")
		return x.finish(code, "not confirmed: run again with --yes to discard it")
	}
	// Not a question: the list could not be made or recorded (a full
	// disk, the state dir unwritable, a conflict), or the discard is
	// refused (a workload cluster the slot's destroy would leave running,
	// unowned). --yes would not help.
	x.fail(fmt.Sprintf("%s: what slot %s holds could not be listed and recorded, or its discard is refused (slot losses exited %d: the error above says why); nothing was changed", what, slot, code))
	x.warn("once what the error above names is done (a workload cluster named in workloadClusters or deleted through slot %s's management cluster; space freed in the state dir), run again: %s", slot, x.rerun())
	return x.finish(code, "what slot "+slot+" holds could not be listed and recorded, or its discard is refused: nothing was changed")
}
