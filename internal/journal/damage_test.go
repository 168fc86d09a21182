package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
)

// A damaged history's advice is a repair that runs as printed, not "read
// the log"; after it the transaction is kept and steps go on.
func TestCorruptHistoryRepairRunsAsPrinted(t *testing.T) {
	j := newJournal(t)
	tx, err := j.Begin(BeginOptions{Strategy: InPlace, Target: strings.Repeat("1", 64)})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(j.histPath(), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("garbage\n{\"seq\":9,\"txn\":\"x\",\"type\":\"step\"}\n")
	f.Close()
	_, err = j.Load()
	var ce *CorruptError
	if !errors.As(err, &ce) || strings.Contains(err.Error(), "journal log") || !strings.Contains(err.Error(), ": "+repairCommand+"   # ") {
		t.Fatalf("load: %v", err)
	}
	did, err := j.RepairDamage()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(did, "\n"), "kept the 2 readable line(s) of history.jsonl and set aside 1 damaged line(s) (line 2; ") {
		t.Errorf("repair said %q", did)
	}
	got, err := j.Load()
	if err != nil || got == nil || got.ID != tx.ID {
		t.Fatalf("after the repair: %+v %v", got, err)
	}
	if _, err := j.Start(Verified); err != nil {
		t.Fatalf("step after the repair: %v", err)
	}
}

