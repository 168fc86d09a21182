// Package journalcmd is the kubectl-bundle-journal command: begin, status,
// log, step, abort and end over the journal library.
package journalcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
	statesession "github.com/kubectl-bundle/kubectl-bundle/internal/session"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/stage"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
	"github.com/kubectl-bundle/kubectl-bundle/internal/switchover"
)

const description = `The crash-safe record of the one update transaction a site may have open.
Every orchestrator step is recorded here before and after it runs, so that
after a crash, power loss or killed shell, status says exactly what happened
and the one command to run next (re-running the strategy's script resumes it).

Phases per strategy:
  blue-green  BEGUN VERIFIED PROVISIONING PROVISIONED HEALTHY SWITCHED SOAKING ACCEPTED RETIRED
              failure before SWITCHED: DESTROYING ROLLED_BACK; revert while soaking: SWITCHED_BACK DESTROYING ROLLED_BACK
  in-place    BEGUN VERIFIED DEPLOYING HEALTHY COMMITTED; failure: RESTORING RESTORED
  recreate    BEGUN VERIFIED TEARDOWN BUILDING HEALTHY COMMITTED; failure: BUILDING_FALLBACK RESTORED`

// exitCodes is this binary's part of the suite's exit-code table.
var exitCodes = kcli.ExitCodesHelp("", map[errkind.Kind]string{
	errkind.Usage:       "an unknown phase or strategy, a --package that is neither a digest nor a file",
	errkind.Environment: "the state dir or the journal is unreadable or damaged; run: a step's command failed",
	errkind.Conflict:    "locked, a transaction already open, no transaction open, an illegal transition or an unsafe abort (the message names the legal next steps); run: the step's command exited 4",
})

