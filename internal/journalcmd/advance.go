package journalcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/evidence"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/plan"
	"github.com/kubectl-bundle/kubectl-bundle/internal/runner"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// advanceCommand is what a strategy script's loop calls (scripts/lib.sh,
// drive): each call makes one step of the run, prints it, and exits
// cli.ExitMore while more remain, else with the run's own exit code after
// its summary. What the run has done so far (its summary, where it is) is
// kept under the run lock the script holds, so a killed run's re-run
// starts afresh from the journal. Hidden: operators run the scripts.
func advanceCommand(streams kcli.IOStreams) *cli.Command {
	return &cli.Command{
		Name:      "advance",
		Hidden:    true,
		Usage:     "make the next step of a strategy script's run (what the scripts call in their loop)",
		ArgsUsage: "STRATEGY OP [SCRIPT ARGS...]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "script", Usage: "the script's absolute path, for the commands the run prints"},
			&cli.BoolFlag{Name: "check", Usage: "check the arguments, print the plan of --dry-run; exit 10 when the run may begin"},
			&cli.IntFlag{Name: "hold", Value: -1, Usage: "hold the run lock on the script's descriptor N for its whole run"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error { return advance(ctx, streams, cmd) },
	}
}

func advance(ctx context.Context, streams kcli.IOStreams, cmd *cli.Command) error {
	args := cmd.Args().Slice()
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	r, err := parseArgs(args, cmd.String("script"), os.Getenv, cmd.Bool("check"))
	if err != nil {
		return err
	}
	common, err := kcli.ParseCommon(cmd)
	if err != nil {
		return err
	}
	d, err := state.Open(common.StateDir)
	if err != nil {
		return kcli.Environment(err)
	}
	x := &run{ctx: ctx, in: streams.In, out: streams.Out, errOut: streams.ErrOut, r: r, d: d}
	switch {
	case cmd.Bool("check"):
		if r.dryRun {
			return x.dryRun()
		}
		return &kcli.ExitError{Code: kcli.ExitMore}
	case cmd.Int("hold") >= 0:
		return x.hold(int(cmd.Int("hold")))
	}
	if err := x.load(); err != nil {
		return err
	}
	if x.sc.PC != "" {
		// Damaged state stops the run before its next step, naming the
		// repair (each step's plugin would refuse it too).
		err = x.checkState(streams, cmd)
	}
	if err == nil {
		err = x.step()
	}
	if serr := x.save(); serr != nil {
		// A run whose progress is not kept would begin again at its
		// first step on every call, for ever: it stops here instead.
		var more *kcli.ExitError
		if err == nil || errors.As(err, &more) && more.Code == kcli.ExitMore {
			return serr
		}
	}
	return err
}

// run is one call of a script's run.
type run struct {
	ctx         context.Context
	in          io.Reader
	out, errOut io.Writer
	r           *runArgs
	d           *state.Dir
	sc          scratch
	scPath      string
	closers     []io.Closer
}

// scratch is what a run has done so far, between the calls of its loop:
// kept beside the run lock, valid for the run that wrote it only.
type scratch struct {
	Run     string   `json:"run"`
	PC      string   `json:"pc"`
	Summary []string `json:"summary"`
	// Failed: this run reported the failure the recovery follows.
	Failed bool `json:"failed,omitempty"`
	// Evidence is the evidence dir this run's output goes to too.
	Evidence string            `json:"evidence,omitempty"`
	Vars     map[string]string `json:"vars,omitempty"`
}

// scratchFile is the run's scratch, beside the run lock.
const scratchFile = "journal/run.scratch.json"

// done is the error that ends a run with code (its summary printed).
type done struct{ code int }

func (d *done) Error() string { return fmt.Sprintf("the run ended with %d", d.code) }

// hold takes the run lock on the script's descriptor fd, naming the run
// by the line that re-runs it.
func (x *run) hold(fd int) error {
	return holdRun(x.d, fd, x.rerun().String())
}

// load reads the run's scratch (a fresh one for a new run) and sets up
// where this call's output goes: --log, and the open transaction's
// evidence once it has one.
func (x *run) load() error {
	h := x.d.OwnRun()
	// The run is the script that took the lock (advance --hold), which
	// calls this directly: a holder record left by a killed run, on a run
	// lock opened by hand, is no run, and its scratch is not to be
	// carried on.
	if h == nil || h.PID != os.Getppid() || h.Start != "" && h.Start != state.ProcStart(h.PID) {
		return kcli.Conflict(errors.New("advance runs inside a strategy script's run only (the script holds the run lock): run the script"))
	}
	id := fmt.Sprintf("%d/%s", h.PID, h.Since.Format(time.RFC3339Nano))
	x.scPath = x.d.Join(scratchFile)
	if b, err := os.ReadFile(x.scPath); err == nil {
		_ = json.Unmarshal(b, &x.sc)
	}
	fresh := x.sc.Run != id
	if fresh {
		x.sc = scratch{Run: id, Vars: map[string]string{}}
	}
	if x.sc.Vars == nil {
		x.sc.Vars = map[string]string{}
	}
	var f *os.File
	if x.r.log != "" {
		var err error
		f, err = os.OpenFile(x.r.log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		switch {
		case err != nil && fresh:
			return kcli.Usage("--log %s: %v", x.r.log, err)
		case err != nil:
			// Opened by this run's first call: gone since (the medium it
			// was on), the log is lost, not the run.
			x.warn("warning: --log %s: %v: the run goes on without it", x.r.log, errors.Unwrap(err))
		}
	}
	if f != nil {
		x.closers = append(x.closers, f)
		// Everything goes to the log too, so an unattended run can be
		// read later; its errors with its output, in order. Best effort:
		// a log the disk cannot take loses the log, not the run.
		x.out = io.MultiWriter(x.out, &bestEffort{w: f, name: "--log " + x.r.log, warn: x.errOut})
		x.errOut = x.out
		if fresh {
			fmt.Fprintf(x.out, "===== %s %s =====\n", filepath.Base(x.r.script), time.Now().UTC().Format("2006-01-02T15:04:05Z"))
		}
	}
	x.evidence()
	return nil
}

// evidence: once a transaction is open, this run's output also goes to
// its evidence (output.log). Best effort: evidence never stops a run.
func (x *run) evidence() {
	t, err := site.ReadTxn(x.d)
	if err != nil || t == nil {
		return
	}
	dir, err := evidence.Ensure(x.d, t.ID)
	if err != nil {
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, "output.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	x.closers = append(x.closers, f)
	ev := &bestEffort{w: f, name: "the transaction's evidence " + f.Name(), warn: x.errOut}
	if x.sc.Evidence != dir {
		x.sc.Evidence = dir
		fmt.Fprintf(f, "===== %s %s =====\n", filepath.Base(x.r.script), time.Now().UTC().Format("2006-01-02T15:04:05Z"))
	}
	if x.errOut == x.out {
		x.out = io.MultiWriter(x.out, ev)
		x.errOut = x.out
		return
	}
	x.out, x.errOut = io.MultiWriter(x.out, ev), io.MultiWriter(x.errOut, ev)
}

// bestEffort is a copy of the run's output (--log, the evidence) that
// never fails a write: its first error is said once on warn, and the
// rest of this call's output goes without it. A plugin's output is
// copied through it: a failed write would fail a step that succeeded.
type bestEffort struct {
	w    io.Writer
	name string
	warn io.Writer
	err  error
}

func (b *bestEffort) Write(p []byte) (int, error) {
	if b.err != nil {
		return len(p), nil
	}
	if _, err := b.w.Write(p); err != nil {
		b.err = err
		fmt.Fprintf(b.warn, "warning: writing %s: %v: the run goes on without it\n", b.name, err)
	}
	return len(p), nil
}

func (x *run) save() error {
	for _, c := range x.closers {
		c.Close()
	}
	if x.scPath == "" {
		return nil
	}
	b, _ := json.Marshal(x.sc)
	tmp := x.scPath + ".tmp"
	err := os.WriteFile(tmp, b, 0o600)
	if err == nil {
		err = os.Rename(tmp, x.scPath)
	}
	if err != nil {
		return kcli.Environment(fmt.Errorf("keeping the run's progress in %s: %w (the run stopped; once it can be written, run again: %s)", x.scPath, err, x.rerun()))
	}
	return nil
}

// checkState ends the run when the state dir is damaged, naming its repair.
func (x *run) checkState(streams kcli.IOStreams, cmd *cli.Command) error {
	s, err := openSession(streams, cmd, false)
	if err == nil {
		err = s.Check()
		s.close()
	}
	if err == nil {
		return nil
	}
	x.warn("error: %v", err)
	x.fail("the state dir is damaged (above): the run stopped before its next step")
	var fin *done
	if errors.As(x.finish(kcli.ExitCode(err), "the state dir is damaged: repair it as said above, then run again"), &fin) {
		return &kcli.ExitError{Code: fin.code}
	}
	return err
}

// step makes the run's next step.
func (x *run) step() error {
	var err error
	switch x.r.strategy {
	case journal.InPlace:
		err = x.linearRun(inPlaceRun)
	case journal.Recreate:
		err = x.linearRun(recreateRun)
	case journal.BlueGreen:
		err = x.blueGreen()
	default:
		return kcli.Usage("advance: %s is run by its script", x.r.strategy)
	}
	var fin *done
	if errors.As(err, &fin) {
		return &kcli.ExitError{Code: fin.code}
	}
	if err == nil {
		return &kcli.ExitError{Code: kcli.ExitMore}
	}
	return err
}

// goTo makes pc the run's next step.
func (x *run) goTo(pc string) error {
	x.sc.PC = pc
	return nil
}

// txn is the open transaction (nil: none).
func (x *run) txn() *journal.Transaction {
	t, _ := site.ReadTxn(x.d)
	return t
}

func (x *run) donePhase(p journal.Phase) bool {
	t := x.txn()
	if t == nil {
		return false
	}
	st := t.Step(p)
	return st != nil && st.Status == journal.StatusDone
}

func (x *run) pass(msg string) {
	x.sc.Summary = append(x.sc.Summary, "PASS: "+msg)
	fmt.Fprintln(x.out, "PASS: "+msg)
}

func (x *run) fail(msg string) {
	x.sc.Summary = append(x.sc.Summary, "FAIL: "+msg)
	fmt.Fprintln(x.errOut, "FAIL: "+msg)
}

func (x *run) say(format string, a ...any) { fmt.Fprintf(x.out, format+"\n", a...) }

func (x *run) warn(format string, a ...any) { fmt.Fprintf(x.errOut, format+"\n", a...) }

// finish prints the summary and ends the run with code: 0 applied, 1 the
// update failed and the previous deployment was kept, or restored and its
// gate passed, else why says what failed (journal status names the next
// command).
func (x *run) finish(code int, why string) error {
	result := "RESULT: PASS"
	switch code {
	case 0:
	case 1:
		result = "RESULT: FAIL (the previous deployment is in place)"
	default:
		if why == "" {
			why = "rollback incomplete"
		}
		result = "RESULT: FAIL (" + why + ": " + x.d.Plugin("journal", "status").String() + " says what to run next)"
		if x.r.op == "revert" {
			// During a soak journal status offers accept first, which
			// retires the slot this run goes back to: a revert that
			// stopped goes on by its own re-run.
			result = "RESULT: FAIL (" + why + "): to go on reverting, run: " + x.rerun().String()
		}
	}
	summary := ""
	for _, l := range x.sc.Summary {
		summary += l + "\n"
	}
	x.evidence()
	kept, keepErr := "", error(nil)
	if x.sc.Evidence != "" {
		// The summary of the transaction's last run, kept with its
		// evidence: every run that began (or resumed) a transaction has
		// one, and says where it is.
		kept = filepath.Join(x.sc.Evidence, evidence.SummaryFile)
		if keepErr = os.WriteFile(kept+".tmp", []byte(summary+result+"\n"), 0o644); keepErr == nil {
			keepErr = os.Rename(kept+".tmp", kept)
		}
	}
	fmt.Fprintln(x.out, "")
	fmt.Fprintln(x.out, "===== summary =====")
	if summary == "" {
		summary = "\n"
	}
	fmt.Fprint(x.out, summary)
	fmt.Fprintln(x.out, result)
	switch {
	case keepErr != nil:
		x.warn("warning: the summary could not be kept in %s: %v", kept, keepErr)
	case kept != "":
		fmt.Fprintf(x.out, "summary kept in %s\n", kept)
	}
	x.sc.PC = "finished"
	return &done{code}
}

// pluginBin is the plugin's executable on PATH, as kubectl finds it:
// kubectl-bundle-NAME, or kubectl-bundle_NAME, the one link krew makes.
func pluginBin(name string) string {
	key := os.Getenv("PATH") + "\x00" + name
	if v, ok := pluginBins.Load(key); ok {
		return v.(string)
	}
	bin := "kubectl-bundle-" + name
	if !onPath("kubectl-bundle-"+name) && onPath("kubectl-bundle_"+name) {
		bin = "kubectl-bundle_" + name
	}
	pluginBins.Store(key, bin)
	return bin
}

// pluginBins keeps pluginBin's answers by $PATH and name: a run looks its
// plugins up once (the in-process model runs many runs in one process).
var pluginBins sync.Map

// onPath says an executable file named name is in a directory of $PATH.
func onPath(name string) bool {
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if dir == "" {
			dir = "."
		}
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return true
		}
	}
	return false
}

// call runs a plugin as one of the run's steps and returns its exit code
// (a plugin that cannot be started: 3). Tests set KB_TEST_KILL_AFTER=N to
// have the run SIGKILL its process group after its N-th call, the way a
// power cut or a killed shell would stop it.
func (x *run) call(name string, args ...string) int {
	code := x.quiet(nil, name, args...)
	x.killPoint()
	return code
}

// quiet runs a plugin that is not one of the run's steps (a read), its
// stdout to out (nil: the run's).
func (x *run) quiet(out io.Writer, name string, args ...string) int {
	if out == nil {
		out = x.out
	}
	code, err := runner.Attach(x.ctx, nil, x.in, out, x.errOut, pluginBin(name), args...)
	if err != nil {
		// Not started, or killed by a signal: the step did not finish.
		fmt.Fprintf(x.errOut, "error: %v\n", err)
		return exitOf(errkind.Environment)
	}
	return code
}

// exitOf is the table's exit code of kind k (internal/cli).
func exitOf(k errkind.Kind) int { return kcli.ExitCode(errkind.Wrap(k, errors.New(k.String()))) }

// output is what a read of a plugin prints (its exit code beside).
func (x *run) output(name string, args ...string) (string, int) {
	var b bytes.Buffer
	code := x.quiet(&b, name, args...)
	return strings.TrimRight(b.String(), "\n"), code
}

func (x *run) killPoint() {
	after := os.Getenv("KB_TEST_KILL_AFTER")
	if after == "" {
		return
	}
	counter := os.Getenv("KB_TEST_COUNTER")
	n := 0
	if b, err := os.ReadFile(counter); err == nil {
		n, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	n++
	_ = os.WriteFile(counter, []byte(strconv.Itoa(n)+"\n"), 0o644)
	if strconv.Itoa(n) == after {
		_ = x.save()
		_ = syscall.Kill(0, syscall.SIGKILL)
	}
}

// runStep runs plugin name with args as the journal step phase ("": a step
// that records only; "!PATH": the program PATH) (skipped when done, redone
// when interrupted): journal run.
func (x *run) runStep(p journal.Phase, name string, args ...string) bool {
	x.evidence()
	prog := "true" // a step that records only
	switch {
	case strings.HasPrefix(name, "!"):
		prog = name[1:] // a program by its path
	case name != "":
		prog = pluginBin(name)
	}
	return x.call("journal", append([]string{"run", string(p), "--", prog}, args...)...) == 0
}

// self is the script as a printed command starts: its absolute path,
// after the state dir when that was given relative.
func (x *run) self(args ...string) advice.Cmd {
	return advice.Program(x.r.script, args...).WithEnv(x.d.CommandEnv())
}

// rerun is this script with this run's package and options, as a line to paste.
func (x *run) rerun() advice.Cmd {
	var args []string
	if x.r.op != "apply" || x.r.strategy == journal.BlueGreen {
		args = append(args, x.r.op)
	}
	if x.r.pkg != "" {
		args = append(args, x.r.pkg)
	}
	args = append(args, x.r.rerun...)
	if x.r.force {
		args = append(args, "--force")
	}
	return x.self(args...)
}

func (x *run) gateLine(slot string) string {
	return x.cmds().GateOf(slot).String()
}

// cmds are this run's step commands, as the plan lists them
// (internal/plan.Commands).
func (x *run) cmds() plan.Commands {
	return plan.Commands{Package: x.r.pkg, Verify: x.r.verify, Gate: x.r.gate}
}

// runCmd runs c, a step's command as internal/plan writes it, as the
// journal step p, with extra flags after its own (-q).
func (x *run) runCmd(p journal.Phase, c advice.Cmd, extra ...string) bool {
	name, args := x.target(c)
	return x.runStep(p, name, append(args, extra...)...)
}

// callCmd runs c, a command as internal/plan writes it, outside a step.
func (x *run) callCmd(c advice.Cmd) int {
	name, args := x.target(c)
	return x.call(name, args...)
}

// end closes the transaction (plan.End).
func (x *run) end() int { return x.callCmd(plan.End().With("-q")) }

// target is how runStep names c: a plugin (kubectl bundle-NAME ARGS) by
// NAME, a program by "!PATH".
func (x *run) target(c advice.Cmd) (string, []string) {
	if len(c.Argv) >= 2 && c.Argv[0] == "kubectl" && strings.HasPrefix(c.Argv[1], "bundle-") {
		return strings.TrimPrefix(c.Argv[1], "bundle-"), c.Argv[2:]
	}
	return "!" + c.Argv[0], c.Argv[1:]
}

// rebuildStep refuses a rebuild that is not the step it stands for:
// destroying a slot with --force and building it again is recreate's
// BUILDING step of its slot with its package, or BUILDING_FALLBACK's with
// the previous one, while journal run runs that step, and nothing else
// (by hand, it would destroy a slot that serves, or one no update
// touches).
func rebuildStep(streams kcli.IOStreams, cmd *cli.Command) error {
	s, err := openSession(streams, cmd, false)
	if err != nil {
		return err
	}
	t, err := site.ReadTxn(s.dir)
	s.close()
	if err != nil {
		return err
	}
	name, digest := cmd.Args().Get(0), strings.TrimPrefix(cmd.Args().Get(1), "sha256:")
	step := fmt.Sprintf("recreate's BUILDING or BUILDING_FALLBACK step, which %s runs for %s", advice.Plugin("journal", "run"), journal.ScriptPath(journal.Recreate))
	switch {
	case t == nil:
		return kcli.Conflict(fmt.Errorf("rebuild is %s; no transaction is open: nothing was changed", step))
	case t.Strategy != journal.Recreate || t.Status != journal.StatusStarted || (t.Phase != journal.Building && t.Phase != journal.BuildingFallback):
		return kcli.Conflict(fmt.Errorf("rebuild is %s; transaction %s (%s) is in %s (%s): nothing was changed; %s says what runs next", step, t.ID, t.Strategy, t.Phase, t.Status, s.dir.Plugin("journal", "status")))
	case name != t.Slots.Active:
		return kcli.Conflict(fmt.Errorf("transaction %s rebuilds slot %s, not slot %s: nothing was changed", t.ID, t.Slots.Active, name))
	}
	want := t.Target
	if t.Phase == journal.BuildingFallback {
		want = t.Fallback
	}
	if digest != strings.TrimPrefix(want, "sha256:") {
		return kcli.Conflict(fmt.Errorf("transaction %s's %s builds slot %s with %s, not %s: nothing was changed", t.ID, t.Phase, name, want, cmd.Args().Get(1)))
	}
	return nil
}

// build is recreate's BUILDING (and BUILDING_FALLBACK) step: one journal
// step that runs the plan's commands of it (plan.Commands.Rebuild).
func (x *run) build(slot, digest string) advice.Cmd {
	return x.cmds().RebuildStep(slot, digest)
}

func rebuildCommand(streams kcli.IOStreams) *cli.Command {
	return &cli.Command{
		Name:      "rebuild",
		Hidden:    true,
		Usage:     "recreate's BUILDING step, as journal run runs it: destroy what a killed build left of SLOT, create it, deploy DIGEST",
		ArgsUsage: "SLOT DIGEST",
		Flags:     []cli.Flag{&cli.StringFlag{Name: "key", Usage: "the public key deploy checks the package with", TakesFile: true}},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() != 2 {
				return kcli.Usage("want SLOT DIGEST")
			}
			if err := rebuildStep(streams, cmd); err != nil {
				return err
			}
			var verify []string
			if k := cmd.String("key"); k != "" {
				verify = []string{"--key", k}
			}
			for i, c := range (plan.Commands{Verify: verify}).Rebuild(cmd.Args().Get(0), cmd.Args().Get(1)) {
				name, args := strings.TrimPrefix(c.Argv[1], "bundle-"), c.Argv[2:]
				if i == 0 {
					args = append(args, "-q")
				}
				code, err := runner.Attach(ctx, nil, streams.In, streams.Out, streams.ErrOut, pluginBin(name), args...)
				if err != nil {
					return kcli.Environment(err)
				}
				if code != 0 {
					return &kcli.ExitError{Code: code}
				}
			}
			return nil
		},
	}
}
