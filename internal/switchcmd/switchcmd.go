// Package switchcmd is the kubectl-bundle-switch command: to, back, accept
// and status over the active pointer and the aliases that follow it.
package switchcmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/gatecmd"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/kubeflags"
	"github.com/kubectl-bundle/kubectl-bundle/internal/pivot/mover"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
	"github.com/kubectl-bundle/kubectl-bundle/internal/runner"
	statesession "github.com/kubectl-bundle/kubectl-bundle/internal/session"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/switchover"
)

const description = `The one step of blue/green whose crash-safety matters most: the active
slot is one pointer file, replaced atomically. After it moves, the names
operators and scripts already use follow it:

  kube context   kind-airgap-mgmt (aliasContext) gets the active slot's cluster and user
  registry       the network alias krops-registry (registryAlias, on network kind)
                 moves to the active slot's registry container

A switch needs the target slot's last recorded gate to have passed within
--max-gate-age (kubectl bundle-gate --slot SLOT --record), unless --force.
Interrupted at any instant, status shows where it stopped and re-running the
same command completes it. Inside an open blue-green transaction, to records
SWITCHED and starts SOAKING, back records SWITCHED_BACK, accept records
ACCEPTED.

Switch modes (to --mode; default: the open transaction's --switch-mode),
what the workload clusters do:

  s2        (default) each slot runs the workload clusters its package built
  repoint   (S1, management-only packages) only the pointer and the aliases
            move; the workload clusters stay with the previous slot. Accept
            records them in its record: it owns them (status and slot list
            say so), is no longer a revert target, and slot destroy refuses
            it (exit 4) while it owns any; --force is the only way, said
            loudly and recorded. Back during the soak works as in s2.
  pivot     (S3) the Cluster API objects of the workload clusters move from
            the active slot's management cluster to SLOT's with clusterctl's
            mover, before the pointer; back moves them back. Refused
            (exit 3, nothing moved) when SLOT's providers do not serve a
            group/version/kind of the objects; when the previous slot would
            not serve what SLOT hands back, the switch could not be reverted
            and needs --yes. Each phase (pause, copy, delete on the source,
            unpause on the target) is recorded in <state>/pivot.json and the
            history: re-run after a crash, the switch finishes the move when
            its deletes had begun (resumed) and otherwise undoes it and
            unpauses the source (unpaused), says which, and goes on. A move
            that fails (the target refuses a create, the source a delete)
            before the deletes on the source is undone at once: the partial
            copy removed, the source's clusters unpaused, nothing switched
            (exit 3, naming how to finish it or go back); from the deletes
            on, the same command re-run finishes the move.`

// exitCodes is this binary's part of the suite's exit-code table.
var exitCodes = kcli.ExitCodesHelp("", map[errkind.Kind]string{
	errkind.Negative:    "no recent passing gate for the target slot; still soaking (accept --if-soaked)",
	errkind.Usage:       "an unknown slot",
	errkind.Environment: "I/O, docker or kubeconfig failure",
	errkind.Conflict:    "locked, another transaction step running, or nothing to go back to",
})

