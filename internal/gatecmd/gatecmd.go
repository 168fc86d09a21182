// Package gatecmd is the kubectl-bundle-gate command: evaluate a health gate
// against a slot or any kube context, waiting on watches until it passes.
package gatecmd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v3"
	"k8s.io/client-go/rest"

	"github.com/kubectl-bundle/kubectl-bundle/internal/capture"
	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/evidence"
	"github.com/kubectl-bundle/kubectl-bundle/internal/gate"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/kubeflags"
	"github.com/kubectl-bundle/kubectl-bundle/internal/runner"
	"github.com/kubectl-bundle/kubectl-bundle/internal/session"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

const description = `Decides whether a slot is healthy enough to switch to. A gate is a YAML
document (kind Gate) of named checks:

  resource   an object (name or label selector) has a condition True, or,
             without condition, kstatus says Current
  field      a JSONPath of an object equals / contains / matches a value
  images     every container image of every pod comes from an allowed registry
  pods       at least N pods Running and Ready
  nodes      at least N nodes Ready
  workload   nested checks inside a Cluster API workload cluster, reached
             through its <cluster>-kubeconfig secret
  zarf       every deployed Zarf package's component healthChecks

Without -f the built-in gate runs: the krops site's checks (Zarf registry
images, Flux source and Kustomization Ready, workload cluster Available, its
nodes, Flux and podinfo) plus the zarf check. --print-default prints it to
copy and edit.

The gate waits on watches, not sleeps: it returns as soon as the last check
passes, or at --timeout with every failing check's last observed state.`

// exitCodes is this binary's part of the suite's exit-code table.
var exitCodes = kcli.ExitCodesHelp("every check passed", map[errkind.Kind]string{
	errkind.Negative:    "a check failed or the gate timed out",
	errkind.Usage:       "a bad gate file (the message names the field), a --kubeconfig or --context that does not exist",
	errkind.Environment: "the cluster is unreachable",
	errkind.Conflict:    "the state dir is locked, or the slot changed under the gate (--record: another command deployed into it, rebuilt or destroyed it while the gate ran; nothing is recorded)",
})

// Command builds kubectl-bundle-gate.
func Command(streams kcli.IOStreams) *cli.Command {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "filename", Aliases: []string{"f"}, Usage: "gate file (- for stdin; default the built-in gate)", TakesFile: true,
			Sources: cli.EnvVars("KUBECTL_BUNDLE_GATE")},
		&cli.BoolFlag{Name: "print-default", Usage: "print the built-in gate as YAML and exit"},
		&cli.BoolFlag{Name: "parse-only", Usage: "read and check the gate (-f) and exit, evaluating nothing: exit 0 when it would run, 2 naming what is wrong (a script checks its --gate before its first step)"},
		&cli.StringFlag{Name: "slot", Usage: "evaluate against this slot's cluster (instead of --kubeconfig/--context)"},
		&cli.DurationFlag{Name: "timeout", HideDefault: true, Usage: "how long to wait for every check to pass (default gateTimeout in the state dir's config.yaml, else the largest check timeout: 20m for the built-in gate, else 10m)",
			Sources: cli.EnvVars("KUBECTL_BUNDLE_GATE_TIMEOUT")},
		&cli.StringSliceFlag{Name: "check-timeout", Usage: "NAME=DURATION: how long check NAME may take to pass, from the gate's start (repeatable; overrides the check's timeout: and gateCheckTimeouts in config.yaml; built-in gate: flux-kustomization 10m, workload-cluster 20m)"},
		&cli.DurationFlag{Name: "poll-interval", Usage: "fallback re-evaluation interval when no watch event arrives (default the gate's pollInterval, 30s)"},
		&cli.BoolFlag{Name: "once", Usage: "evaluate every check once and exit, without waiting"},
		&cli.BoolFlag{Name: "management-only", Usage: "skip the checks of workload clusters (workload checks, and checks of Cluster API objects): for a slot that owns none, as in an S1 repoint, where they stay with the old slot"},
		&cli.BoolFlag{Name: "record", Usage: "store the result in the slot's record (needs --slot; the switch requires a recent pass)"},
	}
	flags = append(flags, kubeflags.Flags()...)
	return kcli.Root(streams, &cli.Command{
		Name:      "kubectl-bundle-gate",
		Usage:     "health gates against a slot or any kube context; declarative checks; watch-based",
		UsageText: "kubectl bundle-gate [-f gate.yaml] [--slot NAME | --kubeconfig FILE --context NAME -n NS] [--timeout 10m] [--once] [--record] [-o text|json]",
		Description: description + "\n\n" + `Examples:
  kubectl bundle-gate --slot b
  kubectl bundle-gate --slot b -f gate.yaml --timeout 15m --record
  kubectl bundle-gate --context kind-airgap-mgmt -o json` + "\n\n" + exitCodes,
		Flags: flags,
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				return kcli.Usage("unexpected argument %q: the gate plugin takes flags only", cmd.Args().First())
			}
			return run(ctx, streams, cmd)
		},
	})

}

