package slotcmd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"
	"golang.org/x/term"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
)

func printFindings(w io.Writer, rep *slot.PreflightReport) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, f := range rep.Findings {
		mark := "✔"
		switch {
		case f.Blocks:
			mark = "✗"
		case !f.OK:
			mark = "!"
		}
		fmt.Fprintf(tw, "%s %s\t%s\n", mark, f.Check, f.Message)
	}
	tw.Flush()
	if rep.Blocked {
		fmt.Fprintf(w, "slot %s cannot be built here: fix the ✗ findings above\n", rep.Slot)
	} else {
		fmt.Fprintf(w, "slot %s can be built here (%s provider)\n", rep.Slot, rep.Provider)
	}
}

func packageString(p *slot.PackageRef) string {
	if p == nil {
		return "-"
	}
	s := p.Digest
	if len(s) > 12 {
		s = s[:12]
	}
	if p.Name != "" {
		s = fmt.Sprintf("%s %s (%s)", p.Name, p.Version, s)
	}
	return s
}

func gateString(r *slot.Record) string {
	if r.Deploying != nil {
		return "not gated: " + r.Deploying.Describe()
	}
	g := r.Gate
	if g == nil {
		return "-"
	}
	v := "passed"
	if !g.Passed {
		v = "FAILED"
	}
	return fmt.Sprintf("%s %s ago", v, time.Since(g.Time).Round(time.Second))
}

// listing is one slot as list and describe show it.
type listing struct {
	*slot.Record
	Active bool `json:"active"`
	// Damaged says why the slot's record cannot be read, and Repair what
	// clears it.
	Damaged string `json:"damaged,omitempty"`
	Repair  string `json:"repair,omitempty"`
}

func load(s *session) ([]listing, error) {
	names, err := slot.List(s.dir)
	if err != nil {
		return nil, err
	}
	active := s.active()
	soaking := s.soaking()
	out := []listing{}
	for _, n := range names {
		rec, err := slot.Load(s.dir, n)
		var dmg *slot.DamagedError
		if errors.As(err, &dmg) {
			dmg.Protected = n == active || n == soaking
			out = append(out, listing{Record: &slot.Record{Name: n, State: "DAMAGED"}, Active: n == active, Damaged: dmg.Err.Error(), Repair: dmg.Repair().String()})
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, listing{Record: rec, Active: n == active})
	}
	return out, nil
}

