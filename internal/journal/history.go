package journal

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

const noFollow = syscall.O_NOFOLLOW

// Event types in history.jsonl.
const (
	EventBegin = "begin"
	EventStep  = "step"
	EventAbort = "abort"
	EventEnd   = "end"
)

// Event is one line of history.jsonl.
type Event struct {
	Seq      int64     `json:"seq"`
	Time     time.Time `json:"time"`
	TxnID    string    `json:"txn"`
	Type     string    `json:"type"`
	Phase    Phase     `json:"phase,omitempty"`
	Status   string    `json:"status,omitempty"`
	Error    string    `json:"error,omitempty"`
	Strategy Strategy  `json:"strategy,omitempty"`
	Target   string    `json:"target,omitempty"`
	// Slot and Detail describe events of the slot binary's steps.
	Slot   string `json:"slot,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Package, Fallback and Slots are the begin event's rest of the
	// transaction, so that a damaged transaction.json can be rebuilt from
	// the history (kubectl bundle-journal repair).
	Package  string `json:"package,omitempty"`
	Fallback string `json:"fallback,omitempty"`
	Slots    *Slots `json:"slots,omitempty"`
	Gate     *Gate  `json:"gate,omitempty"`
	// Verify is the begin event's verification material (Transaction.Verify).
	Verify *Verification `json:"verify,omitempty"`
	// Identity is what a slot's create, adopt, repair or ownership event
	// says of the slot for good, so that losing its record loses none of
	// what decides its protection and its repair.
	Identity *SlotIdentity `json:"identity,omitempty"`
	// Step is the transaction step (TXN/PHASE) a plugin did this for,
	// when journal run ran it as that step's command: the proof that the
	// plugin, not another command, did what the step claims.
	Step string `json:"step,omitempty"`
}

// SlotIdentity is the durable part of a slot's record: which provider
// built it, the names it runs under (an adopted site's own, not derived
// ones), its context, and the workload clusters it owns after an S1
// (repoint) update. Histories written before it have none: their slots
// fall back to the settings.
type SlotIdentity struct {
	Provider      string   `json:"provider"`
	Cluster       string   `json:"cluster,omitempty"`
	Context       string   `json:"context,omitempty"`
	Kubeconfig    string   `json:"kubeconfig,omitempty"`
	Registry      string   `json:"registry,omitempty"`
	RegistryPort  int      `json:"registryPort,omitempty"`
	Inputs        string   `json:"inputs,omitempty"`
	Adopted       bool     `json:"adopted,omitempty"`
	Workloads     []string `json:"workloads,omitempty"`
	OwnsWorkloads []string `json:"ownsWorkloads,omitempty"`
	MovedIn       []string `json:"movedInWorkloads,omitempty"`
	MovedOut      []string `json:"movedOutWorkloads,omitempty"`
	// ClusterID is the identity of the cluster the slot's record names
	// (record.ClusterID): a record rebuilt from the history checks that
	// cluster, not the one its context happens to reach then.
	ClusterID *SlotClusterID `json:"clusterID,omitempty"`
}

// SlotClusterID is a slot's cluster identity as the history keeps it
// (the fields of record.ClusterID).
type SlotClusterID struct {
	Server        string `json:"server,omitempty"`
	KubeSystemUID string `json:"kubeSystemUID,omitempty"`
	NodeContainer string `json:"nodeContainer,omitempty"`
}

// History is history.jsonl as read.
type History struct {
	Events []Event
	// Torn is the last line when a crash cut it mid-append (no newline, or
	// not JSON); it is ignored, and the next mutating command removes it.
	Torn []byte
	// ValidBytes is the length of the complete lines.
	ValidBytes int64
}

// Last returns the last complete event, or nil.
func (h *History) Last() *Event {
	if len(h.Events) == 0 {
		return nil
	}
	return &h.Events[len(h.Events)-1]
}

// ReadHistory reads history.jsonl. A missing file is an empty history.
func ReadHistory(p string) (*History, error) {
	b, err := readNoFollow(p)
	if errors.Is(err, fs.ErrNotExist) {
		return &History{}, nil
	}
	if err != nil {
		return nil, historyCorrupt(p, err)
	}
	h, err := ParseHistory(b)
	if err != nil {
		return nil, historyCorrupt(p, err)
	}
	return h, nil
}

// readNoFollow reads the regular file p, not a symlink in its place.
func readNoFollow(p string) ([]byte, error) {
	return state.ReadFile(p, -1, true)
}

// historyCorrupt is a damaged history with its repair: keep every line
// that still reads as an event (the slots' identities, ownership and adopt
// marks live there for when a slot's record is lost) and set the damaged
// ones aside; transaction.json, the authority, keeps the open transaction.
func historyCorrupt(p string, err error) *CorruptError {
	return &CorruptError{Path: p, Err: err, Repair: advice.Do(repairOf(p)).Because("keeps its readable lines and sets the damaged ones aside (the damaged file is kept)")}
}

// OpenInHistory is the transaction the history shows begun and not ended,
// with the last phase it recorded, or nil.
func (h *History) OpenInHistory() *Event {
	var open *Event
	for i := range h.Events {
		ev := h.Events[i]
		// A history moved aside leaves a new one that starts with the
		// transaction's last step, not its begin.
		switch ev.Type {
		case EventBegin, EventStep, EventAbort:
			open = &ev
		case EventEnd:
			if open != nil && ev.TxnID == open.TxnID {
				open = nil
			}
		}
	}
	return open
}

// ParseHistory parses history.jsonl content: complete lines must be events
// in strictly increasing sequence; only the last line may be torn.
func ParseHistory(b []byte) (*History, error) {
	// A command reads the history several times, and each read after an
	// append is the last read plus lines: the complete lines parsed last
	// are not parsed again (parsed holds them and what they parsed to).
	parsed.Lock()
	defer parsed.Unlock()
	h, off, line := &History{}, int64(0), 0
	if n := len(parsed.raw); n > 0 && len(b) >= n && bytes.Equal(b[:n], parsed.raw) {
		h.Events = slices.Clone(parsed.events)
		off, line = int64(n), len(parsed.events)
	}
	h, err := parseHistoryFrom(h, b[off:], off, line)
	if err == nil {
		parsed.raw = append(parsed.raw[:0], b[:h.ValidBytes]...)
		parsed.events = slices.Clone(h.Events)
	}
	return h, err
}

// parsed is the last history ParseHistory parsed: its complete lines and
// their events (a copy: callers get their own slice).
var parsed struct {
	sync.Mutex
	raw    []byte
	events []Event
}

// parseHistoryFrom parses b, the content after off bytes and line lines
// already parsed into h.
func parseHistoryFrom(h *History, b []byte, off int64, line int) (*History, error) {
	for len(b) > 0 {
		line++
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			h.Torn = b
			break
		}
		raw := b[:i]
		var ev Event
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ev); err != nil || dec.More() {
			if len(b) == i+1 && !json.Valid(raw) {
				// The last line is complete but not JSON: a torn write
				// that happened to end in a newline byte.
				h.Torn = raw
				break
			}
			return nil, fmt.Errorf("line %d is not a journal event: %q", line, truncate(string(raw), 120))
		}
		if ev.Seq < 1 || ev.TxnID == "" || ev.Type == "" {
			return nil, fmt.Errorf("line %d: event without seq, txn or type", line)
		}
		if l := h.Last(); l != nil && ev.Seq <= l.Seq {
			return nil, fmt.Errorf("line %d: seq %d does not follow %d", line, ev.Seq, l.Seq)
		}
		h.Events = append(h.Events, ev)
		off += int64(i + 1)
		b = b[i+1:]
	}
	h.ValidBytes = off
	return h, nil
}

// SalvageHistory keeps what can be read of history.jsonl content that
// ParseHistory refuses: the most complete lines, in file order, that are
// events in strictly increasing sequence (a line edited out of order costs
// that line, not the ones after it). It returns the kept lines as content,
// their history, and the 1-based numbers of the lines it leaves out
// (damaged, out of order, or a torn tail).
func SalvageHistory(b []byte) (kept []byte, h *History, damaged []int) {
	type cand struct {
		line int
		raw  []byte
		ev   Event
	}
	var cands []cand
	line := 0
	for len(b) > 0 {
		line++
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			damaged = append(damaged, line)
			break
		}
		raw := b[:i]
		b = b[i+1:]
		var ev Event
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ev); err != nil || dec.More() || ev.Seq < 1 || ev.TxnID == "" || ev.Type == "" {
			damaged = append(damaged, line)
			continue
		}
		cands = append(cands, cand{line: line, raw: raw, ev: ev})
	}
	// The longest strictly increasing run of seq (patience sorting):
	// tails[k] is the candidate ending the best run of length k+1.
	var tails []int
	prev := make([]int, len(cands))
	for i, c := range cands {
		k, _ := slices.BinarySearchFunc(tails, c.ev.Seq, func(t int, seq int64) int { return cmp.Compare(cands[t].ev.Seq, seq) })
		prev[i] = -1
		if k > 0 {
			prev[i] = tails[k-1]
		}
		if k == len(tails) {
			tails = append(tails, i)
		} else {
			tails[k] = i
		}
	}
	keep := make([]bool, len(cands))
	if len(tails) > 0 {
		for i := tails[len(tails)-1]; i >= 0; i = prev[i] {
			keep[i] = true
		}
	}
	h = &History{}
	for i, c := range cands {
		if !keep[i] {
			damaged = append(damaged, c.line)
			continue
		}
		kept = append(append(kept, c.raw...), '\n')
		h.Events = append(h.Events, c.ev)
	}
	slices.Sort(damaged)
	h.ValidBytes = int64(len(kept))
	return kept, h, damaged
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// appendEvent appends one line and fsyncs it. A torn tail left by a crash
// is cut first, so that a complete line never follows a broken one.
func appendEvent(p string, ev Event) error {
	h, err := ReadHistory(p)
	if err != nil {
		return err
	}
	return appendEventTo(p, h, ev)
}

// appendEventTo is appendEvent to the history h as just read (under the
// lock, nothing else appended since).
func appendEventTo(p string, h *History, ev Event) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	if h.Torn != nil {
		if err := truncateTo(p, h.ValidBytes); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE|noFollow, state.FileMode)
	if err != nil {
		return fmt.Errorf("opening %s: %w", p, err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("appending to %s: %w", p, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("syncing %s: %w", p, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := state.SyncDir(filepath.Dir(p)); err != nil {
		return err
	}
	// The mark lets the next command tell a history cut from outside from
	// one a crash cut mid-append (the mark lags the history by at most
	// this one line).
	return writeMark(filepath.Dir(p), mark{Seq: ev.Seq, Bytes: h.ValidBytes + int64(len(b)) + 1})
}

func truncateTo(p string, n int64) error {
	if err := os.Truncate(p, n); err != nil {
		return fmt.Errorf("removing the torn tail of %s: %w", p, err)
	}
	return nil
}