// Main runs the command with args (os.Args form) and returns the exit code.
func Main(ctx context.Context, streams kcli.IOStreams, args []string) int {
	return kcli.Main(ctx, streams, args, Command)
}

func run(ctx context.Context, streams kcli.IOStreams, cmd *cli.Command) error {
	common, err := kcli.ParseCommon(cmd)
	if err != nil {
		return err
	}
	if cmd.Bool("print-default") {
		_, err := streams.Out.Write(gate.DefaultYAML())
		return err
	}
	g, src, err := loadGateSource(streams, cmd.String("filename"))
	if err != nil {
		return err
	}
	if cmd.Bool("management-only") {
		// Fewer checks: another gate than the file's.
		src.Digest += "+management-only"
		var dropped []string
		if g, dropped = g.ManagementOnly(); len(g.Spec.Checks) == 0 {
			return kcli.Usage("--management-only leaves no check of gate %s: each checks a workload cluster", g.Metadata.Name)
		}
		if len(dropped) > 0 && !common.Quiet {
			fmt.Fprintf(streams.ErrOut, "management only: not checking %s (the workload clusters are not this slot's)\n", strings.Join(dropped, ", "))
		}
	}
	if cmd.Bool("parse-only") {
		return nil
	}
	slotName := cmd.String("slot")
	if slotName != "" && kubeflags.Set(cmd) {
		return kcli.Usage("--slot and --kubeconfig/--context both name a cluster: give one")
	}
	if cmd.Bool("record") && slotName == "" {
		return kcli.Usage("--record stores the result in a slot's record: add --slot NAME")
	}
	var dir *state.Dir
	var rec *slot.Record
	if slotName != "" {
		ss, err := session.Open(session.Options{StateDir: common.StateDir})
		if err != nil {
			return err
		}
		dir = ss.Dir
		// A result to record is a change to the site: damaged state stops
		// it before the gate runs, as it stops every mutating command.
		if cmd.Bool("record") {
			if err := ss.Check(); err != nil {
				return err
			}
			// The journal's own damage (a history cut, a lost transaction)
			// is named before any refusal of the slot's (its repair first).
			if _, err := site.ReadTxn(ss.Dir); err != nil {
				return err
			}
			switch cut, err := journal.New(ss.Dir).CutHistory(); {
			case err != nil:
				return err
			case cut != nil:
				return errkind.Wrap(errkind.Environment, cut)
			}
		}
		if rec, err = ss.LoadSlot(slotName); err != nil {
			return err
		}
		// The slot's context must still reach the cluster its record
		// names: a context pointed at another slot's cluster would gate
		// (and record) that cluster's health as this slot's (issue 32,
		// class 2). A record that names none is identified by a gate that
		// records, as by a deploy; a read-only gate leaves it.
		if rec.ClusterID != nil || cmd.Bool("record") {
			m := &slot.Manager{Dir: dir}
			if !common.Quiet {
				m.Log = streams.ErrOut
			}
			if err := m.CheckCluster(ctx, rec, "gate"); err != nil {
				return err
			}
		}
	}
	kubeconfig, kubeContext := "", ""
	if rec != nil {
		kubeconfig, kubeContext = rec.Kubeconfig, rec.Context
	}
	target, err := kubeflags.Resolve(ctx, cmd, kubeconfig, kubeContext)
	if err != nil {
		return err
	}
	cluster, err := gate.NewCluster("", target.Config)
	if err != nil {
		return kcli.Environment(err)
	}
	cluster.DefaultNamespace = target.Namespace

	timeout, checkTimeouts, err := timeouts(common.StateDir, g, cmd)
	if err != nil {
		return err
	}
	opts := gate.Options{
		Timeout:       timeout,
		CheckTimeouts: checkTimeouts,
		Once:          cmd.Bool("once"),
		PollInterval:  cmd.Duration("poll-interval"),
		Runner:        runner.From(ctx),
	}
	if rec != nil && rec.RegistryPort > 0 {
		opts.SlotRegistries = []string{"127.0.0.1:" + strconv.Itoa(rec.RegistryPort)}
	}
	showProgress := !common.Quiet && common.Output == kcli.OutputText && kcli.IsTerminal(streams.ErrOut)
	if showProgress {
		opts.OnEvaluate = func(rs []gate.Result) { progressLine(streams.ErrOut, rs) }
	}
	opts.Slot = slotName
	if rec != nil && rec.Adopted {
		// An adopted site's workload clusters keep their own, unsuffixed
		// names: "-@slot" is dropped, as for a site not built in slots.
		opts.Slot = ""
	}
	rep, err := gate.Run(ctx, g, cluster, opts)
	if showProgress {
		fmt.Fprint(streams.ErrOut, "\r\033[K")
	}
	var txn string
	if dir != nil {
		txn = evidence.Current(dir)
	}
	// A failure of a gate that decides a step (--record, or inside a
	// transaction) is captured for the operator.
	captures := slotName != "" && (cmd.Bool("record") || txn != "")
	if err != nil {
		var ue *gate.UnreachableError
		if errors.As(err, &ue) && target.Context != "" {
			err = fmt.Errorf("context %s: %w", target.Context, err)
		}
		if captures {
			if path := captureFailure(ctx, streams, dir, common.StateDir, slotName, rec, target.Config); path != "" {
				err = fmt.Errorf("%w\ndebug capture: %s", err, path)
			}
		}
		return err
	}
	if txn != "" {
		evidence.Warn(streams.ErrOut, "keeping the gate result", keepResult(dir, txn, slotName, rep, timeout))
	}
	if cmd.Bool("record") {
		if err := record(dir, slotName, rec, src, rep); err != nil {
			return err
		}
	}
	switch {
	case common.Output == kcli.OutputJSON:
		if err := kcli.WriteJSON(streams.Out, rep); err != nil {
			return err
		}
	case !common.Quiet:
		printTable(streams.Out, rep, kcli.UseColor(streams.Out))
		printSummary(streams.ErrOut, rep, timeout, kcli.UseColor(streams.ErrOut))
		if cmd.Bool("record") {
			fmt.Fprintf(streams.ErrOut, "recorded in slot %s\n", slotName)
		}
	}
	if !rep.Passed {
		if captures {
			if path := captureFailure(ctx, streams, dir, common.StateDir, slotName, rec, target.Config); path != "" {
				fmt.Fprintf(streams.ErrOut, "the gate of slot %s failed; debug capture: %s\n", slotName, path)
			}
		}
		return kcli.Reported(errkind.Negative)
	}
	return nil
}

