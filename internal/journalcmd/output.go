package journalcmd

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/stage"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
	"github.com/kubectl-bundle/kubectl-bundle/internal/switchover"
)

// statusView is the JSON of status.
type statusView struct {
	APIVersion  string               `json:"apiVersion"`
	Kind        string               `json:"kind"`
	Transaction *journal.Transaction `json:"transaction"`
	Next        *journal.NextStep    `json:"next,omitempty"`
	// HistoryCut says what was cut from the history from outside.
	HistoryCut *cutView `json:"historyCut,omitempty"`
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
	n := journal.NextStep{Command: journal.RepairCommand, Why: cut.Meaning()}
	if t != nil {
		n.Phases = journal.Legal(t)
		n.Why += "; then: " + nextOf(s.dir, t).Command
	}
	if s.common.Output == kcli.OutputJSON {
		v := statusView{APIVersion: journal.APIVersion, Kind: "JournalStatus", Transaction: t, Next: &n,
			HistoryCut: &cutView{Lines: cut.Lines, FromSeq: cut.FromSeq, ToSeq: cut.ToSeq, Meaning: cut.Meaning(), Repair: journal.RepairCommand}}
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
	fmt.Fprintf(&b, "next: %s\n", n.Command)
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

// nextOf is journal.NextWith with the verification material of t's target
// as its staged record keeps it, when the target is staged.
func nextOf(d *state.Dir, t *journal.Transaction) journal.NextStep {
	var v *journal.Verification
	if d != nil && t.Target != "" {
		if p, err := stage.Lookup(d, &stage.Ref{Digest: t.Target}); err == nil {
			r := p.Record
			v = &journal.Verification{Key: r.Key, TrustedRoot: r.TrustedRoot, Identity: r.Report.Signer.Identity, Issuer: r.Report.Signer.Issuer}
			if t.Package == "" && p.Path != "" {
				// Begun with a digest: the scripts take a file, and the
				// staged copy is that digest's file, by an absolute path.
				c := *t
				c.Package = p.Path
				t = &c
			}
		}
	}
	return journal.NextWithSoak(t, v, soakOf(d, t))
}

// soakOf is what the switch record says of t's soak, nil when it says
// nothing (no blue-green soak, or the record is unreadable).
func soakOf(d *state.Dir, t *journal.Transaction) *journal.Soak {
	if d == nil || t.Strategy != journal.BlueGreen {
		return nil
	}
	sw, err := switchover.LoadRecord(d)
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