// Command builds kubectl-bundle-switch.
func Command(streams kcli.IOStreams) *cli.Command {
	with := func(mutate bool, fn func(ctx context.Context, cmd *cli.Command, s *session) error) cli.ActionFunc {
		return func(ctx context.Context, cmd *cli.Command) error {
			s, err := open(ctx, streams, cmd, mutate)
			if err != nil {
				return err
			}
			defer s.close()
			return fn(ctx, cmd, s)
		}
	}
	flags := []cli.Flag{
		kubeflags.Kubeconfig("kubeconfig holding the slots' and the alias context"),
		&cli.StringFlag{Name: "alias-context", Usage: "the context that follows the active slot (default kind-<clusterPrefix>: kind-airgap-mgmt) [$KUBECTL_BUNDLE_ALIAS_CONTEXT]"},
		&cli.StringFlag{Name: "registry-alias", Usage: "the network alias that follows the active registry (default krops-registry) [$KUBECTL_BUNDLE_REGISTRY_ALIAS]"},
		&cli.StringFlag{Name: "network", Usage: "the Docker network of the registries (default kind) [$KUBECTL_BUNDLE_NETWORK]"},
		&cli.StringFlag{Name: "soak-window", Usage: "how long a switch soaks before accept --if-soaked accepts it (default 24h) [$KUBECTL_BUNDLE_SOAK_WINDOW]"},
	}
	return kcli.Root(streams, &cli.Command{
		Name:  "kubectl-bundle-switch",
		Usage: "the active pointer: to / back / accept / status; kubeconfig and registry aliases follow it",
		Description: description + "\n\n" + `Examples:
  kubectl bundle-switch status
  kubectl bundle-switch to b
  kubectl bundle-switch back
  kubectl bundle-switch accept --if-soaked` + "\n\n" + exitCodes,
		Flags: flags,
		Commands: []*cli.Command{
			{Name: "to", Description: "Examples:\n  kubectl bundle-switch to b\n  kubectl bundle-switch to b --mode repoint\n  kubectl bundle-switch to b --force", Usage: "make SLOT active (needs a recent passing gate) and start the soak", ArgsUsage: "SLOT",
				Flags: []cli.Flag{
					&cli.DurationFlag{Name: "max-gate-age", Value: site.GateFresh, Usage: "how old SLOT's last passing gate may be"},
					&cli.BoolFlag{Name: "force", Usage: "switch without a recent passing gate"},
					&cli.StringFlag{Name: "mode", Usage: journal.SwitchModes + "; default: the open transaction's"},
					&cli.BoolFlag{Name: "yes", Usage: "with --mode pivot: pivot even when the previous slot could not take the objects back (no revert)"},
				}, Action: with(true, to)},
			{Name: "back", Description: "Examples:\n  kubectl bundle-switch back\n  kubectl bundle-switch back --gate gate.yaml --gate-timeout 15m", Usage: "during the soak, return to the previous slot once it passes its gate", ArgsUsage: " ",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "gate", Usage: "the gate file the previous slot must pass before the switch (default the open transaction's, else $KUBECTL_BUNDLE_GATE, else the built-in gate)", TakesFile: true},
					&cli.DurationFlag{Name: "gate-timeout", Usage: "how long that gate waits (default the open transaction's, else $KUBECTL_BUNDLE_GATE_TIMEOUT, else 10m)"},
					&cli.BoolFlag{Name: "force", Usage: "switch back without gating the previous slot (said and recorded in the history)"},
				}, Action: with(true, back)},
			{Name: "accept", Description: "Examples:\n  kubectl bundle-switch accept\n  kubectl bundle-switch accept --if-soaked", Usage: "end the soak and print the command that retires the old slot", ArgsUsage: " ",
				Flags:  []cli.Flag{&cli.BoolFlag{Name: "if-soaked", Usage: "only once the soak window has passed (for a timer); until then say when it ends and exit 1"}},
				Action: with(true, accept)},
			{Name: "status", Description: "Examples:\n  kubectl bundle-switch status\n  kubectl bundle-switch status -o jsonpath='{.soakRemaining}'\n  kubectl bundle-journal site", Usage: "active and previous slot, phase, soak, and whether the aliases agree with active", ArgsUsage: " ",
				Action: with(false, status)},
		},
	})

}

// Main runs the command with args (os.Args form) and returns the exit code.
func Main(ctx context.Context, streams kcli.IOStreams, args []string) int {
	return kcli.Main(ctx, streams, args, Command)
}

type session struct {
	*statesession.Session
	streams kcli.IOStreams
	common  *kcli.Common
	sw      *switchover.Switcher
}

func (s *session) close() { s.Close() }

func open(ctx context.Context, streams kcli.IOStreams, cmd *cli.Command, mutate bool) (*session, error) {
	common, err := kcli.ParseCommon(cmd)
	if err != nil {
		return nil, err
	}
	log := common.Log(streams)
	ss, err := statesession.Open(statesession.Options{StateDir: common.StateDir, Mutate: mutate, Log: log})
	if err != nil {
		return nil, err
	}
	dir := ss.Dir
	cfg, err := slot.LoadConfig(dir.Join("config.yaml"), os.Getenv, map[string]string{
		"aliasContext": cmd.String("alias-context"), "registryAlias": cmd.String("registry-alias"),
		"network": cmd.String("network"), "soakWindow": cmd.String("soak-window"),
	})
	if err != nil {
		ss.Close()
		return nil, err
	}
	soak, _ := time.ParseDuration(cfg.SoakWindow)
	s := &session{Session: ss, streams: streams, common: common}
	s.sw = &switchover.Switcher{Dir: dir, Run: runner.From(ctx), AliasContext: cfg.AliasContext, RegistryAlias: cfg.RegistryAlias,
		Network: cfg.Network, Kubeconfig: cmd.String("kubeconfig"), SoakWindow: soak, MaxGateAge: cmd.Duration("max-gate-age"),
		Pivot: mover.Run}
	m := &slot.Manager{Dir: dir, Config: cfg, Run: runner.From(ctx)}
	s.sw.Workloads = m.RunningWorkloads
	s.sw.CheckCluster = m.CheckCluster
	s.sw.WorkloadAccess = func(ctx context.Context, name string) ([]*slot.Workload, error) { return m.Workloads(ctx, name, "") }
	s.sw.WorkloadAliases = cfg.WorkloadClusters
	s.sw.RegistryService = m.RefreshRegistryService
	s.sw.RunsWorkload = func(ctx context.Context, name, cluster string) (bool, error) {
		if n, err := m.NamesOf(name); err == nil && slices.Contains(n.Workloads, cluster) {
			return true, nil
		}
		switch _, err := m.Workloads(ctx, name, cluster); {
		case err == nil:
			return true, nil
		case apierrors.IsNotFound(err):
			return false, nil // its management cluster holds no kubeconfig of it
		default:
			return false, err
		}
	}
	if !common.Quiet {
		m.Log = streams.ErrOut
	}
	if !common.Quiet {
		s.sw.Log = streams.ErrOut
	}
	if mutate {
		s.sw.Journal = ss.Journal
	}
	return s, nil
}

