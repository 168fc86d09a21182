package journal

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// plugin is kubectl bundle-NAME ARGS acting, from anywhere, on the state
// dir that holds the journal file p.
func plugin(p, name string, args ...string) advice.Cmd {
	return advice.Plugin(name, args...).WithEnv(state.CommandEnvOf(filepath.Dir(filepath.Dir(p))))
}

// repairOf is the journal's repair (state.Dir.Repair) for the state dir that holds the journal
// file p (journal/NAME), as a value that runs there from anywhere.
func repairOf(p string) advice.Cmd {
	return pluginOf(p, "journal", "repair")
}

// pluginOf is a plugin command acting on the state dir of p, a file of
// the journal dir (naming the state dir where it is relative).
func pluginOf(p, name string, args ...string) advice.Cmd {
	return advice.Plugin(name, args...).WithEnv(state.CommandEnvOf(filepath.Dir(filepath.Dir(p))))
}

// eventRepair is the history event that acknowledges lines lost from it.
const eventRepair = "repair"

// MarkFile records the sequence number and length of the history after
// its last append.
const MarkFile = "history.mark"

type mark struct {
	Seq   int64 `json:"seq"`
	Bytes int64 `json:"bytes"`
}

// readMark returns the mark, nil when there is none or it does not parse
// (it is a check, rewritten by the next append).
func readMark(dir string) *mark {
	b, err := state.ReadSmall(filepath.Join(dir, MarkFile), 4096)
	if err != nil {
		return nil
	}
	var m mark
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return &m
}

func writeMark(dir string, m mark) error {
	b, _ := json.Marshal(m)
	return state.WriteFile(filepath.Join(dir, MarkFile), append(b, '\n'))
}

// HistoryLossError is a history that lost lines no crash can lose: cut or
// emptied from outside. It is never restored silently.
type HistoryLossError struct {
	Path string
	// Lines and Bytes are what was lost; FromSeq..ToSeq the events.
	Lines, Bytes   int64
	FromSeq, ToSeq int64
	Txn            *Transaction
	// Open is the history's last event of a transaction it shows begun
	// and not ended while transaction.json holds none (its end may have
	// been cut).
	Open *Event
}

func (e *HistoryLossError) Error() string {
	return fmt.Sprintf("%s lost %d line(s) (%d bytes; events #%d-#%d) that no crash can lose: something outside kubectl-bundle cut it; %s; acknowledge the loss (it is recorded in the history, and the open transaction's last step is restored): %s",
		e.Path, e.Lines, e.Bytes, e.FromSeq, e.ToSeq, e.note(), repairOf(e.Path))
}

func (e *HistoryLossError) note() string {
	if e.Txn == nil {
		if e.Open != nil {
			return fmt.Sprintf("no transaction is open in %s, and the history shows transaction %s begun and not ended (last recorded: %s %s): its end may be among the lost lines", TransactionFile, e.Open.TxnID, e.Open.Phase, e.Open.Status)
		}
		return "no transaction is open in " + TransactionFile
	}
	return fmt.Sprintf("transaction %s (%s) is kept in %s, in phase %s (%s)", e.Txn.ID, e.Txn.Strategy, TransactionFile, e.Txn.Phase, e.Txn.Status)
}

// Meaning says what the cut means for the site and what the repair does,
// for journal status.
func (e *HistoryLossError) Meaning() string {
	lost := fmt.Sprintf("the audit log no longer tells events #%d-#%d (transaction steps and ends, slot creates and destroys, --force overrides, the slots' identities)", e.FromSeq, e.ToSeq)
	switch {
	case e.Txn != nil:
		return fmt.Sprintf("%s; transaction %s is kept in %s, the authority, so the update can go on: %s records the loss in the history and restores the transaction's last step there, then the transaction's own next command applies",
			lost, e.Txn.ID, TransactionFile, repairOf(e.Path))
	case e.Open != nil:
		return fmt.Sprintf("%s; no transaction is open in %s, but what is left of the history shows transaction %s begun and not ended: its end may be among the lost lines; %s records the loss, then check its slots (%s; %s) and close it in the history (%s)",
			lost, TransactionFile, e.Open.TxnID, repairOf(e.Path), plugin(e.Path, "slot", "list"), plugin(e.Path, "switch", "status"), plugin(e.Path, "journal", "abort", "--force"))
	}
	return fmt.Sprintf("%s; no transaction is open in %s, the authority, so no update is in progress; %s records the loss in the history so that every command can go on",
		lost, TransactionFile, repairOf(e.Path))
}

