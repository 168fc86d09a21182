// Package journal is the crash-safe record of the one update transaction a
// site may have open: its phases, their times and attempts, and the history
// of every transition. Every write is atomic; a crash at any instant leaves
// the state before or after that write, and the next command repairs the
// audit log to match.
package journal

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// File names under the state dir.
const (
	Dir             = "journal"
	TransactionFile = "transaction.json"
	HistoryFile     = "history.jsonl"
	// MaxTransactionSize caps transaction.json.
	MaxTransactionSize = 1 << 20
)

// API identity of the transaction record.
const (
	APIVersion      = "kubectl-bundle.dev/v1alpha1"
	KindTransaction = "Transaction"
)

// Step statuses.
const (
	StatusStarted = "started"
	StatusDone    = "done"
	StatusFailed  = "failed"
)

// Journal reads and writes the journal in one state dir. Mutating methods
// require the caller to hold the state lock for its whole run.
type Journal struct {
	dir *state.Dir
	now func() time.Time
}

// New returns the journal of a state dir.
func New(d *state.Dir) *Journal {
	return &Journal{dir: d, now: func() time.Time { return time.Now().UTC() }}
}

func (j *Journal) txnPath() string  { return j.dir.Join(Dir, TransactionFile) }
func (j *Journal) histPath() string { return j.dir.Join(Dir, HistoryFile) }

// Load returns the open transaction, or nil when none is open. A
// transaction whose end reached the history but whose file a crash left
// behind counts as ended.
func (j *Journal) Load() (*Transaction, error) {
	t, _, err := j.LoadAndHistory()
	return t, err
}

// LoadAndHistory is Load with the history it read to decide (nil when the
// history was not read or did not parse): a reader of the whole state dir
// reads the history once.
func (j *Journal) LoadAndHistory() (*Transaction, *History, error) {
	t, h, err := j.loadWithHistory()
	if err != nil {
		return nil, h, err
	}
	if t == nil {
		if open := h.OpenInHistory(); open != nil {
			return nil, h, &LostError{Path: j.txnPath(), Open: *open, Rebuildable: j.rebuildLost(h) != nil, Cut: cutSinceBegin(h, open.TxnID)}
		}
		return nil, h, nil
	}
	if last := h.Last(); last != nil && last.Seq > t.Seq && last.TxnID == t.ID && last.Type == EventEnd {
		return nil, h, nil
	}
	return t, h, nil
}

// loadWithHistory reads transaction.json (nil when there is none) and the
// history, as they are.
func (j *Journal) loadWithHistory() (*Transaction, *History, error) {
	t, err := j.loadFile()
	if err != nil {
		return nil, nil, err
	}
	h, err := ReadHistory(j.histPath())
	if err != nil {
		return nil, nil, err
	}
	return t, h, nil
}

func (j *Journal) loadFile() (*Transaction, error) {
	p := j.txnPath()
	b, err := state.ReadFile(p, MaxTransactionSize, true)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, txnCorrupt(p, err)
	}
	t, err := ParseTransaction(b)
	if err != nil {
		return nil, txnCorrupt(p, err)
	}
	return t, nil
}

