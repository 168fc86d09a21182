package journal

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
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
	if !errors.As(err, &ce) || strings.Contains(err.Error(), "journal log") {
		t.Fatalf("load: %v", err)
	}
	i := strings.Index(err.Error(), "mv ")
	if i < 0 {
		t.Fatalf("no mv repair in %q", err)
	}
	if out, err := exec.Command("sh", "-c", err.Error()[i:]).CombinedOutput(); err != nil {
		t.Fatalf("repair: %v: %s", err, out)
	}
	if _, err := j.Repair(); err != nil {
		t.Fatal(err)
	}
	got, err := j.Load()
	if err != nil || got == nil || got.ID != tx.ID {
		t.Fatalf("after the repair: %+v %v", got, err)
	}
	if _, err := j.Start(Verified); err != nil {
		t.Fatalf("step after the repair: %v", err)
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
	if !errors.As(err, &le) || le.Open.TxnID != tx.ID || !strings.Contains(err.Error(), "kubectl bundle-journal abort --force") {
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