// Command builds kubectl-bundle-journal.
func Command(streams kcli.IOStreams) *cli.Command {
	return kcli.Root(streams, &cli.Command{
		Name:  "kubectl-bundle-journal",
		Usage: "the crash-safe transaction record: begin / status / log / step / abort / end",
		Description: description + "\n\n" + `Examples:
  kubectl bundle-journal site
  kubectl bundle-journal status
  kubectl bundle-journal next
  kubectl bundle-journal log --since 24h` + "\n\n" + exitCodes,
		Commands: []*cli.Command{
			{
				Name:        "begin",
				Description: "Examples:\n  kubectl bundle-journal begin --strategy in-place --package zarf-package-app-amd64-1.1.0.tar.zst\n  kubectl bundle-journal begin --strategy blue-green --package sha256:DIGEST --active a --candidate b",
				Usage:       "open a transaction (one at a time)",
				ArgsUsage:   " ",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "strategy", Usage: "in-place, blue-green or recreate", Required: true},
					&cli.StringFlag{Name: "package", Usage: "the target package: a path (its sha256 is taken) or a sha256 digest", Required: true},
					&cli.StringFlag{Name: "fallback", Usage: "the known-good package to return to: a staged digest or path (default: the package deployed in the active slot)"},
					&cli.StringFlag{Name: "active", Usage: "the active slot (blue-green)"},
					&cli.StringFlag{Name: "candidate", Usage: "the candidate slot (blue-green)"},
					&cli.StringFlag{Name: "gate", Usage: "the gate file the script runs its steps with (kept absolute), for the next command", TakesFile: true},
					&cli.StringFlag{Name: "gate-timeout", Usage: "the script's --gate-timeout, for the next command"},
					&cli.StringFlag{Name: "switch-mode", Usage: "blue-green: " + journal.SwitchModes},
					&cli.StringFlag{Name: "key", Usage: "the public key the script verifies the package with (kept absolute), for the next command", TakesFile: true},
					&cli.StringFlag{Name: "certificate-identity", Usage: "the keyless signer the script verifies the package with, for the next command"},
					&cli.StringFlag{Name: "certificate-oidc-issuer", Usage: "the keyless signer's OIDC issuer, for the next command"},
					&cli.StringFlag{Name: "trusted-root", Usage: "the trusted root of a keyless signer (kept absolute), for the next command", TakesFile: true},
				},
				Action: func(_ context.Context, cmd *cli.Command) error { return begin(streams, cmd) },
			},
			{
				Name:        "run",
				Description: "Examples:\n  kubectl bundle-journal run DEPLOYING -- kubectl bundle-slot deploy a sha256:DIGEST",
				Usage:       "run COMMAND as step PHASE: skipped when PHASE is already done, else started, run, and recorded done or failed (what the scripts call)",
				ArgsUsage:   "PHASE -- COMMAND [ARGS...]",
				Action:      func(ctx context.Context, cmd *cli.Command) error { return runStep(ctx, streams, cmd) },
			},
			{
				Name:        "status",
				Description: "Examples:\n  kubectl bundle-journal status\n  kubectl bundle-journal status -o jsonpath='{.transaction.phase}'\n  kubectl bundle-journal site",
				Usage:       "what happened, where it stands, and the next command (exit 0 with none open)",
				Action:      func(_ context.Context, cmd *cli.Command) error { return status(streams, cmd) },
			},
			{
				Name:  "next",
				Usage: "the next step on this site now: one command to run, why, and what else makes progress (exit 3 when it is a repair)",
				Description: `Asks the planner: the repair of damaged state first, then the open
transaction's next step, then a switch that did not finish or a soak to
end; on a site at rest there is nothing to run (exit 0, no command).
Nothing changes. -o json (or -o jsonpath=...) gives the same for scripts.

With --run it prints that command and runs it (its arguments as printed,
never through a shell), with this terminal; its exit code is the step's.
A run that owns the transaction is waited for (exit 4); with nothing to
run it says so (exit 0).

Examples:
  kubectl bundle-journal next
  kubectl bundle-journal next --run
  kubectl bundle-journal next -o json
  kubectl bundle-journal next -o jsonpath='{.next.command}'`,
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "run", Usage: "print the next step's command and run it; exit with its code"},
				},
				Action: func(ctx context.Context, cmd *cli.Command) error { return next(ctx, streams, cmd) },
			},
			{
				Name:  "previous",
				Usage: "the package the active slot's package replaced, staged, to update back to after accept",
				Description: `After accept there is no revert: going back is a new update to the
earlier package. This finds it in the history: the fallback of the last
update that installed the active slot's package and completed (a later
update that failed or was reverted does not count), and its staged copy.
Exit 3 when the records hold no earlier package, or its staged copy is
gone (the message says how to stage it again). Nothing changes.

Examples:
  kubectl bundle-journal previous
  kubectl bundle-journal previous -o jsonpath='{.staged}'`,
				Action: func(_ context.Context, cmd *cli.Command) error { return previousCmd(streams, cmd) },
			},
			{
				Name:  "scripts",
				Usage: "the directory of the strategy scripts (blue-green.sh, in-place.sh, recreate.sh) that this plugin's commands name",
				Description: `Prints where the strategy scripts are, as the commands this plugin prints
find them: $KUBECTL_BUNDLE_SCRIPTS_DIR, else kubectl-bundle-scripts beside
the plugin (a krew install's too), else the checkout it was built from.
Exit 3 when none holds them.

Examples:
  kubectl bundle-journal scripts
  SCRIPTS=$(kubectl bundle-journal scripts) && "$SCRIPTS/blue-green.sh" --help`,
				Action: func(_ context.Context, cmd *cli.Command) error {
					if cmd.Args().Len() > 0 {
						return kcli.Usage("scripts takes no arguments (see --help)")
					}
					return scriptsDir(streams)
				},
			},
			{
				Name:        "log",
				Description: "Examples:\n  kubectl bundle-journal log\n  kubectl bundle-journal log --since 24h -o json",
				Usage:       "the history of every transition, across transactions",
				Flags: []cli.Flag{
					&cli.DurationFlag{Name: "since", Usage: "only events newer than this (e.g. 24h)"},
				},
				Action: func(_ context.Context, cmd *cli.Command) error { return logCmd(streams, cmd) },
			},
			{
				Name:        "step",
				Description: "Examples:\n  kubectl bundle-journal step DEPLOYING started\n  kubectl bundle-journal step DEPLOYING failed --error \"zarf package deploy exited 1\"",
				Usage:       "record that a phase started, is done, or failed (what the orchestrators call)",
				ArgsUsage:   "PHASE started|done|failed",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "error", Usage: "what went wrong (with failed)"},
					&cli.BoolFlag{Name: "force", Usage: "record done a step that changes a slot (a deploy, create, destroy or switch) although its plugin did not record doing it (said and recorded in the history)"},
				},
				Action: func(_ context.Context, cmd *cli.Command) error { return step(streams, cmd) },
			},
			{
				Name:        "abort",
				Description: "Examples:\n  kubectl bundle-journal abort\n  kubectl bundle-journal abort --force",
				Usage:       "record ABORTED where that is safe for the strategy, and print the cleanup still to run",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "force", Usage: "close in the history a transaction whose transaction.json was removed from outside (check its slots first)"},
				},
				Action: func(_ context.Context, cmd *cli.Command) error { return abort(streams, cmd) },
			},
			{
				Name:        "repair",
				Description: "Examples:\n  kubectl bundle-journal repair",
				Usage:       "repair a journal damaged from outside: rebuild an unreadable transaction.json from the history, keep a damaged history's readable lines and set the damaged ones aside, acknowledge lines cut from the history, move aside a run lock (journal/run.lock) that is not a regular file once no live process holds it (each recorded)",
				Action:      func(_ context.Context, cmd *cli.Command) error { return repairCmd(streams, cmd) },
			},
			offlineCommand(streams),
			evidenceCommand(streams),
			lockRunCommand(streams),
			advanceCommand(streams),
			rebuildCommand(streams),
			planCommand(streams),
			siteCommand(streams),
			{
				Name:        "end",
				Description: "Examples:\n  kubectl bundle-journal end",
				Usage:       "close a transaction that reached a final phase",
				Action:      func(_ context.Context, cmd *cli.Command) error { return end(streams, cmd) },
			},
		},
	})

}

