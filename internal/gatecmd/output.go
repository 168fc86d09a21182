package gatecmd

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/gate"
)

const (
	green = "\033[32m"
	red   = "\033[31m"
	reset = "\033[0m"
)

func paint(s, color string, on bool) string {
	if !on {
		return s
	}
	return color + s + reset
}

// printTable writes one row per check, in the manner of clusterctl
// describe: nested checks are indented under their parent.
func printTable(w io.Writer, rep *gate.Report, color bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tOBJECT\tSTATUS\tREASON\tMESSAGE")
	for _, r := range rep.Checks {
		name := r.Name
		if i := strings.LastIndexByte(name, '/'); i >= 0 {
			name = "└─" + name[i+1:]
		}
		st := string(r.Status)
		if r.Status == gate.Pass {
			st = paint(st, green, color)
		} else {
			st = paint(st, red, color)
		}
		reason := r.Reason
		if reason == "" {
			reason = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, r.Object, st, reason, oneLine(r.Message, 160))
	}
	tw.Flush()
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		s = s[:max-3] + "..."
	}
	return s
}

// printSummary writes the ✔/✗ verdict line to stderr, as flux check does.
func printSummary(w io.Writer, rep *gate.Report, timeout time.Duration, color bool) {
	el := time.Duration(rep.Elapsed * float64(time.Second)).Round(10 * time.Millisecond)
	if rep.Passed {
		fmt.Fprintf(w, "%s gate %s: all %d checks passed (%s)\n", paint("✔", green, color), rep.Gate, len(rep.Checks), el)
		return
	}
	failed := rep.Failed()
	how := "failed"
	if rep.TimedOut {
		how = fmt.Sprintf("still failing at the %s timeout", timeout)
	}
	if len(rep.ChecksTimedOut) > 0 {
		how = fmt.Sprintf("failing; %s still failing at its own timeout", strings.Join(rep.ChecksTimedOut, ", "))
	}
	fmt.Fprintf(w, "%s gate %s: %d of %d checks %s (%s)\n", paint("✗", red, color), rep.Gate, len(failed), len(rep.Checks), how, el)
	for _, f := range failed {
		fmt.Fprintf(w, "  %s %s: %s: %s\n", paint("✗", red, color), f.Name, f.Reason, oneLine(f.Message, 200))
	}
}
