package invariant

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// The state dir as the checks read it: raw, so that damage does not stop
// the checker, and apart from internal/site, so that a bug there is seen.

// Record is the part of a slot record the checks read.
type Record struct {
	Provider string `json:"provider"`
	Package  *struct {
		Digest string `json:"digest"`
	} `json:"package"`
	Gate *struct {
		Passed  bool      `json:"passed"`
		Package string    `json:"package"`
		Time    time.Time `json:"time"`
	} `json:"gate"`
	State string `json:"state"`
}

// Txn is the part of transaction.json the checks read.
type Txn struct {
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

// Event is one line of history.jsonl.
type Event struct {
	Seq    int64  `json:"seq"`
	TxnID  string `json:"txn"`
	Type   string `json:"type"`
	Phase  string `json:"phase"`
	Status string `json:"status"`
	Slot   string `json:"slot"`
	Detail string `json:"detail"`
}

// Files reads one site's state dir (Root/state) and the fake machine
// beside it (Root/fakes). Between two commands nothing changes them but
// the sequence's own damage: each file is read once in that time (the
// memo, which Forget empties whenever a command may have run) and the
// history and the machine are parsed again only when they changed.
type Files struct {
	Root string

	memo map[string]memoFile

	histRaw    []byte
	histEvents []Event
	groundRaw  []byte
	groundLast *Ground
	kubeRaw    []byte
	kubeAlias  string
}

// State is a path in the state dir.
func (f *Files) State(elem ...string) string {
	return filepath.Join(append([]string{f.Root, "state"}, elem...)...)
}

// memoFile is a file as read since the last command: its content (nil
// when it could not be read), whether it exists, and whether it is a
// readable regular file.
type memoFile struct {
	b             []byte
	exists, ok    bool
	follow        bool // read following a symlink (os.ReadFile)
	followErr     error
	followContent []byte
}

// Forget empties the memo: a command may have changed any file.
func (f *Files) Forget() { clear(f.memo) }

// ReadRegular reads a state file without following a symlink: exists
// false when there is none, ok false when it is not a readable regular
// file (damage).
func (f *Files) ReadRegular(p string) (b []byte, exists, ok bool) {
	if m, hit := f.memo[p]; hit {
		return m.b, m.exists, m.ok
	}
	b, exists, ok = readRegular(p)
	if f.memo == nil {
		f.memo = map[string]memoFile{}
	}
	f.memo[p] = memoFile{b: b, exists: exists, ok: ok}
	return b, exists, ok
}

func readRegular(p string) (b []byte, exists, ok bool) {
	fi, err := os.Lstat(p)
	if os.IsNotExist(err) {
		return nil, false, true
	}
	if err != nil || !fi.Mode().IsRegular() {
		return nil, true, false
	}
	b, err = state.ReadFile(p, -1, false)
	return b, true, err == nil
}

// exists reports whether p exists (as itself: a symlink is).
func (f *Files) exists(p string) bool {
	_, exists, _ := f.ReadRegular(p)
	return exists
}

// readFile is os.ReadFile of p, read once between two commands.
func (f *Files) readFile(p string) ([]byte, error) {
	key := "follow:" + p
	if m, hit := f.memo[key]; hit {
		return m.followContent, m.followErr
	}
	b, err := state.ReadFile(p, -1, false)
	if f.memo == nil {
		f.memo = map[string]memoFile{}
	}
	f.memo[key] = memoFile{follow: true, followContent: b, followErr: err}
	return b, err
}

// Record reads slot sl's record: ok false when it is missing or damaged.
func (f *Files) Record(sl string) (*Record, bool) {
	b, exists, ok := f.ReadRegular(f.State("slots", sl+".json"))
	if !exists || !ok {
		return nil, false
	}
	rec := &Record{}
	if json.Unmarshal(b, rec) != nil {
		return nil, false
	}
	return rec, true
}

var slotName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// Pointer reads the active pointer: ok false when it is damaged.
func (f *Files) Pointer() (string, bool) {
	b, exists, ok := f.ReadRegular(f.State("active"))
	if !exists || !ok {
		return "", ok
	}
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" || strings.ContainsAny(s, "\n\r") || !slotName.MatchString(s) {
		return "", false
	}
	return s, true
}

