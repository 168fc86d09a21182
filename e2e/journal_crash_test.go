package e2e_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// journalOps is the scripted sequence the crash tests run in a child
// process: two transactions, with a failure and retry, a revert while
// soaking, an abort, and every kind of write (begin, step, abort, end).
var journalOps = []string{
	"begin blue-green",
	"start VERIFIED", "done VERIFIED",
	"start PROVISIONING", "fail PROVISIONING", "start PROVISIONING", "done PROVISIONING",
	"start PROVISIONED", "done PROVISIONED",
	"start HEALTHY", "done HEALTHY",
	"start SWITCHED", "done SWITCHED",
	"start SOAKING", "start SWITCHED_BACK", "done SWITCHED_BACK",
	"start DESTROYING", "done DESTROYING", "start ROLLED_BACK", "done ROLLED_BACK",
	"end",
	"begin in-place",
	"start VERIFIED", "done VERIFIED",
	"abort", "end",
}

// journalScript is the child: it runs journalOps from $JOURNAL_FROM on, each
// as its own locked command, and prints "ok N" after each completed op.
func journalScript() {
	dir := os.Getenv("KUBECTL_BUNDLE_STATE_DIR")
	from, _ := strconv.Atoi(os.Getenv("JOURNAL_FROM"))
	d, err := state.Open(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	for i := from; i < len(journalOps); i++ {
		if err := runOp(d, journalOps[i]); err != nil {
			fmt.Fprintf(os.Stderr, "op %d %q: %v\n", i, journalOps[i], err)
			os.Exit(1)
		}
		fmt.Printf("ok %d\n", i)
	}
	os.Exit(0)
}

func runOp(d *state.Dir, op string) error {
	l, err := d.Lock()
	if err != nil {
		return err
	}
	defer l.Unlock()
	j := journal.New(d)
	if _, err := j.Repair(); err != nil {
		return err
	}
	verb, arg, _ := strings.Cut(op, " ")
	switch verb {
	case "begin":
		_, err = j.Begin(journal.BeginOptions{Strategy: journal.Strategy(arg), Target: strings.Repeat("ab", 32), Slots: journal.Slots{Active: "a", Candidate: "b"}})
	case "start":
		_, err = j.Start(journal.Phase(arg))
	case "done":
		_, err = j.Done(journal.Phase(arg))
	case "fail":
		_, err = j.Fail(journal.Phase(arg), "injected failure")
	case "abort":
		_, _, err = j.Abort()
	case "end":
		_, err = j.End()
	default:
		err = fmt.Errorf("unknown op %q", op)
	}
	return err
}

// snapshot is the part of the journal state a crash must preserve.
type snapshot struct {
	Open     bool
	Phase    journal.Phase
	Status   string
	Attempts int
	Seq      int64
	Next     string
}

func snap(t *testing.T, dir string) snapshot {
	t.Helper()
	d, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	txn, err := journal.New(d).Load()
	if err != nil {
		t.Fatalf("the state dir does not read cleanly after a crash: %v", err)
	}
	if txn == nil {
		return snapshot{}
	}
	return snapshot{Open: true, Phase: txn.Phase, Status: txn.Status, Attempts: txn.Step(txn.Phase).Attempts, Seq: txn.Seq, Next: journal.Next(txn).Command}
}

func runJournalScript(dir string, from int, crashAt string) *exec.Cmd {
	cmd := exec.Command("journal-script")
	cmd.Env = append(os.Environ(), "KUBECTL_BUNDLE_STATE_DIR="+dir, "JOURNAL_FROM="+strconv.Itoa(from), state.EnvCrashAt+"="+crashAt)
	return cmd
}

func completedOps(out []byte) int {
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "ok ") {
			n++
		}
	}
	return n
}

// reference runs the whole sequence op by op and records the state after each.
func reference(t *testing.T) []snapshot {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	d, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var snaps []snapshot
	for _, op := range journalOps {
		if err := runOp(d, op); err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		snaps = append(snaps, snap(t, dir))
	}
	return snaps
}

// checkAfterCrash asserts the crash invariants: the journal reads cleanly
// and is exactly the state before or after the interrupted op; history has
// every completed op's line, in sequence; the lock is free; and after the
// next command's repair, history and transaction agree. It returns which
// op to resume from.
func checkAfterCrash(t *testing.T, dir string, k int, snaps []snapshot) int {
	t.Helper()
	got := snap(t, dir)
	before := snapshot{}
	if k > 0 {
		before = snaps[k-1]
	}
	resume := k
	switch {
	case got == before:
	case k < len(snaps) && got == snaps[k]:
		resume = k + 1
	default:
		t.Fatalf("after %d completed ops the journal is %+v: neither the state before (%+v) nor after (%+v) the interrupted op", k, got, before, snaps[min(k, len(snaps)-1)])
	}
	h, err := journal.ReadHistory(filepath.Join(dir, journal.Dir, journal.HistoryFile))
	if err != nil {
		t.Fatalf("history unreadable after a crash: %v", err)
	}
	if len(h.Events) < k {
		t.Fatalf("history lost complete lines: %d events after %d completed ops", len(h.Events), k)
	}
	for i, e := range h.Events {
		if e.Seq != int64(i+1) {
			t.Fatalf("history line %d has seq %d", i+1, e.Seq)
		}
	}
	d, _ := state.Open(dir)
	l, err := d.Lock()
	if err != nil {
		t.Fatalf("lock not free after the crash: %v", err)
	}
	if _, err := journal.New(d).Repair(); err != nil {
		t.Fatalf("repair: %v", err)
	}
	l.Unlock()
	if after := snap(t, dir); after != got {
		t.Fatalf("repair changed the transaction: %+v -> %+v", got, after)
	}
	h, _ = journal.ReadHistory(filepath.Join(dir, journal.Dir, journal.HistoryFile))
	if got.Open && h.Last().Seq != got.Seq {
		t.Fatalf("after repair history ends at seq %d, the transaction is at %d", h.Last().Seq, got.Seq)
	}
	return resume
}