// Repair reconciles the transaction file and the history after a crash
// between the two writes of one operation. Mutating commands call it first,
// under the lock.
func (j *Journal) Repair() (repaired string, err error) {
	if _, err := j.dir.MkdirAll(Dir); err != nil {
		return "", err
	}
	h, err := ReadHistory(j.histPath())
	if err != nil {
		return "", err
	}
	t, terr := j.loadFile()
	// Lines a crash cannot lose (more than the last one, or below the
	// mark) are never restored silently: the operator acknowledges them.
	if loss := j.loss(h, t); loss != nil {
		return "", loss
	}
	if h.Torn != nil {
		if err := truncateTo(j.histPath(), h.ValidBytes); err != nil {
			return "", err
		}
		repaired = fmt.Sprintf("removed a torn last line from %s (a crash cut it mid-append)", HistoryFile)
	}
	if terr != nil || t == nil {
		return repaired, terr
	}
	last := h.Last()
	switch {
	case last != nil && last.Seq > t.Seq && last.TxnID == t.ID && last.Type == EventEnd:
		if err := os.Remove(j.txnPath()); err != nil {
			return repaired, fmt.Errorf("finishing the end of transaction %s: %w", t.ID, err)
		}
		return join(repaired, fmt.Sprintf("finished ending transaction %s (a crash interrupted it)", t.ID)), state.SyncDir(j.dir.Join(Dir))
	case last == nil || last.Seq < t.Seq:
		if err := appendEvent(j.histPath(), t.LastEvent); err != nil {
			return repaired, err
		}
		return join(repaired, fmt.Sprintf("restored history line %d (a crash lost it)", t.LastEvent.Seq)), nil
	}
	return repaired, nil
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// BeginOptions start a transaction.
type BeginOptions struct {
	Strategy Strategy
	Target   string // package digest
	Package  string // the path the operator named, if any
	Fallback string
	Slots    Slots
	// Gate is the script's gate, carried by the next command (nil: none).
	Gate *Gate
	// Verify is the script's verification material, carried by the next
	// command (nil: none given).
	Verify *Verification
	// SwitchMode is the blue-green switch mode the operator chose.
	SwitchMode string
}

// Begin opens a transaction. With one already open it fails with a
// *ConflictError naming it and its next command.
func (j *Journal) Begin(o BeginOptions) (*Transaction, error) {
	if err := j.RefuseIfOpen(); err != nil {
		return nil, err
	}
	seq, _, err := j.nextSeq()
	if err != nil {
		return nil, err
	}
	now := j.now()
	id := newID(now)
	t := &Transaction{APIVersion: APIVersion, Kind: KindTransaction, ID: id, Strategy: o.Strategy, Target: o.Target,
		Package: o.Package, Fallback: o.Fallback, Slots: o.Slots, Gate: o.Gate, Verify: o.Verify, SwitchMode: o.SwitchMode, Phase: Begun, Status: StatusDone,
		Steps:     []Step{{Phase: Begun, Status: StatusDone, Attempts: 1, StartedAt: now, EndedAt: &now}},
		CreatedAt: now}
	slots := o.Slots
	ev := Event{Type: EventBegin, Phase: Begun, Status: StatusDone, Strategy: o.Strategy, Target: o.Target,
		Package: o.Package, Fallback: o.Fallback, Slots: &slots, Gate: o.Gate, Verify: o.Verify}
	return t, j.commit(t, seq, ev)
}

// RefuseIfOpen fails with a *ConflictError naming the open transaction and
// its next command, if one is open, so that begin can check it before its
// other preconditions.
func (j *Journal) RefuseIfOpen() error {
	t, err := j.Load()
	if err != nil || t == nil {
		return err
	}
	return &ConflictError{Msg: fmt.Sprintf("transaction %s (%s) is already open in phase %s (%s); next: %s",
		t.ID, t.Strategy, t.Phase, t.Status, j.nextLine(t))}
}

// nextLine is t's next command as a line that acts on this state dir
// from anywhere.
func (j *Journal) nextLine(t *Transaction) string {
	next := Next(t)
	if !next.Run.IsZero() {
		return next.Run.WithEnv(j.dir.CommandEnv()).String()
	}
	return next.Command
}

// nextSeq is the sequence number of the next event, and the history it
// read: appendEventTo appends to it without reading it again.
func (j *Journal) nextSeq() (int64, *History, error) {
	h, err := ReadHistory(j.histPath())
	if err != nil {
		return 0, nil, err
	}
	if l := h.Last(); l != nil {
		return l.Seq + 1, h, nil
	}
	return 1, h, nil
}

// commit writes one transition: transaction.json first (the authority),
// then its history line.
func (j *Journal) commit(t *Transaction, seq int64, ev Event) error {
	// Events recorded by Record (slot and switch steps) share the sequence.
	next, h, err := j.nextSeq()
	if err != nil {
		return err
	}
	seq = max(seq, next)
	now := j.now()
	ev.Seq, ev.Time, ev.TxnID = seq, now, t.ID
	t.Seq, t.UpdatedAt, t.LastEvent = seq, now, ev
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	if _, err := j.dir.MkdirAll(Dir); err != nil {
		return err
	}
	state.CrashPoint("journal:before-transaction")
	if err := state.WriteFile(j.txnPath(), append(b, '\n')); err != nil {
		return err
	}
	state.CrashPoint("journal:before-history")
	if err := appendEventTo(j.histPath(), h, ev); err != nil {
		return err
	}
	state.CrashPoint("journal:after-history")
	return nil
}

// NoTransaction is the txn of events recorded while none is open.
const NoTransaction = "-"

// Record appends an event that is not a phase transition (a slot's
// provider step) to the history, under the open transaction's id if there
// is one. The caller holds the lock and has called Repair.
func (j *Journal) Record(ev Event) error {
	if _, err := j.dir.MkdirAll(Dir); err != nil {
		return err
	}
	seq, h, err := j.nextSeq()
	if err != nil {
		return err
	}
	t, err := j.loadFile()
	if err != nil {
		return err
	}
	ev.Seq, ev.Time, ev.TxnID = seq, j.now(), NoTransaction
	if t != nil {
		ev.TxnID = t.ID
	}
	return appendEventTo(j.histPath(), h, ev)
}

func (j *Journal) open() (*Transaction, error) {
	t, err := j.Load()
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, &ConflictError{Msg: NoTransactionMsg(j.dir)}
	}
	return t, nil
}