// ErrorKind: a cut history is state that does not allow the step.
func (e *HistoryLossError) ErrorKind() errkind.Kind { return errkind.Environment }

// loss compares h with the mark and with t: a history shorter than its
// mark, or missing more than the last transition of t (the one line a
// crash between the two writes loses), lost lines.
func (j *Journal) loss(h *History, t *Transaction) *HistoryLossError {
	return j.lossWith(h, t, readMark(j.dir.Join(Dir)))
}

func (j *Journal) lossWith(h *History, t *Transaction, m *mark) *HistoryLossError {
	var last int64
	if l := h.Last(); l != nil {
		last = l.Seq
	}
	e := &HistoryLossError{Path: j.histPath(), Txn: t, FromSeq: last + 1}
	if t == nil {
		e.Open = h.OpenInHistory()
	}
	if m != nil && (last < m.Seq || h.ValidBytes < m.Bytes) {
		e.ToSeq, e.Bytes = m.Seq, max(0, m.Bytes-h.ValidBytes)
	}
	if t != nil && last < t.Seq-1 {
		e.ToSeq = max(e.ToSeq, t.Seq-1)
	}
	if e.ToSeq < e.FromSeq && e.Bytes == 0 {
		return nil
	}
	e.Lines = max(0, e.ToSeq-last)
	if e.ToSeq < e.FromSeq {
		e.FromSeq, e.ToSeq = last, last
	}
	return e
}

