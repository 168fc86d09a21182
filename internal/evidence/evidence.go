// Package evidence keeps what an update transaction leaves for an audit in
// <state>/transactions/<ID>/: the verification record, the SBOM documents,
// the gate results, the debug captures of failures, the script's summary
// and output, and the history events. Writing evidence is best effort:
// damage there is reported as a warning and never stops a step.
package evidence

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// Dir is the directory under the state dir that holds one directory per
// transaction.
const Dir = "transactions"

// File names inside a transaction's evidence.
const (
	MetaFile         = "transaction.json"
	VerificationFile = "verification.json"
	SBOMDir          = "sbom"
	GateDir          = "gate"
	DebugDir         = "debug"
	SummaryFile      = "summary.txt"
	OutputFile       = "output.log"
	HistoryFile      = "history.jsonl"
	DeployedFile     = "deployed.jsonl"
)

// envStep is the variable `journal run` sets for a step's command
// (session.EnvStep): "<transaction id>/<phase>".
const envStep = "KUBECTL_BUNDLE_STEP"

var idRE = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z._-]{0,127}$`)

// ValidID reports whether id can name a transaction's evidence directory.
func ValidID(id string) error {
	if !idRE.MatchString(id) {
		return fmt.Errorf("%q is not a transaction id (such as 20260102-150405-a1b2c3)", id)
	}
	return nil
}

// Path returns the evidence directory of transaction id.
func Path(d *state.Dir, id string) string { return d.Join(Dir, id) }

// Ensure creates the evidence directory of id (and sub, when given) and
// returns its path. A symlink or a file where a directory belongs is
// damage: it is refused, not followed.
func Ensure(d *state.Dir, id string, sub ...string) (string, error) {
	if err := ValidID(id); err != nil {
		return "", err
	}
	p := d.Path
	for _, elem := range append([]string{Dir, id}, sub...) {
		p = filepath.Join(p, elem)
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Mkdir(p, state.DirMode); err != nil && !errors.Is(err, fs.ErrExist) {
				return "", fmt.Errorf("creating %s: %w", p, err)
			}
		case err != nil:
			return "", fmt.Errorf("checking %s: %w", p, err)
		case !fi.IsDir():
			return "", fmt.Errorf("%s is not a directory (%s): move it aside", p, fi.Mode().Type())
		}
	}
	return p, nil
}

// WriteFile replaces name (a path relative to the evidence of id) atomically.
func WriteFile(d *state.Dir, id, name string, data []byte) error {
	dir, err := Ensure(d, id, splitDir(name)...)
	if err != nil {
		return err
	}
	return state.WriteFile(filepath.Join(dir, filepath.Base(name)), data)
}

// AppendFile appends data to name in the evidence of id.
func AppendFile(d *state.Dir, id, name string, data []byte) error {
	dir, err := Ensure(d, id, splitDir(name)...)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, filepath.Base(name)), os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW, state.FileMode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// WriteJSON writes v as indented JSON to name in the evidence of id.
func WriteJSON(d *state.Dir, id, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return WriteFile(d, id, name, append(b, '\n'))
}

func splitDir(name string) []string {
	dir := filepath.Dir(filepath.Clean(name))
	if dir == "." {
		return nil
	}
	return strings.Split(dir, string(filepath.Separator))
}

// Current returns the id of the transaction a command runs for: the step
// `journal run` started it as, else the open transaction, else "".
func Current(d *state.Dir) string {
	if id, _, ok := strings.Cut(os.Getenv(envStep), "/"); ok && ValidID(id) == nil {
		return id
	}
	t, err := site.ReadTxn(d)
	if err != nil || t == nil {
		return ""
	}
	return t.ID
}

// Warn writes a best-effort failure as one warning line: evidence never
// stops a step.
func Warn(w io.Writer, what string, err error) {
	if w != nil && err != nil {
		fmt.Fprintf(w, "warning: evidence: %s: %v (the step goes on)\n", what, err)
	}
}

// Meta is transaction.json in the evidence: what the transaction was.
type Meta struct {
	ID       string           `json:"id"`
	Strategy journal.Strategy `json:"strategy"`
	Target   string           `json:"target"`
	Package  string           `json:"package,omitempty"`
	Fallback string           `json:"fallback,omitempty"`
	Slots    journal.Slots    `json:"slots"`
	Created  time.Time        `json:"createdAt"`
	Phase    journal.Phase    `json:"phase,omitempty"`
	Status   string           `json:"status,omitempty"`
	Updated  time.Time        `json:"updatedAt"`
}

// KeepTransaction writes what t is into its evidence.
func KeepTransaction(d *state.Dir, t *journal.Transaction) error {
	return WriteJSON(d, t.ID, MetaFile, Meta{ID: t.ID, Strategy: t.Strategy, Target: t.Target, Package: t.Package,
		Fallback: t.Fallback, Slots: t.Slots, Created: t.CreatedAt, Phase: t.Phase, Status: t.Status, Updated: t.UpdatedAt})
}

// Deployed is one line of deployed.jsonl: a package the transaction put
// into a slot (retention keeps the evidence of what serves).
type Deployed struct {
	Slot   string    `json:"slot"`
	Digest string    `json:"digest"`
	Time   time.Time `json:"time"`
}

// KeepDeployed records that the transaction id deployed digest into slot.
func KeepDeployed(d *state.Dir, id, slotName, digest string) error {
	b, err := json.Marshal(Deployed{Slot: slotName, Digest: digest, Time: time.Now().UTC()})
	if err != nil {
		return err
	}
	return AppendFile(d, id, DeployedFile, append(b, '\n'))
}

// KeepHistory writes the history events of id into its evidence.
func KeepHistory(d *state.Dir, id string) error {
	b, err := historyOf(d, id)
	if err != nil {
		return err
	}
	return WriteFile(d, id, HistoryFile, b)
}

// historyOf returns the events of id in the journal's history as JSON lines.
func historyOf(d *state.Dir, id string) ([]byte, error) {
	h, err := journal.ReadHistory(d.Join(journal.Dir, journal.HistoryFile))
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	for _, ev := range h.Events {
		if ev.TxnID != id {
			continue
		}
		line, err := json.Marshal(ev)
		if err != nil {
			return nil, err
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return []byte(b.String()), nil
}

// Stamp is a file-name-safe UTC time, ordered as text.
func Stamp(t time.Time) string { return t.UTC().Format("20060102T150405.000Z") }
