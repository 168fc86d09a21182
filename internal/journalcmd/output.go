package journalcmd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/gate"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// statusView is the JSON of status.
type statusView struct {
	APIVersion  string               `json:"apiVersion"`
	Kind        string               `json:"kind"`
	Transaction *journal.Transaction `json:"transaction"`
	Next        *journal.NextStep    `json:"next,omitempty"`
	// HistoryCut says what was cut from the history from outside.
	HistoryCut *cutView `json:"historyCut,omitempty"`
	// Run is the live strategy run that holds the state dir, when another
	// process than this one's run does.
	Run *runView `json:"run,omitempty"`
}

// runView is the live strategy run, as status shows it.
type runView struct {
	// PID, Command and Started are the script that took the run lock (its
	// re-run command) and when.
	PID     int        `json:"pid,omitempty"`
	Command string     `json:"command,omitempty"`
	Started *time.Time `json:"started,omitempty"`
	// Step is the transaction's step in progress, if one is.
	Step *liveStep `json:"step,omitempty"`
	// Orphans are the processes that still hold the run when its script
	// is gone (or its lock file was removed from outside: LockRemoved).
	Orphans     []state.Orphan `json:"orphans,omitempty"`
	LockRemoved bool           `json:"lockRemoved,omitempty"`
	// Says is what the text output says of it.
	Says string `json:"says"`
}

// liveStep is the step a live run is in.
type liveStep struct {
	Phase   journal.Phase `json:"phase"`
	Started time.Time     `json:"started"`
	Attempt int           `json:"attempt"`
}

// running is what status says of run, the live strategy run that owns the
// state dir: the run (and t's step in progress, t may be nil), its text
// lines, and the next step, which is to wait for it.
func running(t *journal.Transaction, run *state.RunLockedError) (*runView, []string, *journal.NextStep) {
	v := &runView{Orphans: run.Orphans, LockRemoved: run.Removed, Says: run.Running()}
	if v.Says == "" {
		v.Says = "a strategy script holds the state dir for its run (it has not named itself yet): wait for it to finish"
	}
	if h := run.Holder; h.PID != 0 {
		since := h.Since
		v.PID, v.Command, v.Started = h.PID, h.Command, &since
	}
	lines := []string{"running:    " + v.Says}
	if t == nil {
		return v, lines, nil
	}
	if st := t.Step(t.Phase); t.Status == journal.StatusStarted && st != nil {
		v.Step = &liveStep{Phase: t.Phase, Started: st.StartedAt, Attempt: st.Attempts}
		lines = append(lines, fmt.Sprintf("step:       %s in progress since %s", t.Phase, st.StartedAt.Format(time.RFC3339)))
	} else {
		lines = append(lines, fmt.Sprintf("step:       none in progress (%s is %s): the run goes on from there", t.Phase, t.Status))
	}
	n := &journal.NextStep{Phases: journal.Legal(t), Wait: run.Waiting()}
	n.Why = fmt.Sprintf("transaction %s is running: a live strategy run owns it, its next step is that run's to make, and every other mutating command refuses while it lives (--force does not override it)", t.ID)
	if stop := run.Stop(); stop != "" {
		n.Why += "; " + stop
	}
	return v, lines, n
}

// cutView is a history cut from outside, as status shows it.
type cutView struct {
	Lines   int64  `json:"lines"`
	FromSeq int64  `json:"fromSeq"`
	ToSeq   int64  `json:"toSeq"`
	Meaning string `json:"meaning"`
	Repair  string `json:"repair"`
}