// CutHistory reports lines cut from the history from outside (what every
// mutating command stops on until journal repair acknowledges them), nil
// when none are. It takes no lock: the mark is read before and after the
// transaction and the history (every writer writes the mark last), and a
// mark that moved in between means a command was writing, so it reads
// again.
func (j *Journal) CutHistory() (*HistoryLossError, error) {
	dir := j.dir.Join(Dir)
	for range 5 {
		before := readMark(dir)
		t, h, err := j.loadWithHistory()
		if err != nil {
			return nil, err
		}
		if after := readMark(dir); (before == nil) != (after == nil) || (before != nil && *before != *after) {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		return j.lossWith(h, t, before), nil
	}
	return nil, nil
}

func txnCorrupt(p string, err error) *CorruptError {
	return &CorruptError{Path: p, Err: err, Repair: advice.Do(repairOf(p)).Because("rebuilds it from the history (the damaged file is kept aside)")}
}

// RecordRepair records in the history a repair done outside the journal's
// files (detail says what it did). The caller holds the lock.
func (j *Journal) RecordRepair(detail string) error {
	return j.Record(Event{Type: eventRepair, Detail: detail, Status: StatusDone})
}

// RepairDamage repairs what something outside kubectl-bundle did to the
// journal, saying each thing it did: a history that does not parse keeps
// its readable lines and sets the damaged ones aside (salvageHistory); an
// unreadable transaction.json is moved aside and
// rebuilt from the history's events of the open transaction, and a missing
// one rebuilt the same way (or, when the history cannot tell it, left to
// abort --force); lines cut from the
// history are acknowledged in a repair event, after the open
// transaction's last step is restored. The caller holds the lock.
func (j *Journal) RepairDamage() ([]string, error) {
	if _, err := j.dir.MkdirAll(Dir); err != nil {
		return nil, err
	}
	var did []string
	h, herr := ReadHistory(j.histPath())
	var histDetail string
	if herr != nil {
		why := herr
		var ce *CorruptError
		if errors.As(herr, &ce) {
			why = ce.Err
		}
		var said string
		var err error
		h, said, histDetail, err = j.salvageHistory(why)
		if err != nil {
			return did, err
		}
		did = append(did, said)
	}
	t, terr := j.loadFile()
	if terr == nil && t == nil && herr == nil {
		// Removed from outside while the history shows it open: rebuilt
		// from the history when it reaches back to the begin (else Load's
		// error says abort --force).
		if rt := j.rebuildLost(h); rt != nil {
			if err := j.writeRebuilt(rt); err != nil {
				return did, err
			}
			t = rt
			did = append(did, fmt.Sprintf("rebuilt the missing %s of transaction %s (%s) from the history: phase %s (%s)", TransactionFile, rt.ID, rt.Strategy, rt.Phase, rt.Status))
		}
	}
	if terr != nil {
		aside, err := state.MoveAside(j.txnPath())
		if err != nil {
			return did, err
		}
		t = nil
		open := h.OpenInHistory()
		switch rt := rebuild(h, open); {
		case rt != nil:
			if err := j.writeRebuilt(rt); err != nil {
				return did, err
			}
			t = rt
			did = append(did, fmt.Sprintf("rebuilt %s of transaction %s (%s) from the history: phase %s (%s); the damaged file is kept at %s", TransactionFile, rt.ID, rt.Strategy, rt.Phase, rt.Status, aside))
		case open != nil:
			did = append(did, fmt.Sprintf("moved the unreadable %s aside to %s; the history shows transaction %s open (last recorded: %s %s) but not its begin, so it cannot be rebuilt: check its slots, then close it: %s", TransactionFile, aside, open.TxnID, open.Phase, open.Status, j.dir.Plugin("journal", "abort", "--force")))
		case herr != nil:
			did = append(did, fmt.Sprintf("moved the unreadable %s aside to %s; with the history unreadable too, whether a transaction was open cannot be told: check the slots (%s; %s)", TransactionFile, aside, j.dir.Plugin("slot", "list"), j.dir.Plugin("switch", "status")))
		default:
			did = append(did, fmt.Sprintf("moved the unreadable %s aside to %s; the history shows no transaction open", TransactionFile, aside))
		}
	}
	if loss := j.loss(h, t); loss != nil || herr != nil {
		var last int64
		if l := h.Last(); l != nil {
			last = l.Seq
		}
		next := last + 1
		if t != nil && last < t.Seq {
			if err := appendEvent(j.histPath(), t.LastEvent); err != nil {
				return did, err
			}
			did = append(did, fmt.Sprintf("restored the last step of transaction %s (#%d %s %s) to the history", t.ID, t.Seq, t.LastEvent.Phase, t.LastEvent.Status))
			next = t.Seq + 1
		}
		var details []string
		if herr != nil {
			details = append(details, histDetail)
		}
		if loss != nil {
			details = append(details, fmt.Sprintf("%s lost %d line(s) (%d bytes; events #%d-#%d), acknowledged", HistoryFile, loss.Lines, loss.Bytes, loss.FromSeq, loss.ToSeq))
			next = max(next, loss.ToSeq+1)
		}
		detail := strings.Join(details, "; ")
		ev := Event{Seq: next, Time: j.now(), TxnID: NoTransaction, Type: eventRepair, Detail: detail, Status: StatusDone}
		if t != nil {
			ev.TxnID = t.ID
		}
		if err := appendEvent(j.histPath(), ev); err != nil {
			return did, err
		}
		if loss != nil {
			did = append(did, "recorded in the history: "+detail+"; "+loss.note())
		} else {
			did = append(did, "recorded in the history: "+detail)
		}
	}
	note, err := j.Repair()
	if note != "" {
		did = append(did, note)
	}
	return did, err
}

// salvageHistory repairs a history that does not parse (why): the damaged
// file is kept aside as it is, and the history keeps every line that still
// reads as an event, so that the slots' identities, ownership and adopt
// marks recorded there survive the repair; only the damaged lines are left
// out, by number. A history that cannot be read at all (not a file, no
// permission) is moved aside and a new one starts. It returns the history
// now in place, what it did, and the detail the history records.
func (j *Journal) salvageHistory(why error) (h *History, said, detail string, err error) {
	p := j.histPath()
	b, rerr := readNoFollow(p)
	if rerr != nil {
		aside, err := state.MoveAside(p)
		if err != nil {
			return nil, "", "", err
		}
		return &History{}, fmt.Sprintf("moved the unreadable %s aside to %s (%v)", HistoryFile, aside, why),
			"the history was unreadable and was moved aside: a new history starts here", nil
	}
	kept, h, damaged := SalvageHistory(b)
	aside := state.AsideName(p)
	if err := state.WriteFile(aside, b); err != nil {
		return nil, "", "", fmt.Errorf("keeping the damaged %s: %w", HistoryFile, err)
	}
	// The mark follows the kept lines (the damaged ones are accounted
	// for here); its sequence stays, so that lines missing at the end are
	// still acknowledged as lost. It is written before the history: a crash
	// in between leaves the history damaged, and the repair runs again.
	if m := readMark(j.dir.Join(Dir)); m != nil {
		if err := writeMark(j.dir.Join(Dir), mark{Seq: m.Seq, Bytes: h.ValidBytes}); err != nil {
			return nil, "", "", err
		}
	}
	if err := state.WriteFile(p, kept); err != nil {
		return nil, "", "", err
	}
	lines := lineList(damaged)
	said = fmt.Sprintf("kept the %d readable line(s) of %s and set aside %d damaged line(s) (%s; %v); the damaged file is kept at %s",
		len(h.Events), HistoryFile, len(damaged), lines, why, aside)
	detail = fmt.Sprintf("%s had %d damaged line(s) (%s), set aside to %s; its %d readable line(s) are kept", HistoryFile, len(damaged), lines, aside, len(h.Events))
	return h, said, detail, nil
}

// lineList names line numbers, the first ten of them.
func lineList(n []int) string {
	s := make([]string, 0, min(len(n), 10))
	for _, l := range n[:min(len(n), 10)] {
		s = append(s, strconv.Itoa(l))
	}
	out := "line " + strings.Join(s, ", ")
	if len(n) > 1 {
		out = "lines " + strings.Join(s, ", ")
	}
	if len(n) > 10 {
		out += fmt.Sprintf(" and %d more", len(n)-10)
	}
	return out
}

// rebuildLost is the transaction a missing transaction.json held, rebuilt
// from h: nil when h shows none open, does not reach back to its begin, or
// lost lines (its end may be among them: a closed transaction would come
// back to life).
func (j *Journal) rebuildLost(h *History) *Transaction {
	if j.loss(h, nil) != nil {
		return nil
	}
	open := h.OpenInHistory()
	if open == nil {
		return nil
	}
	// A loss acknowledged since the transaction began is the same: a cut
	// history loses its tail, where its end may have been.
	if cutSinceBegin(h, open.TxnID) {
		return nil
	}
	return rebuild(h, open)
}

// cutSinceBegin reports whether h acknowledges a loss (a repair event)
// after transaction id began.
func cutSinceBegin(h *History, id string) bool {
	begun := false
	for _, ev := range h.Events {
		begun = begun || (ev.TxnID == id && ev.Type == EventBegin)
		if begun && ev.Type == eventRepair {
			return true
		}
	}
	return false
}

// CutSinceBegin reports whether the history acknowledges a loss of lines
// while transaction id was open: a repair after its begin, or one recorded
// under its id (its begin may be among the lines lost).
func (h *History) CutSinceBegin(id string) bool {
	if cutSinceBegin(h, id) {
		return true
	}
	for _, ev := range h.Events {
		if ev.Type == eventRepair && ev.TxnID == id {
			return true
		}
	}
	return false
}

// writeRebuilt writes rt, rebuilt from the history, as transaction.json.
func (j *Journal) writeRebuilt(rt *Transaction) error {
	b, _ := json.MarshalIndent(rt, "", "  ")
	if _, err := ParseTransaction(b); err != nil {
		return fmt.Errorf("rebuilding %s from the history: %w", TransactionFile, err)
	}
	return state.WriteFile(j.txnPath(), append(b, '\n'))
}

// rebuild is the open transaction as its history events tell it, nil when
// they do not reach back to its begin.
func rebuild(h *History, open *Event) *Transaction {
	if open == nil {
		return nil
	}
	var t *Transaction
	for _, ev := range h.Events {
		if ev.TxnID != open.TxnID {
			continue
		}
		at := ev.Time
		switch ev.Type {
		case EventBegin:
			t = &Transaction{APIVersion: APIVersion, Kind: KindTransaction, ID: ev.TxnID, Strategy: ev.Strategy, Target: ev.Target,
				Package: ev.Package, Fallback: ev.Fallback, Gate: ev.Gate, Verify: ev.Verify, Phase: Begun, Status: StatusDone, CreatedAt: at,
				Steps: []Step{{Phase: Begun, Status: StatusDone, Attempts: 1, StartedAt: at, EndedAt: &at}}}
			if ev.Slots != nil {
				t.Slots = *ev.Slots
			}
		case EventStep, EventAbort:
			if t == nil {
				return nil
			}
			s := t.Step(ev.Phase)
			switch {
			case ev.Status == StatusStarted && s != nil && t.Phase == ev.Phase:
				s.Status, s.Attempts, s.StartedAt, s.EndedAt, s.Error = StatusStarted, s.Attempts+1, at, nil, ""
			case ev.Status == StatusStarted || s == nil || t.Phase != ev.Phase:
				t.Steps = append(t.Steps, Step{Phase: ev.Phase, Status: ev.Status, Attempts: 1, StartedAt: at})
				s = &t.Steps[len(t.Steps)-1]
				if ev.Status != StatusStarted {
					s.EndedAt = &at
				}
			default:
				s.Status, s.EndedAt, s.Error = ev.Status, &at, ev.Error
			}
			if ev.Status == StatusFailed {
				t.LastError = fmt.Sprintf("%s: %s", ev.Phase, ev.Error)
			}
			t.Phase, t.Status = ev.Phase, ev.Status
		default:
			continue
		}
		if t != nil {
			t.Seq, t.UpdatedAt, t.LastEvent = ev.Seq, at, ev
		}
	}
	return t
}