// Legal returns the phases that may be started next.
func Legal(t *Transaction) []Phase {
	var out []Phase
	if IsFinal(t.Phase) {
		if t.Status == StatusDone {
			return nil
		}
		return []Phase{t.Phase} // a final step's command (retiring a slot) is redone too
	}
	if t.Status != StatusDone {
		out = append(out, t.Phase) // a step started but not finished is redone
		for _, p := range transitions[t.Strategy][t.Phase] {
			if recovery[p] {
				out = append(out, p)
			}
		}
		return out
	}
	return append(out, transitions[t.Strategy][t.Phase]...)
}

// Start records that phase p started. Starting the current phase again is
// a retry (attempts grows); anything else must be a legal next phase.
func (j *Journal) Start(p Phase) (*Transaction, error) {
	t, err := j.open()
	if err != nil {
		return nil, err
	}
	if t.Phase == p && t.Status == StatusDone {
		return t, nil // already done: idempotent for a resumed script
	}
	if !slices.Contains(Legal(t), p) {
		return nil, j.illegal(t, "start", p)
	}
	now := j.now()
	if s := t.Step(p); s != nil && t.Phase == p {
		s.Status, s.Attempts, s.StartedAt, s.EndedAt, s.Error = StatusStarted, s.Attempts+1, now, nil, ""
	} else {
		t.Steps = append(t.Steps, Step{Phase: p, Status: StatusStarted, Attempts: 1, StartedAt: now})
	}
	t.Phase, t.Status = p, StatusStarted
	return t, j.commit(t, t.Seq+1, Event{Type: EventStep, Phase: p, Status: t.Status})
}

// Done records that the current phase p finished.
func (j *Journal) Done(p Phase) (*Transaction, error) {
	return j.finishStep(p, StatusDone, "")
}

// Fail records that the current phase p failed with msg.
func (j *Journal) Fail(p Phase, msg string) (*Transaction, error) {
	if msg == "" {
		msg = "failed"
	}
	return j.finishStep(p, StatusFailed, msg)
}

func (j *Journal) finishStep(p Phase, status, msg string) (*Transaction, error) {
	t, err := j.open()
	if err != nil {
		return nil, err
	}
	if t.Phase != p {
		return nil, j.illegal(t, status, p)
	}
	if t.Status == status && status == StatusDone {
		return t, nil
	}
	if t.Status != StatusStarted {
		return nil, &ConflictError{Msg: fmt.Sprintf("%s is %s, not started: it cannot be marked %s; legal next: %s",
			p, t.Status, status, phaseList(Legal(t)))}
	}
	now := j.now()
	s := t.Step(p)
	s.Status, s.EndedAt, s.Error = status, &now, msg
	t.Status = status
	if msg != "" {
		t.LastError = fmt.Sprintf("%s: %s", p, msg)
	}
	return t, j.commit(t, t.Seq+1, Event{Type: EventStep, Phase: p, Status: status, Error: msg})
}

// Reopen records that the current phase p, recorded done, is to be done
// again because what it claimed no longer holds (why): it is started
// again, as a retry (journal run reopens a step the slot does not bear
// out, and runs its command again).
func (j *Journal) Reopen(p Phase, why string) (*Transaction, error) {
	t, err := j.open()
	if err != nil {
		return nil, err
	}
	if t.Phase != p || t.Status != StatusDone {
		return nil, j.illegal(t, "reopen", p)
	}
	now := j.now()
	s := t.Step(p)
	s.Status, s.StartedAt, s.EndedAt, s.Error = StatusStarted, now, nil, ""
	t.Status = StatusStarted
	return t, j.commit(t, t.Seq+1, Event{Type: EventStep, Phase: p, Status: StatusStarted, Error: "done again: " + why})
}

// NoTransactionMsg says that d has no transaction open, and how one begins.
func NoTransactionMsg(d *state.Dir) string {
	return "no transaction in progress; start one with: " + d.Plugin("journal", "begin", "--strategy", "STRATEGY", "--package", "PATH|DIGEST").String()
}

func (j *Journal) illegal(t *Transaction, verb string, p Phase) error {
	return &ConflictError{Msg: fmt.Sprintf("cannot %s %s: transaction %s (%s) is in %s (%s); legal next: %s",
		verb, p, t.ID, t.Strategy, t.Phase, t.Status, phaseList(Legal(t)))}
}