// keepResult writes the gate's report into the transaction's evidence, as
// JSON and as the table.
func keepResult(dir *state.Dir, txn, slotName string, rep *gate.Report, timeout time.Duration) error {
	name := filepath.Join(evidence.GateDir, evidence.Stamp(rep.Finished)+"-"+slotName)
	if err := evidence.WriteJSON(dir, txn, name+".json", rep); err != nil {
		return err
	}
	var table bytes.Buffer
	printTable(&table, rep, false)
	printSummary(&table, rep, timeout, false)
	return evidence.WriteFile(dir, txn, name+".txt", table.Bytes())
}

// captureFailure captures what the failing slot shows, and returns the
// capture's path ("" when it could not be made: said as a warning).
func captureFailure(ctx context.Context, streams kcli.IOStreams, dir *state.Dir, stateDir, slotName string, rec *slot.Record, restCfg *rest.Config) string {
	fmt.Fprintf(streams.ErrOut, "capturing what slot %s shows (each item at most %s and %d bytes)\n", slotName, capture.DefaultTimeout, capture.DefaultMaxBytes)
	cfg, _ := siteConfig(stateDir)
	path, err := capture.ForSlot(ctx, dir, capture.Failure{What: "gate", Slot: slotName, Record: rec, Config: cfg, Rest: restCfg, Run: runner.From(ctx)})
	evidence.Warn(streams.ErrOut, "debug capture", err)
	return path
}

// DefaultTimeout is the gate's timeout when neither a flag, the config nor
// a check names one.
const DefaultTimeout = 10 * time.Minute