// Txn reads transaction.json: nil, true when there is none; ok false when
// it is damaged.
func (f *Files) Txn() (*Txn, bool) {
	b, exists, ok := f.ReadRegular(f.State("journal", "transaction.json"))
	if !exists || !ok {
		return nil, ok
	}
	t := &Txn{}
	if json.Unmarshal(b, t) != nil || t.ID == "" {
		return nil, false
	}
	return t, true
}

// switchRecord is the part of switch.json the checks read.
type switchRecord struct {
	Phase    string `json:"phase"`
	Target   string `json:"target"`
	Previous string `json:"previous"`
}

// readSwitch reads switch.json: exists false when there is none, ok false
// when it is damaged.
func (f *Files) readSwitch() (sw switchRecord, exists, ok bool) {
	b, exists, ok := f.ReadRegular(f.State("switch.json"))
	if !exists || !ok {
		return sw, exists, ok
	}
	return sw, true, json.Unmarshal(b, &sw) == nil
}

// SwitchPhase is switch.json's phase ("" when none or unreadable).
func (f *Files) SwitchPhase() string {
	sw, exists, ok := f.readSwitch()
	if !exists || !ok {
		return ""
	}
	return sw.Phase
}

// Soaking reads switch.json: the previous slot while a switch soaks.
// With switch.json gone, the history's last switch not accepted or
// switched back keeps its previous slot (issue 32, class 5).
func (f *Files) Soaking() (string, bool) {
	sw, exists, ok := f.readSwitch()
	if !exists && ok {
		return f.HistorySoak(), true
	}
	if !exists || !ok {
		return "", false
	}
	if sw.Previous != "" && (sw.Phase == "SWITCHING" || sw.Phase == "SWITCHED" || sw.Phase == "SWITCHING_BACK") {
		return sw.Previous, true
	}
	return "", true
}

// History reads the complete lines of history.jsonl.
func (f *Files) History() []Event {
	b, err := f.readFile(f.State("journal", "history.jsonl"))
	if err != nil {
		return nil
	}
	if f.histRaw != nil && bytes.Equal(b, f.histRaw) {
		return f.histEvents
	}
	f.histRaw = b
	f.histEvents = nil
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		var e Event
		if len(line) > 0 && line[len(line)-1] == '\n' && json.Unmarshal(line, &e) == nil {
			f.histEvents = append(f.histEvents, e)
		}
	}
	return f.histEvents
}

// StillDamaged reports whether a damage target (DamageKinds) still is.
func (f *Files) StillDamaged(target string) bool {
	switch target {
	case "active", "slots":
		a, ok := f.Pointer()
		if !ok {
			return true
		}
		if a == "" {
			return f.LostPointer()
		}
		if _, ok := f.Record(a); ok {
			return false
		}
		if target == "slots" && !f.CreatedPerHistory(a) {
			return false // the pointer's own damage (a destroyed slot) is the active target's
		}
		// A pointer to a slot with no record: damage, except while a
		// recreate of that slot rebuilds it.
		t, _ := f.Txn()
		return !(!f.exists(f.State("slots", a+".json")) && t != nil && t.Strategy == "recreate" && t.Slots.Active == a)
	case "switch":
		_, ok := f.Soaking()
		return !ok
	case "transaction":
		if !f.exists(f.State("journal", "transaction.json")) {
			// Missing while the history shows a transaction begun and
			// not ended: lost, not "none".
			open, _ := f.OpenInHistory()
			return open != ""
		}
		_, ok := f.Txn()
		return !ok
	case "history":
		// Lines lost before the transaction's last one, or below the
		// history's mark when the journal keeps one (a torn last line is
		// what a crash leaves, and is repaired without asking).
		if !f.exists(f.State("journal", "history.jsonl")) {
			return false // moved aside: a new history starts from the transaction
		}
		h := f.History()
		var last int64
		if len(h) > 0 {
			last = h[len(h)-1].Seq
		}
		if b, err := f.readFile(f.State("journal", "history.mark")); err == nil {
			var m struct {
				Seq int64 `json:"seq"`
			}
			if json.Unmarshal(b, &m) == nil && last < m.Seq {
				return true
			}
		}
		t, ok := f.Txn()
		return ok && t != nil && last < t.Seq-1
	}
	sl := strings.TrimPrefix(target, "slot-")
	if !f.exists(f.State("slots", sl+".json")) {
		return false
	}
	_, ok := f.Record(sl)
	return !ok
}