func noArgs(cmd *cli.Command) error {
	if cmd.Args().Len() > 0 {
		return kcli.Usage("%s takes no arguments", cmd.Name)
	}
	return nil
}

func to(ctx context.Context, cmd *cli.Command, s *session) error {
	if cmd.Args().Len() != 1 {
		return kcli.Usage("to takes one SLOT (e.g. b)")
	}
	if cmd.IsSet("mode") {
		mode, err := journal.ParseSwitchMode(cmd.String("mode"))
		if err != nil {
			return kcli.Usage("--mode: %v", err)
		}
		if mode == journal.SwitchS2 {
			mode = "s2" // named: it overrides the transaction's
		}
		s.sw.Mode = mode
	}
	s.sw.Yes = cmd.Bool("yes")
	rec, err := s.sw.To(ctx, cmd.Args().First(), cmd.Bool("force"))
	if err != nil {
		return err
	}
	return s.report(ctx, pivotNote(s.sw)+fmt.Sprintf("switched to slot %s (previous: %s); soaking for %s: %s reverts, %s ends it",
		rec.Target, orNone(rec.Previous), rec.SoakWindow, s.sw.Dir.Plugin("switch", "back"), s.sw.Dir.Plugin("switch", "accept")))
}

func back(ctx context.Context, cmd *cli.Command, s *session) error {
	if err := noArgs(cmd); err != nil {
		return err
	}
	s.sw.GateBack = func(ctx context.Context, name string) error {
		file, timeout, err := backGate(cmd, s)
		if err != nil {
			return err
		}
		if file != "" && file != "-" {
			f, err := os.Open(file)
			if err != nil {
				return kcli.Usage("the gate file %s cannot be read (%v): slot %s was not gated and nothing was switched; restore the file, or name another: %s", file, err, name, s.sw.Dir.Plugin("switch", "back", "--gate", "FILE"))
			}
			f.Close()
		}
		rec, err := slot.Load(s.Dir, name)
		if err != nil {
			return err
		}
		if !s.common.Quiet {
			fmt.Fprintf(s.streams.ErrOut, "gating slot %s (%s, up to %s) before switching back to it\n", name, orDefault(file), timeout)
		}
		return gatecmd.OnSlot(ctx, s.streams, rec, s.sw.Kubeconfig, file, timeout)
	}
	rec, err := s.sw.Back(ctx, cmd.Bool("force"))
	if err != nil {
		return err
	}
	return s.report(ctx, pivotNote(s.sw)+fmt.Sprintf("switched back to slot %s; slot %s can be destroyed: %s", rec.Target, rec.Previous, s.sw.Dir.Plugin("slot", "destroy", rec.Previous)))
}

// backGate is the gate back runs against the previous slot: --gate and
// --gate-timeout, else the open transaction's (the strategy script's),
// else the site's ($KUBECTL_BUNDLE_GATE, $KUBECTL_BUNDLE_GATE_TIMEOUT),
// else the built-in gate and its 10m.
func backGate(cmd *cli.Command, s *session) (file string, timeout time.Duration, err error) {
	var recorded *journal.Gate
	if t, err := site.ReadTxn(s.Dir); err == nil && t != nil {
		recorded = t.Gate
	}
	file, tv := cmd.String("gate"), ""
	if recorded != nil {
		if file == "" {
			file = recorded.File
		}
		tv = recorded.Timeout
	}
	if file == "" {
		file = os.Getenv("KUBECTL_BUNDLE_GATE")
	}
	if tv == "" {
		tv = os.Getenv("KUBECTL_BUNDLE_GATE_TIMEOUT")
	}
	timeout = 10 * time.Minute
	if cmd.IsSet("gate-timeout") {
		return file, cmd.Duration("gate-timeout"), nil
	}
	if tv != "" {
		if timeout, err = time.ParseDuration(tv); err != nil {
			return "", 0, kcli.Usage("the gate timeout %q: %v (pass --gate-timeout)", tv, err)
		}
	}
	return file, timeout, nil
}