// Main runs the command with args (os.Args form) and returns the exit code.
func Main(ctx context.Context, streams kcli.IOStreams, args []string) int {
	return kcli.Main(ctx, streams, args, Command)
}

// session is an opened state dir, locked when the command mutates.
type session struct {
	*statesession.Session
	common *kcli.Common
	dir    *state.Dir
	j      *journal.Journal
}

func openSession(streams kcli.IOStreams, cmd *cli.Command, mutate bool) (*session, error) {
	return openWith(streams, cmd, statesession.Options{Mutate: mutate})
}

// openStepSession is a mutating session of the process that runs step.
func openStepSession(streams kcli.IOStreams, cmd *cli.Command, step string) (*session, error) {
	return openWith(streams, cmd, statesession.Options{Mutate: true, Step: step})
}

func openWith(streams kcli.IOStreams, cmd *cli.Command, o statesession.Options) (*session, error) {
	common, err := kcli.ParseCommon(cmd)
	if err != nil {
		return nil, err
	}
	o.StateDir, o.Log = common.StateDir, common.Log(streams)
	ss, err := statesession.Open(o)
	if err != nil {
		return nil, err
	}
	return &session{Session: ss, common: common, dir: ss.Dir, j: ss.Journal}, nil
}

func (s *session) close() { s.Close() }

func begin(streams kcli.IOStreams, cmd *cli.Command) error {
	st, err := journal.ParseStrategy(cmd.String("strategy"))
	if err != nil {
		return kcli.Usage("%v", err)
	}
	slots, err := beginSlots(st, cmd.String("active"), cmd.String("candidate"))
	if err != nil {
		return err
	}
	mode, err := journal.ParseSwitchMode(cmd.String("switch-mode"))
	if err != nil {
		return kcli.Usage("--switch-mode: %v", err)
	}
	if mode != journal.SwitchS2 && st != journal.BlueGreen {
		return kcli.Usage("--switch-mode is for a blue-green transaction, not %s", st)
	}
	ref, err := stage.Identify(cmd.String("package"))
	if err != nil {
		return fmt.Errorf("--package: %w", err)
	}
	digest, path := ref.Digest, ref.File
	if path != "" {
		// Absolute, so that the scripts and the next command find it from
		// any directory.
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
	}
	s, err := openSession(streams, cmd, true)
	if err != nil {
		return err
	}
	defer s.close()
	if err := s.j.RefuseIfOpen(); err != nil {
		return err
	}
	if err := s.GuardBegin(st, slots.Active, slots.Candidate); err != nil {
		return err
	}
	fallback, err := beginFallback(s.dir, st, slots.Active, cmd.String("fallback"))
	if err != nil {
		return err
	}
	var gate *journal.Gate
	if g, gt := cmd.String("gate"), cmd.String("gate-timeout"); g != "" || gt != "" {
		if g != "" {
			if abs, err := filepath.Abs(g); err == nil {
				g = abs
			}
		}
		gate = &journal.Gate{File: g, Timeout: gt}
	}
	t, err := s.j.Begin(journal.BeginOptions{Strategy: st, Target: digest, Package: path, Fallback: fallback, Slots: slots, Gate: gate, Verify: beginVerify(cmd), SwitchMode: mode})
	if err != nil {
		return err
	}
	keepEvidence(streams.ErrOut, s.dir, t)
	return writeTxn(streams, s.common, s.dir, t, fmt.Sprintf("began transaction %s (%s) for %s", t.ID, t.Strategy, t.Target))
}