func phaseList(ps []Phase) string {
	if len(ps) == 0 {
		return "none (the transaction is final: " + advice.Plugin("journal", "end").String() + ")"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = string(p)
	}
	return strings.Join(s, ", ")
}

// Abort records ABORTED where the strategy says aborting is safe, and
// returns the cleanup the operator must still run.
func (j *Journal) Abort() (*Transaction, []advice.Fix, error) { return j.abort(true) }

// AbortAbandoned closes, in any phase, an update in place whose slot no
// longer serves (site.MovedOff: a forced switch made another slot active):
// nothing it would still do can reach the slot that serves, so its abort
// loses nothing there; the slot it changed keeps what it left.
func (j *Journal) AbortAbandoned() (*Transaction, []advice.Fix, error) { return j.abort(false) }

func (j *Journal) abort(check bool) (*Transaction, []advice.Fix, error) {
	t, err := j.open()
	if err != nil {
		return nil, nil, err
	}
	if t.Phase == Aborted {
		return t, Cleanup(j.dir, t), nil
	}
	// With no previous package recorded there is nothing to restore or
	// rebuild: past its changing step, such an update can only be closed
	// (Abortable).
	if ok, why := Abortable(t); !ok && (check || t.Strategy == BlueGreen || IsFinal(t.Phase)) {
		return nil, nil, &ConflictError{Msg: fmt.Sprintf("cannot abort transaction %s in %s: %s; next: %s", t.ID, t.Phase, why, j.nextLine(t))}
	}
	cleanup := Cleanup(j.dir, t)
	now := j.now()
	t.Steps = append(t.Steps, Step{Phase: Aborted, Status: StatusDone, Attempts: 1, StartedAt: now, EndedAt: &now})
	t.Phase, t.Status = Aborted, StatusDone
	return t, cleanup, j.commit(t, t.Seq+1, Event{Type: EventAbort, Phase: Aborted, Status: StatusDone})
}

// AbortLost closes in the history the transaction whose transaction.json
// was removed from outside (a *LostError): it records its abort and end,
// so that the site can go on; the slots it touched are the operator's to
// check. It returns the history's last event of the transaction.
func (j *Journal) AbortLost() (*Event, error) {
	t, err := j.loadFile()
	if err != nil {
		return nil, err
	}
	if t != nil {
		return nil, &ConflictError{Msg: fmt.Sprintf("transaction %s has its file: --force closes only a transaction whose %s is lost; next: %s", t.ID, TransactionFile, j.nextLine(t))}
	}
	h, err := ReadHistory(j.histPath())
	if err != nil {
		return nil, err
	}
	open := h.OpenInHistory()
	if open == nil {
		return nil, &ConflictError{Msg: "no transaction in progress: nothing to abort"}
	}
	seq := h.Last().Seq + 1
	now := j.now()
	for i, typ := range []string{EventAbort, EventEnd} {
		ev := Event{Type: typ, Phase: Aborted, Status: StatusDone, Seq: seq + int64(i), Time: now, TxnID: open.TxnID}
		if err := appendEvent(j.histPath(), ev); err != nil {
			return nil, err
		}
	}
	return open, nil
}

// End closes a transaction that reached a final phase.
func (j *Journal) End() (*Transaction, error) {
	t, err := j.open()
	if err != nil {
		return nil, err
	}
	if !IsFinal(t.Phase) || t.Status != StatusDone {
		return nil, &ConflictError{Msg: fmt.Sprintf("transaction %s is in %s (%s), not a finished final phase; next: %s", t.ID, t.Phase, t.Status, j.nextLine(t))}
	}
	// Slot and switch events may have followed the last transition.
	seq, h, err := j.nextSeq()
	if err != nil {
		return nil, err
	}
	seq = max(seq, t.Seq+1)
	ev := Event{Type: EventEnd, Phase: t.Phase, Status: StatusDone, Seq: seq, Time: j.now(), TxnID: t.ID}
	// History first: once the end line is there the transaction is over,
	// and a crash before the removal is finished by the next command.
	state.CrashPoint("journal:before-end")
	if err := appendEventTo(j.histPath(), h, ev); err != nil {
		return nil, err
	}
	state.CrashPoint("journal:before-remove")
	if err := os.Remove(j.txnPath()); err != nil {
		return nil, fmt.Errorf("removing %s: %w", j.txnPath(), err)
	}
	return t, state.SyncDir(j.dir.Join(Dir))
}

func newID(now time.Time) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return now.Format("20060102-150405") + "-" + hex.EncodeToString(b)
}