func orDefault(file string) string {
	if file == "" {
		return "the built-in gate"
	}
	return file
}

func accept(ctx context.Context, cmd *cli.Command, s *session) error {
	if err := noArgs(cmd); err != nil {
		return err
	}
	res, err := s.sw.Accept(ctx, cmd.Bool("if-soaked"))
	if err != nil {
		return err
	}
	// Still soaking is a negative verdict (exit 1), so that a timer's
	// "accept --if-soaked && retire" stops here until the window is over.
	var verdict error
	if !res.Accepted {
		verdict = errkind.Wrap(errkind.Negative, errStillSoaking)
	}
	switch {
	case s.common.Output == kcli.OutputJSON:
		if err := kcli.WriteJSON(s.streams.Out, res); err != nil {
			return err
		}
		return verdict
	case s.common.Quiet:
		return verdict
	case !res.Accepted:
		fmt.Fprintf(s.streams.Out, "slot %s is still soaking until %s (%s left); not accepted yet\n",
			res.Slot, res.SoakEnds.Format(time.RFC3339), res.Left.Round(time.Second))
		return verdict
	}
	msg := fmt.Sprintf("accepted slot %s", res.Slot)
	if res.Retire != "" {
		msg += "; retire the old slot with: " + res.Retire
	}
	if res.Keeps != "" {
		msg += fmt.Sprintf(" (mode repoint); slot %s owns workload clusters: %s, and is kept for them (no longer a revert target)", res.Keeps, strings.Join(res.Owns, ", "))
	}
	_, err = fmt.Fprintln(s.streams.Out, msg)
	return err
}

// errStillSoaking is the verdict accept --if-soaked has already reported.
var errStillSoaking = errors.New("")

// report prints msg, or the status as JSON.
func (s *session) report(ctx context.Context, msg string) error {
	if s.common.Output == kcli.OutputJSON {
		st, err := s.sw.Status(ctx)
		if err != nil {
			return err
		}
		return kcli.WriteJSON(s.streams.Out, st)
	}
	if !s.common.Quiet {
		fmt.Fprintln(s.streams.Out, msg)
	}
	return nil
}

// pivotNote says what a pivot did, as the first lines of the report.
func pivotNote(sw *switchover.Switcher) string {
	res := sw.Pivoted()
	if res == nil {
		return ""
	}
	note := ""
	if res.Recovered != "" {
		note = strings.ToUpper(res.Recovered) + ": " + res.RecoveredNote + "\n"
	}
	return note + fmt.Sprintf("pivoted %d Cluster API objects\n", res.Moved)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func status(ctx context.Context, cmd *cli.Command, s *session) error {
	if err := noArgs(cmd); err != nil {
		return err
	}
	st, err := s.sw.Status(ctx)
	if err != nil {
		return err
	}
	if s.common.Output == kcli.OutputJSON {
		return kcli.WriteJSON(s.streams.Out, st)
	}
	if s.common.Quiet {
		return nil
	}
	tw := tabwriter.NewWriter(s.streams.Out, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("active", orNone(st.Active))
	row("previous", orNone(st.Previous))
	row("phase", orNone(st.Phase))
	if st.SoakStarted != nil {
		row("soak", fmt.Sprintf("started %s, %s left of %s", st.SoakStarted.Format(time.RFC3339), st.SoakRemaining, st.SoakWindow))
	}
	row("context "+st.AliasContext, agree(st.KubeconfigAlias, st.KubeconfigAgree))
	if st.RegistryHolder != "" || !st.RegistryAgree {
		row("registry "+st.RegistryAlias, agree(st.RegistryHolder, st.RegistryAgree))
	}
	if st.Mode != "" {
		row("mode", st.Mode)
	}
	tw.Flush()
	for _, o := range st.Owners {
		fmt.Fprintln(s.streams.Out, o)
	}
	for _, d := range st.Damaged {
		fmt.Fprintf(s.streams.Out, "DAMAGED: %s\n", d)
	}
	switch {
	case st.Phase == record.PhaseSwitching || st.Phase == record.PhaseSwitchingBack:
		fmt.Fprintf(s.streams.Out, "INTERRUPTED: a switch to %s did not finish; run: %s\n", st.Target, st.Next)
	case !st.KubeconfigAgree || !st.RegistryAgree:
		fmt.Fprintf(s.streams.Out, "DIVERGED: the aliases do not follow the active slot %s; run: %s\n", st.Active, st.Next)
	case !st.Consistent:
		fmt.Fprintf(s.streams.Out, "next: %s\n", st.Next)
	}
	return nil
}

func agree(slotName string, ok bool) string {
	s := "slot " + orNone(slotName)
	if ok {
		return s + " (agrees with active)"
	}
	return s + " (DOES NOT agree with active)"
}