// beginVerify is the verification material begin records for the next
// command (paths absolute), nil when none is given.
func beginVerify(cmd *cli.Command) *journal.Verification {
	absolute := func(p string) string {
		if a, err := filepath.Abs(p); p != "" && err == nil {
			return a
		}
		return p
	}
	v := &journal.Verification{Key: absolute(cmd.String("key")), TrustedRoot: absolute(cmd.String("trusted-root")),
		Identity: cmd.String("certificate-identity"), Issuer: cmd.String("certificate-oidc-issuer")}
	if *v == (journal.Verification{}) {
		return nil
	}
	return v
}

// beginSlots checks --active and --candidate against the strategy, by the
// slots' own naming rule, before anything is written.
func beginSlots(st journal.Strategy, active, candidate string) (journal.Slots, error) {
	for _, f := range []struct{ flag, name string }{{"active", active}, {"candidate", candidate}} {
		if f.name == "" {
			continue
		}
		if err := slot.ValidName(f.name); err != nil {
			return journal.Slots{}, errkind.New(errkind.Usage, "--%s: %w", f.flag, err)
		}
	}
	switch {
	case st == journal.BlueGreen && candidate == "":
		return journal.Slots{}, errkind.New(errkind.Usage, "blue-green builds the update in --candidate next to --active: give both (e.g. --active a --candidate b)")
	case st == journal.BlueGreen && candidate == active:
		return journal.Slots{}, errkind.New(errkind.Usage, "--candidate %s is the active slot: blue-green builds the update in another slot (e.g. --active a --candidate b)", candidate)
	case st != journal.BlueGreen && candidate != "":
		return journal.Slots{}, errkind.New(errkind.Usage, "--candidate is for blue-green: %s updates the --active slot itself", st)
	}
	return journal.Slots{Active: active, Candidate: candidate}, nil
}

// beginFallback is the known-good package a failed update returns to: the
// staged package --fallback names, else the package deployed in the active
// slot (--active, or the state dir's active pointer). A recreate tears the
// slot down, so it refuses to begin without one, except on a first install
// (no slot active yet).
func beginFallback(d *state.Dir, st journal.Strategy, active, flag string) (string, error) {
	if flag != "" {
		digest, err := stagedDigest(d, flag)
		if err != nil {
			return "", errkind.New(errkind.Usage, "--fallback: %w", err)
		}
		return digest, nil
	}
	pointer, err := (&switchover.Switcher{Dir: d}).Active()
	if err != nil {
		return "", errkind.New(errkind.Environment, "reading the active pointer: %w", err)
	}
	if active == "" {
		active = pointer
	}
	if active == "" {
		return "", nil // a first install: nothing was deployed before
	}
	rec, err := slot.Load(d, active)
	var nf *slot.NotFoundError
	switch {
	case errors.As(err, &nf) && pointer == "":
		return "", nil // a first install onto a new slot
	case err != nil:
		return "", errkind.New(errkind.Environment, "reading the fallback from slot %s: %w", active, err)
	}
	if rec.Package == nil || rec.Package.Digest == "" {
		if st == journal.Recreate && pointer != "" {
			return "", errkind.New(errkind.Environment, "slot %s records no deployed package, so a failed recreate would have nothing to rebuild it with: deploy the known-good package into it first (%s), or name one with --fallback DIGEST|PATH, staged first (%s)",
				active, d.Plugin("slot", "deploy", active, "PACKAGE"), stage.VerifyCommand(d, "", false))
		}
		return "", nil
	}
	if st == journal.Recreate {
		if _, err := stagedDigest(d, rec.Package.Digest); err != nil {
			return "", errkind.New(errkind.Environment, "the package deployed in slot %s is the fallback of a recreate, but %v: stage it again with %s, or name another with --fallback DIGEST|PATH", active, err, stage.VerifyCommand(d, "", false))
		}
	}
	return rec.Package.Digest, nil
}