func list(_ context.Context, cmd *cli.Command, s *session) error {
	if cmd.Args().Len() > 0 {
		return kcli.Usage("list takes no arguments")
	}
	ls, err := load(s)
	if err != nil {
		return err
	}
	if s.common.Output == kcli.OutputJSON {
		return kcli.WriteJSON(s.streams.Out, ls)
	}
	if len(ls) == 0 {
		_, err := fmt.Fprintf(s.streams.Out, "no slots (%s builds one)\n", s.dir.Plugin("slot", "create", "a"))
		return err
	}
	tw := tabwriter.NewWriter(s.streams.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SLOT\tACTIVE\tPROVIDER\tSTATE\tCONTEXT\tPACKAGE\tGATE")
	for _, l := range ls {
		act := ""
		if l.Active {
			act = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", l.Name, act, l.Provider, l.State, l.Context, packageString(l.Package), gateString(l.Record))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, l := range ls {
		if line := l.OwnsWorkloadsLine(); line != "" {
			fmt.Fprintf(s.streams.Out, "%s (kept by an S1 repoint update; %s refuses while it owns any)\n", line, s.dir.Plugin("slot", "destroy", l.Name))
		}
		if l.Damaged != "" {
			fmt.Fprintf(s.streams.Out, "DAMAGED: the record of slot %s cannot be read (%s); repair: %s\n", l.Name, l.Damaged, l.Repair)
		}
	}
	return nil
}

func describe(_ context.Context, cmd *cli.Command, s *session) error {
	name, err := oneSlot(cmd)
	if err != nil {
		return err
	}
	rec, err := slot.Load(s.dir, name)
	if err != nil {
		return err
	}
	active := s.active()
	l := listing{Record: rec, Active: active == name}
	if s.common.Output == kcli.OutputJSON {
		return kcli.WriteJSON(s.streams.Out, l)
	}
	tw := tabwriter.NewWriter(s.streams.Out, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("slot", name)
	row("active", fmt.Sprint(l.Active))
	row("provider", rec.Provider)
	row("state", rec.State)
	if rec.Cluster != "" {
		row("cluster", rec.Cluster)
	}
	row("context", rec.Context)
	if rec.Kubeconfig != "" {
		row("kubeconfig", rec.Kubeconfig)
	}
	if rec.Registry != "" {
		row("registry", fmt.Sprintf("%s on 127.0.0.1:%d", rec.Registry, rec.RegistryPort))
	}
	row("package", packageString(rec.Package))
	if rec.Package != nil {
		row("deployed", rec.Package.Deployed.Format(time.RFC3339))
	}
	row("gate", gateString(rec))
	if rec.Gate != nil && len(rec.Gate.Failed) > 0 {
		row("failed checks", fmt.Sprint(rec.Gate.Failed))
	}
	if len(rec.OwnsWorkloads) > 0 {
		row("owns workload clusters", strings.Join(rec.OwnsWorkloads, ", "))
	}
	row("created", rec.Created.Format(time.RFC3339))
	for _, f := range rec.Flux {
		row("  flux", fmt.Sprintf("%s=%s (ConfigMap %s/kubectl-bundle-slot; where no slot sets it: %s)", f.Variable, f.Value, f.Namespace, f.Default))
	}
	for _, sd := range rec.Seeded {
		how := "present"
		if sd.Pushed {
			how = "pushed"
		}
		row("  seeded", fmt.Sprintf("%s %s (%s from %s, %s)", sd.Ref, sd.Digest, sd.Kind, sd.Path, how))
	}
	for _, st := range rec.Steps {
		row("  step", fmt.Sprintf("%s done %s", st.Name, st.Finished.Format(time.RFC3339)))
	}
	return tw.Flush()
}

// active reads the active pointer for a report: damage (to it, the switch
// record, a protected slot's record or the journal) is said on stderr with
// its repair and the report goes on, showing the pointer's slot as active
// when the pointer itself reads.
func (s *session) active() string {
	if _, err := s.Protection(); err != nil {
		kcli.Errorf(s.streams.ErrOut, fmt.Errorf("warning: %w", err))
	}
	active, err := site.Read(s.dir).Active()
	if err != nil {
		return ""
	}
	return active
}

// soaking is the revert target of a soak, "" when none or unreadable.
func (s *session) soaking() string {
	_, soaking, err := s.Protected()
	if err != nil {
		return ""
	}
	return soaking
}

// losses lists what discarding a slot loses, records it (the manager
// does), and lets it go only when nothing is listed, the operator says yes
// on a terminal, or --yes was given.
func losses(ctx context.Context, cmd *cli.Command, s *session) error {
	name, err := oneSlot(cmd)
	if err != nil {
		return err
	}
	l, err := s.m.Losses(ctx, name)
	if err != nil {
		return err
	}
	if s.common.Output == kcli.OutputJSON {
		if err := kcli.WriteJSON(s.streams.Out, l); err != nil {
			return err
		}
	} else if !s.common.Quiet {
		printLosses(s.streams.Out, l)
	}
	if l.Empty() {
		return nil
	}
	if err := l.Refusal(); err != nil {
		return err
	}
	if cmd.Bool("yes") {
		fmt.Fprintf(s.streams.ErrOut, "discarding what slot %s holds (--yes)\n", name)
		return nil
	}
	if !askable(s.streams) {
		return kcli.Usage("slot %s holds what is listed above, which discarding it loses, and there is no terminal to ask: run again with --yes to discard it (the strategy scripts take --yes too)", name)
	}
	fmt.Fprintf(s.streams.ErrOut, "discard what slot %s holds, listed above? [y/N] ", name)
	answer, _ := bufio.NewReader(s.streams.In).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(answer)); a == "y" || a == "yes" {
		return nil
	}
	return errkind.New(errkind.Negative, "not confirmed: slot %s and what it holds are kept", name)
}

// confirmDestroy lists what destroying slot name loses, as losses does
// (recorded in the history), and lets the destroy go on only when nothing
// is listed or the operator says yes on a terminal. Without a terminal it
// refuses, changing nothing, and names the command with --yes: a retire
// printed by switch accept, run as printed, never discards workload
// clusters unasked. forced is a protected slot destroyed with --force:
// the list is said as a warning and the destroy goes on.
func (s *session) confirmDestroy(ctx context.Context, name string, forced bool) error {
	if rec, err := slot.Load(s.dir, name); err == nil && rec.Provider == slot.ProviderExisting {
		return nil // destroy leaves an existing cluster as it is: only the record goes
	}
	l, err := s.m.Losses(ctx, name)
	if err != nil {
		// The list is known; only its record in the history failed, as
		// destroy's own records may: that does not stop the destroy.
		fmt.Fprintf(s.streams.ErrOut, "warning: recording what slot %s holds in the history: %v\n", name, err)
	}
	if l.Empty() {
		return nil
	}
	printLosses(s.streams.ErrOut, l)
	if err := l.Refusal(); err != nil && !forced {
		return err
	}
	if forced {
		fmt.Fprintf(s.streams.ErrOut, "WARNING: --force: discarding what slot %s holds, listed above\n", name)
		return nil
	}
	yes := s.dir.Plugin("slot", "destroy", name, "--yes")
	if !askable(s.streams) {
		return errkind.New(errkind.Conflict, "destroying slot %s loses what is listed above (%s), and there is no terminal to ask: nothing was destroyed; to discard it, run: %s", name, l.Summary(), yes)
	}
	fmt.Fprintf(s.streams.ErrOut, "destroy slot %s and discard what it holds, listed above? [y/N] ", name)
	answer, _ := bufio.NewReader(s.streams.In).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(answer)); a == "y" || a == "yes" {
		return nil
	}
	return errkind.New(errkind.Conflict, "not confirmed: slot %s and what it holds are kept (%s discards it without asking)", name, yes)
}

// refuseUnnamed refuses the destroy of kind slot name while its
// management cluster holds Clusters that are not its workload clusters
// (slot.Losses.Refusal), listing what it holds first.
func (s *session) refuseUnnamed(ctx context.Context, name string) error {
	if rec, err := slot.Load(s.dir, name); err == nil && rec.Provider == slot.ProviderExisting {
		return nil
	}
	l, _ := s.m.Losses(ctx, name)
	if err := l.Refusal(); err != nil {
		printLosses(s.streams.ErrOut, l)
		return err
	}
	return nil
}

func printLosses(w io.Writer, l *slot.Losses) {
	fmt.Fprintf(w, "discarding slot %s loses:\n", l.Slot)
	for _, wl := range l.Workloads {
		fmt.Fprintf(w, "  workload cluster %s (its containers are deleted with the slot)\n", wl)
	}
	for _, wl := range l.Unnamed {
		fmt.Fprintf(w, "  workload cluster %s: NOT named by workloadClusters, its containers would be left running, owned by nothing\n", wl)
	}
	for _, c := range l.Claims {
		fmt.Fprintf(w, "  PersistentVolumeClaim %s/%s\t%s\n", c.Namespace, c.Name, c.Size)
	}
	for _, r := range l.Repositories {
		fmt.Fprintf(w, "  registry repository %s\n", r)
	}
	if l.Empty() {
		fmt.Fprintln(w, "  nothing listed")
	}
	if l.ClaimsUnknown != "" {
		fmt.Fprintf(w, "  (PersistentVolumeClaims not listed: %s)\n", l.ClaimsUnknown)
	}
	if l.RegistryUnknown != "" {
		fmt.Fprintf(w, "  (registry content not listed: %s)\n", l.RegistryUnknown)
	}
	if l.WorkloadsUnknown != "" {
		fmt.Fprintf(w, "  (workload clusters not listed: %s)\n", l.WorkloadsUnknown)
	}
	if len(l.Seeded) > 0 {
		fmt.Fprintf(w, "  (not lost: %s, seeded from the archives and unchanged)\n", strings.Join(l.Seeded, ", "))
	}
}

// askable: a terminal to ask on and to read the answer from.
func askable(st kcli.IOStreams) bool {
	f, ok := st.In.(*os.File)
	return ok && term.IsTerminal(int(f.Fd())) && kcli.IsTerminal(st.ErrOut)
}
