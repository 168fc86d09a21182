package model_test

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"time"
)

// The state dir as TestInvariant reads it: raw, so that damage does not
// stop the checker.

type rawRecord struct {
	Package *struct {
		Digest string `json:"digest"`
	} `json:"package"`
	Gate *struct {
		Passed  bool      `json:"passed"`
		Package string    `json:"package"`
		Time    time.Time `json:"time"`
	} `json:"gate"`
}

// readRegular reads a state file without following a symlink: exists
// false when there is none, ok false when it is not a readable regular
// file (damage).
func readRegular(p string) (b []byte, exists, ok bool) {
	fi, err := os.Lstat(p)
	if os.IsNotExist(err) {
		return nil, false, true
	}
	if err != nil || !fi.Mode().IsRegular() {
		return nil, true, false
	}
	b, err = os.ReadFile(p)
	return b, true, err == nil
}

func (r *seqRun) record(sl string) (*rawRecord, bool) {
	p := r.m.state("slots", sl+".json")
	b, exists, ok := readRegular(p)
	if !exists || !ok {
		return nil, false
	}
	rec := &rawRecord{}
	if json.Unmarshal(b, rec) != nil {
		return nil, false
	}
	return rec, true
}

// pointer reads the active pointer: ok false when it is damaged.
func (r *seqRun) pointer() (string, bool) {
	p := r.m.state("active")
	b, exists, ok := readRegular(p)
	if !exists || !ok {
		return "", ok
	}
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" || strings.ContainsAny(s, "\n\r") || !regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`).MatchString(s) {
		return "", false
	}
	return s, true
}

type rawTxn struct {
	ID       string `json:"id"`
	Strategy string `json:"strategy"`
	Fallback string `json:"fallback"`
	Target   string `json:"target"`
	Phase    string `json:"phase"`
	Status   string `json:"status"`
	Seq      int64  `json:"seq"`
	Slots    struct {
		Active    string `json:"active"`
		Candidate string `json:"candidate"`
	} `json:"slots"`
}

// txn reads transaction.json: nil, true when there is none; ok false when
// it is damaged.
func (r *seqRun) txn() (*rawTxn, bool) {
	p := r.m.state("journal", "transaction.json")
	b, exists, ok := readRegular(p)
	if !exists || !ok {
		return nil, ok
	}
	t := &rawTxn{}
	if json.Unmarshal(b, t) != nil || t.ID == "" {
		return nil, false
	}
	return t, true
}

// soaking reads switch.json: the previous slot while a switch soaks.
// With switch.json gone, the history's last switch not accepted or
// switched back keeps its previous slot (issue 32, class 5).
func (r *seqRun) soaking() (string, bool) {
	p := r.m.state("switch.json")
	b, exists, ok := readRegular(p)
	if !exists && ok {
		return r.historySoak(), true
	}
	if !exists || !ok {
		return "", ok
	}
	var sw struct {
		Phase    string `json:"phase"`
		Previous string `json:"previous"`
	}
	if json.Unmarshal(b, &sw) != nil {
		return "", false
	}
	if sw.Previous != "" && (sw.Phase == "SWITCHING" || sw.Phase == "SWITCHED" || sw.Phase == "SWITCHING_BACK") {
		return sw.Previous, true
	}
	return "", true
}

type histEvent struct {
	Seq    int64  `json:"seq"`
	TxnID  string `json:"txn"`
	Type   string `json:"type"`
	Phase  string `json:"phase"`
	Status string `json:"status"`
	Slot   string `json:"slot"`
	Detail string `json:"detail"`
}

// history reads the complete lines of history.jsonl (parsed again only
// when the file changed).
func (r *seqRun) history() []histEvent {
	b, err := os.ReadFile(r.m.state("journal", "history.jsonl"))
	if err != nil {
		return nil
	}
	if r.histRaw != nil && bytes.Equal(b, r.histRaw) {
		return r.histEvents
	}
	r.histRaw = b
	r.histEvents = parseHist(b)
	return r.histEvents
}

func parseHist(b []byte) []histEvent {
	var out []histEvent
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		var e histEvent
		if len(line) > 0 && line[len(line)-1] == '\n' && json.Unmarshal(line, &e) == nil {
			out = append(out, e)
		}
	}
	return out
}