// stagedDigest resolves a package digest or path as slot deploy does, and
// requires it to be staged in the state dir.
func stagedDigest(d *state.Dir, arg string) (string, error) {
	p, err := stage.Resolve(d, arg)
	if err != nil {
		return "", err
	}
	return p.Digest, nil
}

func status(streams kcli.IOStreams, cmd *cli.Command) error {
	s, err := openSession(streams, cmd, false)
	if err != nil {
		return err
	}
	// A history cut from outside stops every mutating command, the next
	// one included, until journal repair acknowledges it: status says so
	// and names the repair as the next command, exit 3.
	if cut, cerr := s.j.CutHistory(); cerr == nil && cut != nil {
		return statusCut(streams, s, cut)
	}
	t, err := site.ReadTxn(s.dir)
	if err != nil {
		return err
	}
	// With a transaction open, its next command meets the state first:
	// damage to what the steps rely on (the active pointer, the switch
	// record, a protected slot's record) is said with its repair, exit 3,
	// after the status, so that the command to run next is the repair.
	var damage error
	if t != nil {
		damage = txnDamage(s, t)
	}
	// A run lock that is not a regular file stops every command that
	// probes or takes it (every script first): said with its repair,
	// exit 3, first, since the other repairs need the run lock too.
	run, runErr := s.dir.RunConflict()
	if runErr != nil {
		damage = runErr
	}
	var (
		view  *runView
		notes []string
		next  *journal.NextStep
	)
	if t != nil {
		n := nextOf(s.dir, t)
		next = &n
	}
	if run != nil {
		// A live run (of another process than this one's) owns the
		// transaction: it is running, not interrupted, and the next step
		// is that run's to make, so the reader waits (exit 0). What the
		// state looks like while its step changes it is said, not
		// advised on: the repairs would be refused while it lives.
		var n *journal.NextStep
		view, notes, n = running(t, run)
		if n != nil {
			next = n
		}
		if damage != nil {
			notes = append(notes, fmt.Sprintf("state:      %v (the live run may be changing it: look again once it has finished)", damage))
			damage = nil
		}
	}
	if s.common.Output == kcli.OutputJSON {
		v := statusView{APIVersion: journal.APIVersion, Kind: "JournalStatus", Transaction: t, Next: next, Run: view}
		if err := kcli.WriteJSON(streams.Out, v); err != nil {
			return err
		}
		return damage
	}
	if t == nil {
		fmt.Fprintln(streams.Out, "no transaction in progress")
		for _, note := range notes {
			fmt.Fprintln(streams.Out, note)
		}
		return damage
	}
	if err := writeText(streams.Out, t, *next, notes...); err != nil {
		return err
	}
	return damage
}

// nextView is journal next's -o json.
type nextView struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Source says what decided the step: damage, history-cut, run,
	// transaction, or site (no transaction open).
	Source      string           `json:"source"`
	Transaction string           `json:"transaction,omitempty"`
	Next        journal.NextStep `json:"next"`
}

// next is `journal next`: the one step to run now, from the planner. A
// repair comes first (exit 3, as status), then the open transaction's
// step, then what the site's records say (site.Next).
func next(ctx context.Context, streams kcli.IOStreams, cmd *cli.Command) error {
	s, err := openSession(streams, cmd, false)
	if err != nil {
		return err
	}
	v, damage, err := planNext(s)
	if err != nil {
		return err
	}
	if cmd.Bool("run") {
		if cmd.Args().Len() > 0 {
			return kcli.Usage("next takes no arguments (see --help)")
		}
		return runNext(ctx, streams, v.Next)
	}
	if s.common.Output == kcli.OutputJSON {
		if err := kcli.WriteJSON(streams.Out, v); err != nil {
			return err
		}
		return damage
	}
	if _, err := io.WriteString(streams.Out, nextText(v.Next)); err != nil {
		return err
	}
	return damage
}