// timeouts resolves the gate's timeout and its checks' own: --timeout,
// else gateTimeout in the state dir's config, else the largest check
// timeout, else DefaultTimeout; a check's is --check-timeout, else
// gateCheckTimeouts in the config, else its timeout: in the gate.
func timeouts(stateDir string, g *gate.Gate, cmd *cli.Command) (time.Duration, map[string]time.Duration, error) {
	cfg, err := siteConfig(stateDir)
	if err != nil {
		return 0, nil, err
	}
	overrides := map[string]time.Duration{}
	for name, v := range cfg.GateCheckTimeouts {
		d, _ := time.ParseDuration(v) // validated by LoadConfig
		overrides[name] = d
	}
	for _, kv := range cmd.StringSlice("check-timeout") {
		name, v, ok := strings.Cut(kv, "=")
		d, err := time.ParseDuration(v)
		if !ok || name == "" || err != nil || d <= 0 {
			return 0, nil, kcli.Usage("--check-timeout %q: want NAME=DURATION (e.g. flux-kustomization=10m)", kv)
		}
		overrides[name] = d
	}
	checks, err := g.CheckTimeouts(overrides)
	if err != nil {
		return 0, nil, kcli.Usage("%v", err)
	}
	timeout := cmd.Duration("timeout")
	if !cmd.IsSet("timeout") {
		timeout = cfg.Duration("gateTimeout")
	}
	if timeout <= 0 {
		timeout = gate.LongestTimeout(checks)
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return timeout, checks, nil
}

// siteConfig reads the state dir's config.yaml (the defaults when there is
// none) without creating the state dir.
func siteConfig(flag string) (*slot.Config, error) {
	dir, err := state.Resolve(flag)
	if err != nil {
		return nil, err
	}
	return slot.LoadConfig(filepath.Join(dir, "config.yaml"), os.Getenv, nil)
}

func loadGate(streams kcli.IOStreams, name string) (*gate.Gate, error) {
	g, _, err := loadGateSource(streams, name)
	return g, err
}

// gateSource is which gate ran, as a recorded result names it: its file
// (absolute; "" for the built-in gate, "-" for stdin) and the sha256 of
// its bytes, so that two results can be told to be of the same gate.
type gateSource struct{ File, Digest string }

// loadGateSource reads and parses the gate named by name ("" for the
// built-in gate, "-" for stdin) and says which it is.
func loadGateSource(streams kcli.IOStreams, name string) (*gate.Gate, gateSource, error) {
	if name == "" {
		sum := sha256.Sum256(gate.DefaultYAML())
		return gate.Default(), gateSource{Digest: "sha256:" + hex.EncodeToString(sum[:])}, nil
	}
	var r io.Reader = streams.In
	src := gateSource{File: name}
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, src, kcli.Usage("reading the gate file: %v", err)
		}
		defer f.Close()
		r = f
		if abs, err := filepath.Abs(name); err == nil {
			src.File = abs
		}
	}
	data, err := gate.ReadAll(r)
	var spec *gate.SpecError
	if errors.As(err, &spec) {
		return nil, src, kcli.Usage("gate file %s: %v", name, err)
	}
	if err != nil {
		return nil, src, kcli.Usage("reading the gate file %s: %v", name, err)
	}
	sum := sha256.Sum256(data)
	src.Digest = "sha256:" + hex.EncodeToString(sum[:])
	g, warnings, err := gate.Parse(bytes.NewReader(data))
	if err != nil {
		return nil, src, kcli.Usage("gate file %s: %v", name, err)
	}
	for _, w := range warnings {
		fmt.Fprintf(streams.ErrOut, "warning: %s: %s\n", name, w)
	}
	return g, src, nil
}