// statusCut is status of a history cut from outside: the transaction
// transaction.json keeps (if any), what the cut means, and the repair as
// the next command; it returns the cut (exit 3 with the repair).
func statusCut(streams kcli.IOStreams, s *session, cut *journal.HistoryLossError) error {
	t := cut.Txn
	n := journal.NextStep{Why: cut.Meaning()}
	n.Do(s.dir.Repair())
	if t != nil {
		n.Phases = journal.Legal(t)
		n.Why += "; then: " + nextOf(s.dir, t).Command
	}
	if s.common.Output == kcli.OutputJSON {
		v := statusView{APIVersion: journal.APIVersion, Kind: "JournalStatus", Transaction: t, Next: &n,
			HistoryCut: &cutView{Lines: cut.Lines, FromSeq: cut.FromSeq, ToSeq: cut.ToSeq, Meaning: cut.Meaning(), Repair: s.dir.Repair().String()}}
		if err := kcli.WriteJSON(streams.Out, v); err != nil {
			return err
		}
		return cut
	}
	note := fmt.Sprintf("history   cut from outside: %d line(s) lost (events #%d-#%d)", cut.Lines, cut.FromSeq, cut.ToSeq)
	var err error
	if t != nil {
		err = writeText(streams.Out, t, n, note)
	} else {
		_, err = fmt.Fprintf(streams.Out, "no transaction in progress (%s holds none)\n%s\nnext: %s\n  (%s)\n",
			journal.TransactionFile, note, n.Command, n.Why)
	}
	if err != nil {
		return err
	}
	return cut
}

// writeText writes t and its next step, with notes (what else the state
// says) before the next command.
func writeText(w io.Writer, t *journal.Transaction, n journal.NextStep, notes ...string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "transaction %s (%s), since %s\n", t.ID, t.Strategy, t.CreatedAt.Format(time.RFC3339))
	fmt.Fprintf(&b, "target    %s\n", t.Target)
	if t.Package != "" {
		fmt.Fprintf(&b, "package   %s\n", t.Package)
	}
	if t.Fallback != "" {
		fmt.Fprintf(&b, "fallback  %s\n", t.Fallback)
	}
	if t.Slots.Active != "" || t.Slots.Candidate != "" {
		fmt.Fprintf(&b, "slots     active %s, candidate %s\n", dash(t.Slots.Active), dash(t.Slots.Candidate))
	}
	cur := t.Step(t.Phase)
	fmt.Fprintf(&b, "phase     %s (%s, attempt %d)\n", t.Phase, t.Status, cur.Attempts)
	for _, st := range t.Steps {
		end := ""
		if st.EndedAt != nil {
			end = fmt.Sprintf(" -> %s (%s)", st.EndedAt.Format(time.RFC3339), st.EndedAt.Sub(st.StartedAt).Round(time.Millisecond))
		}
		fmt.Fprintf(&b, "  %-18s %-8s attempts %d  %s%s\n", st.Phase, st.Status, st.Attempts, st.StartedAt.Format(time.RFC3339), end)
		if st.Error != "" {
			fmt.Fprintf(&b, "  %-18s error: %s\n", "", st.Error)
		}
	}
	if t.LastError != "" {
		fmt.Fprintf(&b, "last error: %s\n", t.LastError)
	}
	for _, note := range notes {
		fmt.Fprintln(&b, note)
	}
	if n.Wait != "" {
		fmt.Fprintf(&b, "next: wait for %s to finish\n", n.Wait)
	} else {
		fmt.Fprintf(&b, "next: %s\n", n.Command)
	}
	for _, alt := range n.Alternatives {
		fmt.Fprintf(&b, "  or: %s\n", alt)
	}
	fmt.Fprintf(&b, "  (%s)\n", n.Why)
	_, err := io.WriteString(w, b.String())
	return err
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func writeTxn(streams kcli.IOStreams, common *kcli.Common, d *state.Dir, t *journal.Transaction, msg string) error {
	n := nextOf(d, t)
	if common.Output == kcli.OutputJSON {
		return kcli.WriteJSON(streams.Out, statusView{APIVersion: journal.APIVersion, Kind: "JournalStatus", Transaction: t, Next: &n})
	}
	if common.Quiet {
		return nil
	}
	_, err := fmt.Fprintf(streams.Out, "%s\nphase: %s (%s)\nnext: %s\n", msg, t.Phase, t.Status, n.Command)
	return err
}