// planNext is the planner's answer on this site now (what journal next
// prints, and the site view's next), with the damage that makes it a
// repair (exit 3).
func planNext(s *session) (v nextView, damage error, err error) {
	v = nextView{APIVersion: journal.APIVersion, Kind: "JournalNext"}
	here := site.Read(s.dir)
	t, terr := here.Txn()
	cut, cerr := s.j.CutHistory()
	run, runErr := s.dir.RunConflict()
	var dmg *state.DamageError
	switch {
	case cerr == nil && cut != nil:
		v.Source, damage = "history-cut", cut
		v.Next = journal.NextStep{Why: cut.Meaning()}
		v.Next.Do(s.dir.Repair())
	case runErr != nil:
		v.Source, damage = "damage", runErr
		v.Next = journal.NextStep{Why: runErr.Error()}
		if errors.As(runErr, &dmg) {
			v.Next.Fix(dmg.Fix)
		}
	case run != nil:
		_, _, n := running(t, run)
		v.Source = "run"
		if n != nil {
			v.Next = *n
		}
	case terr != nil:
		v.Source, damage = "damage", terr
		v.Next = journal.NextStep{Why: terr.Error()}
		if journalDamage(terr) {
			v.Next.Do(s.dir.Repair())
		}
	default:
		if err := txnDamage(s, t); err != nil && errors.As(err, &dmg) {
			// A repair runs before any step the damage would refuse.
			v.Source, damage = "damage", err
			v.Next = journal.NextStep{Why: dmg.Path + ": " + dmg.Problem}
			v.Next.Fix(dmg.Fix)
			if t != nil {
				v.Next.Why += "; then: " + nextOf(s.dir, t).Command
			}
		} else if err != nil {
			return v, nil, err
		} else if t != nil {
			v.Source, v.Transaction, v.Next = "transaction", t.ID, nextOf(s.dir, t)
		} else {
			v.Source, v.Next = "site", here.Next(time.Now())
		}
	}
	return v, damage, nil
}

// txnDamage is the damage the next step meets first: the guard's (the
// pointer, the switch record, a protected slot's record), then, with a
// transaction open, the record of one of its slots lost from outside
// while the history says the slot exists: its step would stop on it, and
// the re-run the status names would stop again.
func txnDamage(s *session, t *journal.Transaction) error {
	if err := s.Check(); err != nil || t == nil {
		return err
	}
	for _, n := range []string{t.Slots.Active, t.Slots.Candidate} {
		if n == "" {
			continue
		}
		var dmg *state.DamageError
		var rdmg *record.DamagedError
		_, err := s.LoadSlot(n)
		switch {
		case errors.As(err, &dmg):
			return err
		case errors.As(err, &rdmg):
			// A record there but unreadable (a symlink, bytes that are not
			// a record): its repair comes first, as the step says.
			return &state.DamageError{Path: rdmg.Path, Problem: fmt.Sprintf("the record of slot %s cannot be read (%v)", n, rdmg.Err), Fix: rdmg.Repair()}
		}
	}
	return nil
}

// nextText is a next step as text: the command (or the run to wait for,
// or nothing), the other ways on, and why.
func nextText(n journal.NextStep) string {
	var b strings.Builder
	switch {
	case n.Wait != "":
		fmt.Fprintf(&b, "next: wait for %s to finish\n", n.Wait)
	case n.Command != "":
		fmt.Fprintf(&b, "next: %s\n", n.Command)
	default:
		fmt.Fprintln(&b, "next: nothing to run")
	}
	for _, alt := range n.Alternatives {
		fmt.Fprintf(&b, "  or: %s\n", alt)
	}
	if n.Why != "" {
		fmt.Fprintf(&b, "  why: %s\n", n.Why)
	}
	return b.String()
}

// journalDamage says err is damage journal repair repairs.
func journalDamage(err error) bool {
	var lost *journal.LostError
	var corrupt *journal.CorruptError
	return errors.As(err, &lost) || errors.As(err, &corrupt)
}