// stillDamaged reports whether a target this sequence damaged still is.
func (r *seqRun) stillDamaged(target string) bool {
	switch target {
	case "active", "slots":
		a, ok := r.pointer()
		if !ok {
			return true
		}
		if a == "" {
			return r.lostPointer()
		}
		if _, ok := r.record(a); ok {
			return false
		}
		if target == "slots" && !r.createdPerHistory(a) {
			return false // the pointer's own damage (a destroyed slot) is the active target's
		}
		// A pointer to a slot with no record: damage, except while a
		// recreate of that slot rebuilds it.
		t, _ := r.txn()
		_, err := os.Lstat(r.m.state("slots", a+".json"))
		return !(os.IsNotExist(err) && t != nil && t.Strategy == "recreate" && t.Slots.Active == a)
	case "switch":
		_, ok := r.soaking()
		return !ok
	case "transaction":
		if _, err := os.Lstat(r.m.state("journal", "transaction.json")); os.IsNotExist(err) {
			// Missing while the history shows a transaction begun and
			// not ended: lost, not "none".
			open, _ := r.openInHistory()
			return open != ""
		}
		_, ok := r.txn()
		return !ok
	case "history":
		// Lines lost before the transaction's last one, or below the
		// history's mark when the journal keeps one (a torn last line is
		// what a crash leaves, and is repaired without asking).
		if _, err := os.Lstat(r.m.state("journal", "history.jsonl")); os.IsNotExist(err) {
			return false // moved aside: a new history starts from the transaction
		}
		h := r.history()
		var last int64
		if len(h) > 0 {
			last = h[len(h)-1].Seq
		}
		if b, err := os.ReadFile(r.m.state("journal", "history.mark")); err == nil {
			var m struct {
				Seq int64 `json:"seq"`
			}
			if json.Unmarshal(b, &m) == nil && last < m.Seq {
				return true
			}
		}
		t, ok := r.txn()
		return ok && t != nil && last < t.Seq-1
	}
	sl := strings.TrimPrefix(target, "slot-")
	p := r.m.state("slots", sl+".json")
	if _, err := os.Lstat(p); os.IsNotExist(err) {
		return false
	}
	_, ok := r.record(sl)
	return !ok
}

// lostPointer reports whether a missing pointer is damage: the switch
// record names a slot that exists (its record, or the history's create),
// other than a first switch interrupted before it wrote the pointer, or the
// history records a switch and a slot's record says it passed its gate.
func (r *seqRun) lostPointer() bool {
	if b, exists, ok := readRegular(r.m.state("switch.json")); exists && ok {
		var sw struct{ Phase, Target, Previous string }
		if json.Unmarshal(b, &sw) == nil && sw.Target != "" && !(sw.Phase == "SWITCHING" && sw.Previous == "") {
			if _, err := os.Lstat(r.m.state("slots", sw.Target+".json")); err == nil || r.createdPerHistory(sw.Target) {
				return true
			}
		}
	}
	switched := false
	for _, e := range r.history() {
		switched = switched || e.Type == "switch"
	}
	if !switched {
		return false // the first install between its gate and its switch
	}
	for _, sl := range []string{"a", "b"} {
		if rec, ok := r.record(sl); ok && rec.Gate != nil && rec.Gate.Passed {
			return true
		}
	}
	return false
}

// createdPerHistory reports whether the history's last create or destroy
// of slot sl is a create (its record removed from outside).
func (r *seqRun) createdPerHistory(sl string) bool {
	created := false
	for _, e := range r.history() {
		if e.Type == "slot" && e.Slot == sl {
			switch e.Detail {
			case "create":
				created = true
			case "destroy", "gone":
				created = false
			}
		}
	}
	return created
}

// openInHistory is the transaction the history shows begun and not ended
// ("" when none), as the journal reads it (a history moved aside starts
// again with the open transaction's last step), and whether the history
// tells it whole: its begin is there and no loss was acknowledged since
// (a cut loses the tail, where its end may have been).
func (r *seqRun) openInHistory() (string, bool) {
	open, whole := "", false
	for _, e := range r.history() {
		switch e.Type {
		case "begin":
			open, whole = e.TxnID, true
		case "step", "abort":
			if e.TxnID != open {
				open, whole = e.TxnID, false
			}
		case "repair":
			whole = false
		case "end":
			if e.TxnID == open {
				open, whole = "", false
			}
		}
	}
	return open, whole && open != ""
}

// historySoak is the previous slot of the history's last switch while no
// accept or switch back followed it ("" when none).
func (r *seqRun) historySoak() string {
	prev := ""
	for _, e := range r.history() {
		if e.Type != "switch" {
			continue
		}
		what, rest, _ := strings.Cut(e.Detail, " ")
		switch what {
		case "to":
			to, from, ok := strings.Cut(rest, " from ")
			prev = ""
			if ok && from != "none" && from != to {
				prev = from
			}
		case "accept", "back":
			prev = ""
		}
	}
	return prev
}
