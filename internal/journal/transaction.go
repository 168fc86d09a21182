package journal

import (
	"encoding/json"
	"fmt"
	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"strings"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
)

// Step is one phase's record: when it started and ended, how often it was
// tried, and how the last try ended.
type Step struct {
	Phase     Phase      `json:"phase"`
	Status    string     `json:"status"`
	Attempts  int        `json:"attempts"`
	StartedAt time.Time  `json:"startedAt"`
	EndedAt   *time.Time `json:"endedAt,omitempty"`
	Error     string     `json:"error,omitempty"`
}

// Slots names the environments a transaction involves.
type Slots struct {
	Active    string `json:"active,omitempty"`
	Candidate string `json:"candidate,omitempty"`
}

// Gate is a strategy script's gate: its --gate file (absolute) and
// --gate-timeout.
type Gate struct {
	File    string `json:"file,omitempty"`
	Timeout string `json:"timeout,omitempty"`
}

// Args are g as the scripts' flags, one argument each (nil for none).
func (g *Gate) Args() []string {
	var a []string
	if g == nil {
		return nil
	}
	if g.File != "" {
		a = append(a, "--gate", g.File)
	}
	if g.Timeout != "" {
		a = append(a, "--gate-timeout", g.Timeout)
	}
	return a
}

// Transaction is journal/transaction.json.
type Transaction struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	ID         string   `json:"id"`
	Strategy   Strategy `json:"strategy"`
	Target     string   `json:"target"`
	Package    string   `json:"package,omitempty"`
	Fallback   string   `json:"fallback,omitempty"`
	Slots      Slots    `json:"slots"`
	// Gate is the gate the script runs its steps with, so that the next
	// command re-runs it gating the same way.
	Gate *Gate `json:"gate,omitempty"`
	// Verify is the verification material the script verifies the
	// package with (journal begin --key, ...), so that the next command
	// carries it however the script was given it (--key or
	// $ZARF_VERIFY_KEY), before the package is staged too.
	Verify *Verification `json:"verify,omitempty"`
	// SwitchMode is how a blue-green switch treats the workload clusters
	// ("" : S2, each slot runs its own; "repoint": S1, they stay with the
	// active slot, which keeps them after accept).
	SwitchMode string    `json:"switchMode,omitempty"`
	Phase      Phase     `json:"phase"`
	Status     string    `json:"status"`
	Steps      []Step    `json:"steps"`
	LastError  string    `json:"lastError,omitempty"`
	Seq        int64     `json:"seq"`
	CreatedAt  time.Time `json:"createdAt"`
	UpdatedAt  time.Time `json:"updatedAt"`
	// LastEvent is the history line of the last write: if a crash lost it
	// from history.jsonl, the next mutating command appends it.
	LastEvent Event `json:"lastEvent"`
}

// Step returns the record of phase p, if it was ever started.
func (t *Transaction) Step(p Phase) *Step {
	for i := range t.Steps {
		if t.Steps[i].Phase == p {
			return &t.Steps[i]
		}
	}
	return nil
}

// ConflictError is a refused operation (a conflict): a second begin, an illegal
// transition, an unsafe abort.
type ConflictError struct {
	Msg string
}

func (e *ConflictError) Error() string { return e.Msg }

// ErrorKind: a refused operation is a conflict.
func (e *ConflictError) ErrorKind() errkind.Kind { return errkind.Conflict }

// CorruptError says a journal file cannot be read. It is never reported as
// "no transaction".
type CorruptError struct {
	Path string
	Err  error
	// Repair is what lets the operator go on, when there is something
	// better than restoring the file by hand.
	Repair advice.Fix
}

func (e *CorruptError) Error() string {
	if !e.Repair.IsZero() {
		return fmt.Sprintf("%s is unreadable: %v; something outside kubectl-bundle changed it: %s", e.Path, e.Err, e.Repair)
	}
	return fmt.Sprintf("%s is unreadable: %v; every write to it is atomic, so something outside kubectl-bundle changed it: keep a copy, inspect it, and restore it from the history (%s) before going on", e.Path, e.Err, pluginOf(e.Path, "journal", "log"))
}

// ErrorKind: a corrupt journal is state that does not allow the step.
func (e *CorruptError) ErrorKind() errkind.Kind { return errkind.Environment }

// LostError is a transaction the history shows begun and not ended whose
// transaction.json is gone: damage, never "no transaction".
type LostError struct {
	Path string
	// Open is the history's last event of the transaction.
	Open Event
	// Rebuildable: the history reaches back to the transaction's begin, so
	// journal repair rebuilds the file from it.
	Rebuildable bool
	// Cut: lines cut from the history since the transaction began were
	// acknowledged (journal repair), so its end may have been among them.
	Cut bool
}

func (e *LostError) Error() string {
	why := "something outside kubectl-bundle removed it"
	if e.Cut {
		why = "its end may have been among the lines cut from the history"
	}
	msg := fmt.Sprintf("%s is missing, but the history shows transaction %s begun and not ended (last recorded: %s %s): %s",
		e.Path, e.Open.TxnID, e.Open.Phase, e.Open.Status, why)
	if e.Rebuildable {
		return msg + "; rebuild it from the history: " + repairOf(e.Path).String()
	}
	if !e.Cut {
		msg += "; the history does not reach back to its begin"
	}
	return msg + fmt.Sprintf(": check the slots (%s; %s), then close it in the history: %s",
		pluginOf(e.Path, "slot", "list"), pluginOf(e.Path, "switch", "status"), pluginOf(e.Path, "journal", "abort", "--force"))
}

// ErrorKind: a lost transaction is state that does not allow the step.
func (e *LostError) ErrorKind() errkind.Kind { return errkind.Environment }

// ParseTransaction parses and validates transaction.json.
func ParseTransaction(b []byte) (*Transaction, error) {
	if len(b) > MaxTransactionSize {
		return nil, fmt.Errorf("%d bytes, over the %d byte limit", len(b), MaxTransactionSize)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var t Transaction
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("parsing: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the JSON object")
	}
	if t.APIVersion != APIVersion || t.Kind != KindTransaction {
		return nil, fmt.Errorf("apiVersion/kind %q/%q, want %q/%q", t.APIVersion, t.Kind, APIVersion, KindTransaction)
	}
	if t.ID == "" || t.Seq < 1 {
		return nil, fmt.Errorf("missing id or seq")
	}
	if _, err := ParseStrategy(string(t.Strategy)); err != nil {
		return nil, err
	}
	if _, err := ParsePhase(t.Strategy, string(t.Phase)); err != nil {
		return nil, err
	}
	switch t.Status {
	case StatusStarted, StatusDone, StatusFailed:
	default:
		return nil, fmt.Errorf("status %q is not started, done or failed", t.Status)
	}
	if len(t.Steps) == 0 || t.Steps[len(t.Steps)-1].Phase != t.Phase {
		return nil, fmt.Errorf("the steps do not end in the current phase %s", t.Phase)
	}
	return &t, nil
}