// A damaged transaction.json is rebuilt from the history by the printed
// repair: the same transaction, phase, status, slots and package, and the
// steps go on.
func TestDamagedTransactionRebuiltFromHistory(t *testing.T) {
	j := newJournal(t)
	tx, err := j.Begin(BeginOptions{Strategy: BlueGreen, Target: strings.Repeat("1", 64), Package: "/p/pkg.tar.zst",
		Fallback: strings.Repeat("2", 64), Slots: Slots{Active: "a", Candidate: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []Phase{Verified, Provisioning} {
		if _, err := j.Start(p); err != nil {
			t.Fatal(err)
		}
		if p == Verified {
			if _, err := j.Done(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := j.Fail(Provisioning, "boom"); err != nil {
		t.Fatal(err)
	}
	want, _ := j.Load()
	for _, damage := range []string{"", "{\"apiVersion\":", "garbage"} {
		if err := os.WriteFile(j.txnPath(), []byte(damage), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = j.Load()
		if err == nil || !strings.Contains(err.Error(), ": "+repairCommand+"   # rebuilds it from the history") {
			t.Fatalf("load of %q: %v", damage, err)
		}
		if _, err := j.Repair(); err == nil {
			t.Fatalf("a mutating command went on over %q", damage)
		}
		did, err := j.RepairDamage()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(did, "\n"), "rebuilt transaction.json of transaction "+tx.ID) {
			t.Errorf("repair said %q", did)
		}
		got, err := j.Load()
		if err != nil || got == nil {
			t.Fatalf("after the repair: %v", err)
		}
		if got.ID != tx.ID || got.Phase != Provisioning || got.Status != StatusFailed || got.Slots != want.Slots ||
			got.Package != want.Package || got.Fallback != want.Fallback || got.Target != want.Target || got.LastError != want.LastError || len(got.Steps) != len(want.Steps) {
			t.Fatalf("rebuilt %+v, want %+v", got, want)
		}
	}
	if _, err := j.Start(Provisioning); err != nil {
		t.Fatalf("retry after the repair: %v", err)
	}
}

// An emptied or cut history is never repaired silently: every mutating
// command stops, naming what was lost and the open transaction, until the
// printed repair acknowledges it; the open transaction is kept.
func TestCutHistoryIsReportedNotRepairedSilently(t *testing.T) {
	for _, cut := range []string{"emptied", "truncated", "cut mid-line"} {
		t.Run(cut, func(t *testing.T) {
			j := newJournal(t)
			tx, err := j.Begin(BeginOptions{Strategy: InPlace, Target: strings.Repeat("1", 64)})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := j.Start(Verified); err != nil {
				t.Fatal(err)
			}
			if _, err := j.Done(Verified); err != nil {
				t.Fatal(err)
			}
			if _, err := j.Start(Deploying); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(j.histPath())
			lines := strings.SplitAfter(string(b), "\n")
			var keep string
			switch cut {
			case "truncated":
				keep = lines[0]
			case "cut mid-line":
				keep = lines[0] + lines[1][:10]
			}
			if err := os.WriteFile(j.histPath(), []byte(keep), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err = j.Repair()
			var le *HistoryLossError
			if !errors.As(err, &le) || le.Lines < 2 || le.Bytes != int64(len(b)-len(keep[:strings.LastIndex(keep, "\n")+1])) ||
				!strings.Contains(err.Error(), "transaction "+tx.ID) || !strings.HasSuffix(err.Error(), ": "+repairCommand) {
				t.Fatalf("repair of a history %s: %v", cut, err)
			}
			if _, err := j.Repair(); err == nil {
				t.Fatal("the second mutating command went on")
			}
			did, err := j.RepairDamage()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(strings.Join(did, "\n"), "acknowledged") {
				t.Errorf("repair said %q", did)
			}
			if _, err := j.Repair(); err != nil {
				t.Fatalf("after the acknowledgement: %v", err)
			}
			got, err := j.Load()
			if err != nil || got == nil || got.ID != tx.ID || got.Phase != Deploying {
				t.Fatalf("the open transaction after the repair: %+v %v", got, err)
			}
			h, _ := ReadHistory(j.histPath())
			if l := h.Last(); l == nil || l.Type != "repair" || !strings.Contains(l.Detail, "lost") {
				t.Fatalf("the loss is not recorded: %+v", l)
			}
			if _, err := j.Done(Deploying); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A crash between the two writes of a transition loses the one history
// line that transaction.json keeps: that is still restored without asking.
func TestCrashLostLineStillRestored(t *testing.T) {
	j := newJournal(t)
	if _, err := j.Begin(BeginOptions{Strategy: InPlace, Target: strings.Repeat("1", 64)}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(j.histPath())
	if _, err := j.Start(Verified); err != nil {
		t.Fatal(err)
	}
	// The history and its mark as they were before the append.
	os.WriteFile(j.histPath(), b, 0o600)
	writeMark(j.dir.Join(Dir), mark{Seq: 1, Bytes: int64(len(b))})
	note, err := j.Repair()
	if err != nil || !strings.Contains(note, "restored history line 2") {
		t.Fatalf("repair: %q %v", note, err)
	}
}

// A transaction.json removed while the history shows it open is damage,
// named, and abort --force (AbortLost) closes it.
func TestLostTransaction(t *testing.T) {
	j := newJournal(t)
	tx, err := j.Begin(BeginOptions{Strategy: InPlace, Target: strings.Repeat("1", 64)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Start(Verified); err != nil {
		t.Fatal(err)
	}
	if _, err := j.AbortLost(); err == nil {
		t.Fatal("AbortLost with the file present succeeded")
	}
	os.Remove(j.txnPath())
	_, err = j.Load()
	var le *LostError
	if !errors.As(err, &le) || le.Open.TxnID != tx.ID || !le.Rebuildable || !strings.HasSuffix(err.Error(), "rebuild it from the history: kubectl bundle-journal repair") {
		t.Fatalf("load: %v", err)
	}
	if _, err := j.Begin(BeginOptions{Strategy: InPlace, Target: strings.Repeat("2", 64)}); !errors.As(err, &le) {
		t.Fatalf("begin over a lost transaction: %v", err)
	}
	if _, err := j.AbortLost(); err != nil {
		t.Fatal(err)
	}
	if got, err := j.Load(); got != nil || err != nil {
		t.Fatalf("after abort --force: %+v %v", got, err)
	}
}

// A transaction.json removed while the history reaches back to its begin
// is rebuilt by RepairDamage (journal repair), where it was; cut below its
// begin, the history cannot tell it, and abort --force is the repair.
func TestRepairRebuildsAMissingTransaction(t *testing.T) {
	j := newJournal(t)
	tx, err := j.Begin(BeginOptions{Strategy: Recreate, Target: strings.Repeat("1", 64), Fallback: strings.Repeat("2", 64), Slots: Slots{Active: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []Phase{Verified, Teardown} {
		if _, err := j.Start(p); err != nil {
			t.Fatal(err)
		}
		if _, err := j.Done(p); err != nil {
			t.Fatal(err)
		}
	}
	want, _ := j.Load()
	os.Remove(j.txnPath())
	did, err := j.RepairDamage()
	if err != nil || len(did) != 1 || !strings.HasPrefix(did[0], "rebuilt the missing transaction.json of transaction "+tx.ID+" (recreate) from the history: phase TEARDOWN (done)") {
		t.Fatalf("repair: %q %v", did, err)
	}
	got, err := j.Load()
	if err != nil || got == nil || got.ID != tx.ID || got.Phase != Teardown || got.Status != StatusDone || got.Seq != want.Seq ||
		got.Fallback != want.Fallback || got.Slots != want.Slots || len(got.Steps) != len(want.Steps) {
		t.Fatalf("rebuilt: %+v %v, want %+v", got, err, want)
	}
	if did, err := j.RepairDamage(); err != nil || len(did) != 0 {
		t.Fatalf("second repair: %q %v", did, err)
	}

	// The history cut below the begin: not rebuildable.
	b, err := os.ReadFile(j.histPath())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	if err := os.WriteFile(j.histPath(), []byte(strings.Join(lines[1:], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(j.txnPath())
	var le *LostError
	if _, err := j.Load(); !errors.As(err, &le) || le.Rebuildable || !strings.HasSuffix(err.Error(), "kubectl bundle-journal abort --force") {
		t.Fatalf("load with the begin cut: %v", err)
	}
}

// A damaged line in the middle of the history costs that line only: the
// repair keeps every readable line around it (the slots' identities and
// ownership live there for when a record is lost), sets the damaged file
// aside as it was, records what it set aside, and the journal goes on.
func TestRepairKeepsGoodLinesAroundADamagedOne(t *testing.T) {
	j := newJournal(t)
	owner := &SlotIdentity{Provider: "existing", Cluster: "airgap-mgmt-a", OwnsWorkloads: []string{"airgap-wl-a"}}
	for i, detail := range []string{"create", "deploy", "owns", "adopt"} {
		ev := Event{Type: "slot", Slot: "a", Detail: detail, Status: StatusDone}
		if i == 2 {
			ev.Identity = owner
		}
		if err := j.Record(ev); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := j.Begin(BeginOptions{Strategy: InPlace, Target: strings.Repeat("1", 64)})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(j.histPath())
	lines := strings.SplitAfter(string(b), "\n")
	lines[1] = "garbage{{\n"                                       // not JSON
	lines[3] = strings.Replace(lines[3], `"seq":4`, `"seq":99`, 1) // out of order
	damaged := strings.Join(lines, "")
	if err := os.WriteFile(j.histPath(), []byte(damaged), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Load(); err == nil || !strings.Contains(err.Error(), repairCommand+"   # keeps its readable lines") {
		t.Fatalf("load of the damaged history: %v", err)
	}
	did, err := j.RepairDamage()
	if err != nil {
		t.Fatal(err)
	}
	said := strings.Join(did, "\n")
	if !strings.Contains(said, "kept the 3 readable line(s) of history.jsonl and set aside 2 damaged line(s) (lines 2, 4; ") || strings.Contains(said, "lost") {
		t.Fatalf("repair said %q", said)
	}
	asides, _ := filepath.Glob(j.histPath() + ".damaged-*")
	if len(asides) != 1 {
		t.Fatalf("damaged files kept: %v", asides)
	}
	if kept, _ := os.ReadFile(asides[0]); string(kept) != damaged {
		t.Errorf("the damaged file is not kept as it was: %q", kept)
	}
	h, err := ReadHistory(j.histPath())
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	var owns []string
	for _, ev := range h.Events {
		seqs = append(seqs, ev.Seq)
		if ev.Identity != nil {
			owns = ev.Identity.OwnsWorkloads
		}
	}
	if fmt.Sprint(seqs) != "[1 3 5 6]" || fmt.Sprint(owns) != "[airgap-wl-a]" {
		t.Fatalf("history after the repair: seqs %v, owns %v", seqs, owns)
	}
	if l := h.Last(); l.Type != "repair" || !strings.Contains(l.Detail, "2 damaged line(s) (lines 2, 4), set aside to "+asides[0]+"; its 3 readable line(s) are kept") {
		t.Fatalf("the repair is not recorded: %+v", l)
	}
	if _, err := j.Repair(); err != nil {
		t.Fatalf("a mutating command after the repair: %v", err)
	}
	if got, err := j.Load(); err != nil || got == nil || got.ID != tx.ID {
		t.Fatalf("the open transaction after the repair: %+v %v", got, err)
	}
	if _, err := j.Start(Verified); err != nil {
		t.Fatal(err)
	}
}

// A torn last line (a crash mid-append) is still cut without asking, and
// a damaged line before it does not cost the lines between them.
func TestSalvageHistory(t *testing.T) {
	in := `{"seq":1,"txn":"-","type":"slot"}` + "\n" + `{"seq":"x"}` + "\n" + `{"seq":2,"txn":"-","type":"slot"}` + "\n" + `{"seq":3,"tx`
	kept, h, damaged := SalvageHistory([]byte(in))
	if len(h.Events) != 2 || fmt.Sprint(damaged) != "[2 4]" || string(kept) != `{"seq":1,"txn":"-","type":"slot"}`+"\n"+`{"seq":2,"txn":"-","type":"slot"}`+"\n" || h.ValidBytes != int64(len(kept)) {
		t.Fatalf("salvaged %q %+v %v", kept, h, damaged)
	}
	h, err := ParseHistory([]byte(`{"seq":1,"txn":"-","type":"slot"}` + "\n" + `{"seq":2,"tx`))
	if err != nil || h.Torn == nil || len(h.Events) != 1 {
		t.Fatalf("a torn tail alone: %+v %v", h, err)
	}
}

// CutHistory, what journal status reads without the lock, finds a history
// cut from outside whatever it cut: the tail after a closed transaction
// (Load then sees none open), the end of a closed transaction (the history
// then seems to show it open), or all of it under an open one; and says
// what each means. An intact history, or one a crash tore, is no cut.
func TestCutHistoryFoundWithoutTheLock(t *testing.T) {
	closed := func(t *testing.T) (*Journal, string) {
		j := newJournal(t)
		tx, err := j.Begin(BeginOptions{Strategy: InPlace, Target: strings.Repeat("1", 64)})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []Phase{Verified, Deploying, Healthy, Committed} {
			if _, err := j.Start(p); err != nil {
				t.Fatal(err)
			}
			if _, err := j.Done(p); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := j.End(); err != nil {
			t.Fatal(err)
		}
		if err := j.Record(Event{Type: "slot", Slot: "a", Detail: "create", Status: StatusDone}); err != nil {
			t.Fatal(err)
		}
		return j, tx.ID
	}
	keepLines := func(t *testing.T, j *Journal, n int) {
		b, _ := os.ReadFile(j.histPath())
		lines := strings.SplitAfter(string(b), "\n")
		if err := os.WriteFile(j.histPath(), []byte(strings.Join(lines[:n], "")), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("intact", func(t *testing.T) {
		j, _ := closed(t)
		if cut, err := j.CutHistory(); cut != nil || err != nil {
			t.Fatalf("an intact history: %v %v", cut, err)
		}
		f, _ := os.OpenFile(j.histPath(), os.O_APPEND|os.O_WRONLY, 0)
		f.WriteString(`{"seq":99,"tx`)
		f.Close()
		if cut, err := j.CutHistory(); cut != nil || err != nil {
			t.Fatalf("a torn last line: %v %v", cut, err)
		}
	})
	t.Run("tail after a closed transaction", func(t *testing.T) {
		j, _ := closed(t)
		keepLines(t, j, 10) // begin, 8 steps, end; the slot event cut
		if got, err := j.Load(); got != nil || err != nil {
			t.Fatalf("Load: %v %v (it sees no transaction: the cut is status's to say)", got, err)
		}
		cut, err := j.CutHistory()
		if err != nil || cut == nil || cut.Txn != nil || cut.Open != nil || cut.Lines != 1 || cut.FromSeq != 11 || cut.ToSeq != 11 {
			t.Fatalf("CutHistory: %+v %v", cut, err)
		}
		if m := cut.Meaning(); !strings.Contains(m, "events #11-#11") || !strings.Contains(m, "no update is in progress") || !strings.Contains(m, repairCommand) {
			t.Errorf("meaning %q", m)
		}
	})
	t.Run("end of a closed transaction", func(t *testing.T) {
		j, id := closed(t)
		keepLines(t, j, 5)
		cut, err := j.CutHistory()
		if err != nil || cut == nil || cut.Txn != nil || cut.Open == nil || cut.Open.TxnID != id || cut.FromSeq != 6 || cut.ToSeq != 11 {
			t.Fatalf("CutHistory: %+v %v", cut, err)
		}
		if m := cut.Meaning(); !strings.Contains(m, "its end may be among the lost lines") || !strings.Contains(m, "abort --force") {
			t.Errorf("meaning %q", m)
		}
		if !strings.Contains(cut.Error(), "transaction "+id+" begun and not ended") {
			t.Errorf("error %q", cut.Error())
		}
	})
	t.Run("emptied under an open transaction", func(t *testing.T) {
		j := newJournal(t)
		tx, err := j.Begin(BeginOptions{Strategy: Recreate, Target: strings.Repeat("1", 64)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := j.Start(Verified); err != nil {
			t.Fatal(err)
		}
		keepLines(t, j, 0)
		cut, err := j.CutHistory()
		if err != nil || cut == nil || cut.Txn == nil || cut.Txn.ID != tx.ID || cut.Lines != 2 {
			t.Fatalf("CutHistory: %+v %v", cut, err)
		}
		if m := cut.Meaning(); !strings.Contains(m, "transaction "+tx.ID+" is kept in transaction.json") {
			t.Errorf("meaning %q", m)
		}
		if _, err := j.RepairDamage(); err != nil {
			t.Fatal(err)
		}
		if cut, err := j.CutHistory(); cut != nil || err != nil {
			t.Fatalf("after the repair: %v %v", cut, err)
		}
	})
}

// repairCommand is the repair as the messages print it for a state dir
// given by path (no environment to carry).
var repairCommand = advice.Plugin("journal", "repair").String()