// LostPointer reports whether a missing pointer is damage: the switch
// record names a slot that exists (its record, or the history's create),
// other than a first switch interrupted before it wrote the pointer, or the
// history records a switch and a slot's record says it passed its gate.
func (f *Files) LostPointer() bool {
	if sw, exists, ok := f.readSwitch(); exists && ok && sw.Target != "" && !(sw.Phase == "SWITCHING" && sw.Previous == "") {
		if f.couldServe(sw.Target) {
			return true
		}
	}
	switched := false
	for _, e := range f.History() {
		switched = switched || e.Type == "switch"
	}
	if !switched {
		return false // the first install between its gate and its switch
	}
	for _, sl := range Slots {
		if rec, ok := f.Record(sl); ok && rec.State == "ready" && rec.Gate != nil && rec.Gate.Passed {
			return true
		}
	}
	return false
}

// couldServe reports whether slot sl exists and may serve: its record is
// there and ready, or there but unreadable, or gone from outside while the
// history says it was created. A slot whose create failed or whose
// destroy was killed half way serves nothing: a pointer to it that goes
// is not lost.
func (f *Files) couldServe(sl string) bool {
	if !f.exists(f.State("slots", sl+".json")) {
		return f.CreatedPerHistory(sl)
	}
	rec, ok := f.Record(sl)
	return !ok || rec.State == "ready"
}

// Slots are the site's two slots.
var Slots = []string{"a", "b"}

// CreatedPerHistory reports whether the history's last create or destroy
// of slot sl is a create (its record removed from outside).
func (f *Files) CreatedPerHistory(sl string) bool {
	created := false
	for _, e := range f.History() {
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

// OpenInHistory is the transaction the history shows begun and not ended
// ("" when none), as the journal reads it (a history moved aside starts
// again with the open transaction's last step), and whether the history
// tells it whole: its begin is there and no loss was acknowledged since
// (a cut loses the tail, where its end may have been).
func (f *Files) OpenInHistory() (string, bool) {
	open, whole := "", false
	for _, e := range f.History() {
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

// HistorySoak is the previous slot of the history's last switch while no
// accept or switch back followed it ("" when none).
func (f *Files) HistorySoak() string {
	prev := ""
	for _, e := range f.History() {
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

// StagedUsable reports whether the staged copy of digest is whole: its
// file's sha256 is the digest.
func (f *Files) StagedUsable(digest string) bool {
	hexd := strings.TrimPrefix(digest, "sha256:")
	dir := f.State("packages", hexd)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		n := e.Name()
		if strings.HasSuffix(n, ".sha256") || strings.HasSuffix(n, ".json") || e.IsDir() {
			continue
		}
		b, err := state.ReadFile(filepath.Join(dir, n), -1, false)
		if err != nil {
			return false
		}
		sum := sha256.Sum256(b)
		return hex.EncodeToString(sum[:]) == hexd
	}
	return false
}

// Fingerprint is what the site holds that a command may change: the
// state files (the history aside), the machine's clusters and deploys,
// and the kubeconfig.
func (f *Files) Fingerprint() string {
	h := sha256.New()
	for _, p := range []string{f.State("active"), f.State("switch.json"), f.State("journal", "transaction.json"),
		filepath.Join(f.Root, "fakes", "state.json"), filepath.Join(f.Root, "kubeconfig")} {
		b, _ := f.readFile(p)
		h.Write(b)
		h.Write([]byte{0})
	}
	recs, _ := filepath.Glob(f.State("slots", "*.json"))
	for _, p := range recs {
		b, _ := f.readFile(p)
		h.Write([]byte(p))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}