func finishJournal(t *testing.T, dir string, from int, snaps []snapshot) {
	t.Helper()
	if out, err := runJournalScript(dir, from, "").CombinedOutput(); err != nil {
		t.Fatalf("resuming from op %d: %v\n%s", from, err, out)
	}
	if got, want := snap(t, dir), snaps[len(snaps)-1]; got != want {
		t.Fatalf("after resuming: %+v, want %+v", got, want)
	}
	h, _ := journal.ReadHistory(filepath.Join(dir, journal.Dir, journal.HistoryFile))
	if len(h.Events) != len(journalOps) {
		t.Fatalf("history has %d events, want %d", len(h.Events), len(journalOps))
	}
}

// TestJournalCrashAtEveryWritePoint kills the child with SIGKILL at the
// 1st, 2nd, ... crash point it reaches, until one run completes.
func TestJournalCrashAtEveryWritePoint(t *testing.T) {
	t.Parallel()
	snaps := reference(t)
	for n := 1; ; n++ {
		dir := filepath.Join(t.TempDir(), "state")
		out, err := runJournalScript(dir, 0, "#"+strconv.Itoa(n)).Output()
		if err == nil {
			if n < 2*len(journalOps) {
				t.Fatalf("the run completed after only %d crash points", n-1)
			}
			t.Logf("killed at each of %d write points", n-1)
			return
		}
		if !killed(err) {
			t.Fatalf("crash point %d: %v", n, err)
		}
		k := completedOps(out)
		resume := checkAfterCrash(t, dir, k, snaps)
		finishJournal(t, dir, resume, snaps)
	}
}

// TestJournalCrashAtRandomInstants kills the child at random moments.
func TestJournalCrashAtRandomInstants(t *testing.T) {
	t.Parallel()
	snaps := reference(t)
	killAtRandom(t, 40, func(dir string) *exec.Cmd { return runJournalScript(dir, 0, "") }, func(dir string, out []byte) {
		k := completedOps(out)
		if k == len(journalOps) {
			return
		}
		resume := checkAfterCrash(t, dir, k, snaps)
		finishJournal(t, dir, resume, snaps)
	})
}

// TestJournalBeginRace: N processes begin at once; exactly one wins and the
// others exit 4 naming the winner (its pid while it holds the lock, its
// transaction once it has released it).
func TestJournalBeginRace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if _, err := state.Open(dir); err != nil {
		t.Fatal(err)
	}
	const n = 8
	type result struct {
		pid    int
		err    error
		stdout string
		stderr string
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			cmd := exec.Command("kubectl-bundle-journal", "--state-dir", dir, "begin", "--strategy", "in-place", "--package", strings.Repeat("cd", 32), "-o", "json")
			var so, se bytes.Buffer
			cmd.Stdout, cmd.Stderr = &so, &se
			<-gate
			err := cmd.Start()
			if err == nil {
				results[i].pid = cmd.Process.Pid
				err = cmd.Wait()
			}
			results[i].err, results[i].stdout, results[i].stderr = err, so.String(), se.String()
		}(i)
	}
	close(gate)
	wg.Wait()
	winners := 0
	var winnerPID int
	for _, r := range results {
		if r.err == nil {
			winners++
			winnerPID = r.pid
		}
	}
	if winners != 1 {
		t.Fatalf("%d processes began a transaction, want exactly 1: %+v", winners, results)
	}
	d, _ := state.Open(dir)
	txn, err := journal.New(d).Load()
	if err != nil || txn == nil {
		t.Fatalf("no transaction after the race: %v", err)
	}
	for _, r := range results {
		if r.err == nil {
			continue
		}
		var ee *exec.ExitError
		if !errors.As(r.err, &ee) || ee.ExitCode() != 4 {
			t.Fatalf("a loser exited %v, want 4: %s", r.err, r.stderr)
		}
		if !strings.Contains(r.stderr, txn.ID) && !strings.Contains(r.stderr, fmt.Sprintf("locked by pid %d ", winnerPID)) {
			t.Fatalf("a loser does not name the winner (pid %d, transaction %s): %s", winnerPID, txn.ID, r.stderr)
		}
	}
}