// record stores the result in the slot's record, under the state lock, so
// that the switch can require a recent pass for the package deployed now.
// The pass belongs to what the slot held when the gate started (start, its
// record then): when another command deployed, rebuilt or destroyed the
// slot meanwhile, or a deploy into it started or failed, the result says
// nothing about what is there now and is not recorded. A pass clears an
// unfinished deploy (what the slot holds passed the gate).
func record(dir *state.Dir, name string, start *slot.Record, src gateSource, rep *gate.Report) error {
	started := start.Package
	ss, err := session.Open(session.Options{StateDir: dir.Path, Mutate: true})
	if err != nil {
		return err
	}
	defer ss.Close()
	if err := ss.Check(); err != nil {
		return err
	}
	rec, err := ss.LoadSlot(name)
	if err != nil {
		return err
	}
	if !samePackage(started, rec.Package) {
		return errkind.New(errkind.Conflict, "slot %s changed under the gate: %s was deployed when the gate started, %s is deployed now; the result is not recorded: run the gate again (%s, with the same gate file)",
			name, describePackage(started), describePackage(rec.Package), ss.Dir.Plugin("gate", "--slot", name, "--record"))
	}
	if !start.Deploying.Equal(rec.Deploying) {
		now := "no deploy is under way now"
		if rec.Deploying != nil {
			now = "now: " + rec.Deploying.Describe()
		}
		return errkind.New(errkind.Conflict, "slot %s changed under the gate: a deploy into it started, failed or finished while the gate ran (%s); the result is not recorded: run the gate again (%s, with the same gate file)",
			name, now, ss.Dir.Plugin("gate", "--slot", name, "--record"))
	}
	res := &slot.GateResult{Gate: rep.Gate, Passed: rep.Passed, TimedOut: rep.TimedOut, Time: rep.Finished.UTC(), File: src.File, Digest: src.Digest}
	for _, f := range rep.Failed() {
		res.Failed = append(res.Failed, f.Name)
	}
	if rec.Package != nil {
		res.Package = rec.Package.Digest
	}
	rec.Gate = res
	if rep.Passed {
		rec.Deploying = nil
	}
	return slot.Save(ss.Dir, rec)
}

// samePackage reports whether a and b are one deployment: the same package,
// deployed at the same time (a redeploy of the same package is a change).
func samePackage(a, b *slot.PackageRef) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Digest == b.Digest && a.Deployed.Equal(b.Deployed)
}

func describePackage(p *slot.PackageRef) string {
	if p == nil {
		return "no package"
	}
	d := p.Digest
	if len(d) > 12 {
		d = d[:12]
	}
	return fmt.Sprintf("package %s (deployed %s)", d, p.Deployed.UTC().Format(time.RFC3339))
}

func progressLine(w io.Writer, rs []gate.Result) {
	passed := 0
	var failing []string
	for _, r := range rs {
		if r.Status == gate.Pass {
			passed++
		} else {
			failing = append(failing, r.Name+" ("+r.Reason+")")
		}
	}
	line := fmt.Sprintf("waiting: %d/%d checks pass; failing: %s", passed, len(rs), strings.Join(failing, ", "))
	if len(line) > 120 {
		line = line[:117] + "..."
	}
	fmt.Fprintf(w, "\r\033[K%s", line)
}

// OnSlot runs a gate against slot rec's cluster as kubectl bundle-gate
// --slot does, waiting up to timeout: file is the gate file ("" for the
// built-in gate), kubeconfig the caller's when the record names none. The
// failing checks go to streams.ErrOut. A gate that does not pass is a
// Negative error naming them; an unreachable cluster is Environment.
func OnSlot(ctx context.Context, streams kcli.IOStreams, rec *slot.Record, kubeconfig, file string, timeout time.Duration) error {
	g, err := loadGate(streams, file)
	if err != nil {
		return err
	}
	if rec.Kubeconfig != "" {
		kubeconfig = rec.Kubeconfig
	}
	target, err := kubeflags.ResolveNamed(kubeconfig, rec.Context, "", true)
	if err != nil {
		return err
	}
	cluster, err := gate.NewCluster("", target.Config)
	if err != nil {
		return kcli.Environment(err)
	}
	cluster.DefaultNamespace = target.Namespace
	opts := gate.Options{Timeout: timeout, Runner: runner.From(ctx), Slot: rec.Name}
	if rec.RegistryPort > 0 {
		opts.SlotRegistries = []string{"127.0.0.1:" + strconv.Itoa(rec.RegistryPort)}
	}
	rep, err := gate.Run(ctx, g, cluster, opts)
	if err != nil {
		return fmt.Errorf("gating slot %s: %w", rec.Name, err)
	}
	if rep.Passed {
		return nil
	}
	printTable(streams.ErrOut, rep, false)
	var failed []string
	for _, r := range rep.Failed() {
		failed = append(failed, r.Name)
	}
	what := "failing: " + strings.Join(failed, ", ")
	if rep.TimedOut {
		what += fmt.Sprintf("; waited %s", timeout)
	}
	return errkind.New(errkind.Negative, "%s", what)
}