func logCmd(streams kcli.IOStreams, cmd *cli.Command) error {
	s, err := openSession(streams, cmd, false)
	if err != nil {
		return err
	}
	h, err := journal.ReadHistory(s.dir.Join(journal.Dir, journal.HistoryFile))
	if err != nil {
		return err
	}
	if h.Torn != nil && !s.common.Quiet {
		fmt.Fprintf(streams.ErrOut, "warning: the last line of %s is torn (a crash cut it mid-append) and is ignored; the next journal command removes it\n", journal.HistoryFile)
	}
	events := h.Events
	if since := cmd.Duration("since"); since > 0 {
		cut := time.Now().Add(-since)
		var keep []journal.Event
		for _, e := range events {
			if !e.Time.Before(cut) {
				keep = append(keep, e)
			}
		}
		events = keep
	}
	if s.common.Output == kcli.OutputJSON {
		if events == nil {
			events = []journal.Event{}
		}
		return kcli.WriteJSON(streams.Out, events)
	}
	for _, e := range events {
		line := fmt.Sprintf("%s  #%-4d %s  %-6s %s", e.Time.Format(time.RFC3339), e.Seq, e.TxnID, e.Type, e.Phase)
		if e.Status != "" && e.Type == journal.EventStep {
			line += " " + e.Status
		}
		if e.Type == journal.EventBegin {
			line += fmt.Sprintf(" %s %s", e.Strategy, e.Target)
			if e.Fallback != "" {
				line += " fallback " + e.Fallback
			}
		}
		switch {
		case e.Type == "slot":
			line += fmt.Sprintf("%s: %s %s", e.Slot, e.Detail, e.Status)
		case e.Detail != "":
			line += fmt.Sprintf("%s %s", e.Detail, e.Status)
		}
		if e.Error != "" {
			line += ": " + e.Error
		}
		fmt.Fprintln(streams.Out, line)
	}
	return nil
}

func step(streams kcli.IOStreams, cmd *cli.Command) error {
	if cmd.NArg() != 2 {
		return kcli.Usage("want PHASE and one of started, done, failed (see --help)")
	}
	s, err := openSession(streams, cmd, true)
	if err != nil {
		return err
	}
	defer s.close()
	t, err := site.ReadTxn(s.dir)
	if err != nil {
		return err
	}
	if err := s.Check(); err != nil {
		return err
	}
	if t == nil {
		return kcli.Conflict(errors.New(journal.NoTransactionMsg(s.dir)))
	}
	p, err := journal.ParsePhase(t.Strategy, strings.ToUpper(cmd.Args().Get(0)))
	if err != nil {
		return kcli.Usage("%v", err)
	}
	if err := claimedByHand(streams, s, t, p, cmd.Args().Get(1), cmd.Bool("force")); err != nil {
		return err
	}
	switch cmd.Args().Get(1) {
	case journal.StatusStarted:
		t, err = s.j.Start(p)
	case journal.StatusDone:
		t, err = s.j.Done(p)
	case journal.StatusFailed:
		t, err = s.j.Fail(p, cmd.String("error"))
	default:
		return kcli.Usage("%q: want started, done or failed", cmd.Args().Get(1))
	}
	if err != nil {
		return err
	}
	return writeTxn(streams, s.common, s.dir, t, fmt.Sprintf("recorded %s %s", p, cmd.Args().Get(1)))
}

func abort(streams kcli.IOStreams, cmd *cli.Command) error {
	s, err := openSession(streams, cmd, true)
	if err != nil {
		return err
	}
	defer s.close()
	if cmd.Bool("force") {
		if _, lerr := site.ReadTxn(s.dir); errors.As(lerr, new(*journal.LostError)) {
			open, err := s.j.AbortLost()
			if err != nil {
				return err
			}
			fmt.Fprintf(streams.ErrOut, "warning: --force: closed transaction %s (%s) in the history; its %s was lost, so check its slots by hand (%s; %s)\n", open.TxnID, open.Phase, journal.TransactionFile, s.dir.Plugin("slot", "list"), s.dir.Plugin("switch", "status"))
			if !s.common.Quiet {
				fmt.Fprintf(streams.Out, "aborted transaction %s (--force)\n", open.TxnID)
			}
			return nil
		}
	}
	if err := s.Check(); err != nil {
		return err
	}
	abort := s.j.Abort
	if site.Read(s.dir).MovedOff() != nil {
		abort = s.j.AbortAbandoned
	}
	t, cleanup, err := abort()
	if err != nil {
		return err
	}
	if s.common.Output == kcli.OutputJSON {
		return kcli.WriteJSON(streams.Out, map[string]any{"transaction": t, "cleanup": cleanup})
	}
	fmt.Fprintf(streams.Out, "aborted transaction %s (%s)\nstill to run:\n", t.ID, t.Strategy)
	for _, c := range cleanup {
		fmt.Fprintf(streams.Out, "  %s\n", c)
	}
	return nil
}