// nextOf is journal.NextWith with the verification material the script
// began t with (journal begin --key, ...), else that of t's target as its
// staged record keeps it, when the target is staged.
func nextOf(d *state.Dir, t *journal.Transaction) journal.NextStep {
	if d != nil {
		st := site.Read(d)
		if n := st.MovedOff(); n != nil {
			return withStateDir(d, *n)
		}
		if n := st.SoakLost(); n != nil {
			return withStateDir(d, *n)
		}
	}
	t, v := site.Material(d, t)
	return withStateDir(d, journal.NextWithGateFile(t, v, soakOf(d, t), restoredGate(d, t), gateFileErr(t)))
}

// withStateDir starts n's commands with the state dir when a pasted command
// would open another one (a relative $KUBECTL_BUNDLE_STATE_DIR):
// state.Dir.CommandPrefix.
func withStateDir(d *state.Dir, n journal.NextStep) journal.NextStep {
	if d == nil {
		return n
	}
	p := d.CommandPrefix()
	if p == "" {
		return n
	}
	if !n.Run.IsZero() {
		also := make([]advice.Cmd, len(n.Also))
		for i, a := range n.Also {
			also[i] = a.WithEnv(d.CommandEnv())
		}
		n.Do(n.Run.WithEnv(d.CommandEnv()), also...)
		return n
	}
	if n.Command != "" {
		n.Command = p + n.Command
	}
	alts := make([]string, len(n.Alternatives))
	for i, a := range n.Alternatives {
		alts[i] = p + a
	}
	if n.Alternatives != nil {
		n.Alternatives = alts
	}
	return n
}

// gateFileErr says why the gate file t was begun with (journal begin
// --gate) cannot be read, nil when it can or t has none: a script run
// with it refuses until it is back (the run's checkGateFile).
func gateFileErr(t *journal.Transaction) error {
	if t.Gate == nil || t.Gate.File == "" {
		return nil
	}
	f, err := os.Open(t.Gate.File)
	if err != nil {
		return err
	}
	defer f.Close()
	// Parsed as the gate parses it: a file that is there but damaged
	// (truncated, edited into invalid YAML) refuses the re-run just the
	// same (exit 2), so it must not be printed as the way on.
	data, err := gate.ReadAll(f)
	if err != nil {
		return err
	}
	_, _, err = gate.Parse(bytes.NewReader(data))
	return err
}

// restoredGate is the failing gate result recorded for the slot t's done
// recovery step restored, for the package that slot holds now (nil when
// there is none: not gated yet, passed, or the slot changed since).
func restoredGate(d *state.Dir, t *journal.Transaction) *journal.FailingGate {
	if d == nil || t.Status != journal.StatusDone || (t.Phase != journal.Restoring && t.Phase != journal.BuildingFallback) {
		return nil
	}
	rec, err := slot.Load(d, t.Slots.Active)
	if err != nil || rec.Gate == nil || rec.Gate.Passed || rec.Deploying != nil || rec.Package == nil || rec.Gate.Package != rec.Package.Digest {
		return nil
	}
	return &journal.FailingGate{Slot: rec.Name, Time: rec.Gate.Time, Failed: rec.Gate.Failed}
}

// soakOf is what the switch record says of t's soak, nil when it says
// nothing (no blue-green soak, or the record is unreadable).
func soakOf(d *state.Dir, t *journal.Transaction) *journal.Soak {
	if d == nil || t.Strategy != journal.BlueGreen {
		return nil
	}
	sw, err := site.Read(d).Switch()
	if err != nil || sw == nil || sw.SoakStarted.IsZero() {
		return nil
	}
	s := &journal.Soak{}
	if w, err := time.ParseDuration(sw.SoakWindow); err == nil {
		s.Ends = sw.SoakStarted.Add(w)
		s.Over = !time.Now().Before(s.Ends)
	}
	if t.Slots.Active != "" {
		_, err := slot.Load(d, t.Slots.Active)
		s.RevertTarget = !errors.As(err, new(*slot.NotFoundError))
	}
	return s
}
