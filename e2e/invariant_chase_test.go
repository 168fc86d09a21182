package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

type journalView struct {
	Transaction *rawTxn `json:"transaction"`
	Next        *struct {
		Command string `json:"command"`
	} `json:"next"`
}

// chase (I3) runs the next command journal status prints, verbatim, up to
// bound times (the workloads healed first unless asOp: an operator fixes
// what the gate reports before following the advice). Each run must make
// progress: exit 0, a later phase, or a different failure or advice.
//
// The next command carries the gate the script was run with (journal
// begin --gate), which may be $GATEFAIL, a gate no workload passes: the
// operator's fix for what it reports is the gate file itself, so while
// chasing it checks what $GATE checks (restored after).
func (r *seqRun) chase(bound int, asOp bool) *violation {
	if !asOp {
		r.c.chases++
		for _, sl := range []string{"a", "b"} {
			_ = r.q.inv.setHealth(sl, true)
		}
		failing := filepath.Join(r.q.root, "gate-fails.yaml")
		if was, err := os.ReadFile(failing); err == nil {
			if fixed, err := os.ReadFile(filepath.Join(r.q.root, "gate.yaml")); err == nil && os.WriteFile(failing, fixed, 0o600) == nil {
				defer func() { _ = os.WriteFile(failing, was, 0o600) }()
			}
		}
	}
	prev := ""
	for i := 0; i < bound; i++ {
		pre := r.observe()
		st := r.q.plugin("kubectl-bundle-journal", "status", "-o", "json")
		if st.code == 3 {
			adv := damageAdvice(st.out, r.lastActive)
			if adv == "" {
				return r.fail("D", "journal status exits 3 and prints no repair:\n%s", tail(st.out))
			}
			if v := r.runRepair(adv); v != nil {
				return v
			}
			continue
		}
		if st.code != 0 {
			return r.fail("I3", "journal status exits %d:\n%s", st.code, tail(st.out))
		}
		var jv journalView
		if err := json.Unmarshal([]byte(st.out), &jv); err != nil {
			return r.fail("I3", "journal status -o json: %v\n%s", err, st.out)
		}
		if jv.Transaction == nil {
			if asOp {
				r.logf("next: no transaction")
			}
			return nil
		}
		if jv.Next == nil || jv.Next.Command == "" {
			return r.fail("I3", "transaction %s in %s (%s) and journal status prints no next command", jv.Transaction.ID, jv.Transaction.Phase, jv.Transaction.Status)
		}
		cmd := jv.Next.Command
		r.c.nexts++
		res := r.q.exec(nil, cmd, nil, 0, 2*time.Minute)
		r.logf("  next as printed: %s -> %s %s", cmd, res, firstError(res.out))
		if v := r.checkDamageMet(pre, strings.Fields(cmd), res); v != nil {
			return v
		}
		if v := r.checkI1(pre); v != nil {
			return v
		}
		if v := r.checkI4(pre, strings.Fields(cmd), res); v != nil {
			return v
		}
		r.updateKG()
		switch res.code {
		case 0:
			prev = ""
			continue
		case 2, 124:
			return r.fail("I3", "the next command journal status printed does not run as printed: %s: %s\n%s", cmd, res, tail(res.out))
		}
		if adv := advice(res.out, r.lastActive); adv != "" {
			r.lastAdvice = adv
		}
		after := r.q.plugin("kubectl-bundle-journal", "status", "-o", "json")
		var av journalView
		_ = json.Unmarshal([]byte(after.out), &av)
		key := fmt.Sprintf("exit %d | %s | %s", res.code, firstError(res.out), phaseKey(av))
		if key == prev {
			return r.fail("I3", "the same failure with the same advice twice: %s\n%s", cmd, tail(res.out))
		}
		prev = key
		if asOp {
			return nil
		}
	}
	if asOp {
		return nil
	}
	if t, _ := r.txn(); t != nil {
		return r.fail("I3", "following journal status's next command %d times did not close transaction %s (%s %s)", bound, t.ID, t.Phase, t.Status)
	}
	return nil
}

func phaseKey(v journalView) string {
	if v.Transaction == nil {
		return "none"
	}
	next := ""
	if v.Next != nil {
		next = v.Next.Command
	}
	return v.Transaction.Phase + "/" + v.Transaction.Status + " next " + next
}

// settle ends a sequence as an operator would: heal the workloads, follow
// the advice until the transaction closes, repair what switch status
// reports; the invariants hold throughout and the site ends consistent.
func (r *seqRun) settle() *violation {
	r.op = -1
	for _, t := range slices.Sorted(func(yield func(string) bool) {
		for t := range r.damaged {
			if !yield(t) {
				return
			}
		}
	}) {
		if !r.stillDamaged(t) {
			continue
		}
		// The damage report of journal status, else of a mutating command
		// that changes nothing (destroying a slot that does not exist).
		res := r.q.plugin("kubectl-bundle-journal", "status")
		adv := damageAdvice(res.out, r.lastActive)
		if res.code != 3 || adv == "" {
			res = r.q.plugin("kubectl-bundle-slot", "destroy", "zz-none")
			adv = damageAdvice(res.out, r.lastActive)
		}
		if adv == "" {
			continue
		}
		if v := r.runRepair(adv); v != nil {
			return v
		}
	}
	if v := r.chase(8, false); v != nil {
		return v
	}
	for i := 0; i < 3; i++ {
		// Read again after each repair: one may remove the pointer (its
		// slot destroyed with --force, and none left).
		active, ok := r.pointer()
		if !ok || active == "" {
			return nil
		}
		kube, reg := r.q.aliases()
		if kube == active && reg == active {
			return nil
		}
		st, res := r.switchStatus()
		if res.code != 0 || st.Next == "" {
			return r.fail("I2", "the aliases point at %q and %q, the active slot is %s, and switch status names no repair (%s)", kube, reg, active, res)
		}
		pre := r.observe()
		fix := r.q.exec(nil, st.Next, nil, 0, time.Minute)
		r.logf("  switch repair as printed: %s -> %s %s", st.Next, fix, firstError(fix.out))
		if v := r.checkI1(pre); v != nil {
			return v
		}
		if fix.code != 0 {
			return r.fail("I2", "the repair switch status prints fails: %s: %s\n%s", st.Next, fix, tail(fix.out))
		}
	}
	return r.fail("I2", "switch status's repair, run three times, did not make the aliases follow the active slot")
}