func end(streams kcli.IOStreams, cmd *cli.Command) error {
	s, err := openSession(streams, cmd, true)
	if err != nil {
		return err
	}
	defer s.close()
	if err := s.Check(); err != nil {
		return err
	}
	t, err := s.j.End()
	if err != nil {
		return err
	}
	closeEvidence(streams.ErrOut, s.Session, t)
	if s.common.Output == kcli.OutputJSON {
		return kcli.WriteJSON(streams.Out, map[string]any{"ended": t.ID, "phase": t.Phase})
	}
	if !s.common.Quiet {
		fmt.Fprintf(streams.Out, "ended transaction %s in %s\n", t.ID, t.Phase)
	}
	return nil
}

func repairCmd(streams kcli.IOStreams, cmd *cli.Command) error {
	if cmd.NArg() != 0 {
		return kcli.Usage("repair takes no arguments")
	}
	s, err := openWith(streams, cmd, statesession.Options{Mutate: true, SkipJournalRepair: true, RepairRunLock: true})
	if err != nil {
		return err
	}
	defer s.close()
	// The run lock first: every other command stops on it, this one's
	// history records included.
	lockNote, err := s.dir.RepairRunLock()
	if err != nil {
		return err
	}
	if lockNote != "" {
		fmt.Fprintf(streams.ErrOut, "repaired: %s\n", lockNote)
	}
	did, err := s.j.RepairDamage()
	for _, d := range did {
		fmt.Fprintf(streams.ErrOut, "repaired: %s\n", d)
	}
	if err != nil {
		return err
	}
	if lockNote != "" {
		if err := s.j.RecordRepair(lockNote); err != nil {
			return err
		}
		did = append(did, lockNote)
	}
	if len(did) == 0 && !s.common.Quiet {
		fmt.Fprintln(streams.Out, "the journal reads fine: nothing to repair")
		return nil
	}
	t, err := site.ReadTxn(s.dir)
	if err != nil {
		return err
	}
	if s.common.Quiet {
		return nil
	}
	if t == nil {
		_, err = fmt.Fprintln(streams.Out, "no transaction in progress")
		return err
	}
	return writeText(streams.Out, t, nextOf(s.dir, t))
}

// claimedByHand refuses to record step p of t done by hand when its
// plugin records it (a step that changes a slot: it is done only when the
// plugin did it, as the step; the switch's own phases: only the switch
// records them), unless force: then the override is said and recorded.
// COMMITTED is recorded only once the world bears it out.
func claimedByHand(streams kcli.IOStreams, s *session, t *journal.Transaction, p journal.Phase, status string, force bool) error {
	if status == journal.StatusStarted && p == journal.Committed {
		return confirmCommit(s.dir, t, p)
	}
	if status != journal.StatusDone {
		return nil
	}
	var why string
	if c, ok := site.StepClaim(t, p); ok {
		if site.Read(s.dir).Proven(t, c) == nil {
			return nil
		}
		why = fmt.Sprintf("%s is recorded done only once the plugin that does it did it (%s: the strategy script runs it as the step; by hand, run it after recording the step started), and the history shows no %s of slot %s since the step started%s", p, c.Command(s.dir), c.Change, c.Slot, c.StageFirst(s.dir, t))
	} else if site.SwitchOwned(t.Strategy, p) {
		why = fmt.Sprintf("%s is recorded only by the switch plugin itself: %s records it", p, site.SwitchCommand(s.dir, t, p))
	} else {
		return nil
	}
	if !force {
		return &site.ClaimError{Msg: why + "; nothing was recorded; re-run the strategy script (" + s.dir.Plugin("journal", "status").String() + " names it), or pass --force if the change was made by hand (said and recorded in the history)"}
	}
	fmt.Fprintf(streams.ErrOut, "WARNING: --force: recording %s done by hand: %s\n", p, why)
	return s.j.Record(journal.Event{Type: "force", Detail: fmt.Sprintf("%s recorded done by hand (--force): %s", p, why), Status: journal.StatusDone})
}
