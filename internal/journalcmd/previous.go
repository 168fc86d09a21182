package journalcmd

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v3"

	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/stage"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// previousView is `journal previous -o json`.
type previousView struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Slot serves Current, which transaction InstalledBy put there (it
	// ended Phase), replacing Digest.
	Slot        string `json:"slot"`
	Current     string `json:"current"`
	InstalledBy string `json:"installedBy"`
	Strategy    string `json:"strategy"`
	Phase       string `json:"phase"`
	Digest      string `json:"digest"`
	// Staged is the staged copy of Digest (to update back to); Source the
	// path it was staged from, when the history names one.
	Staged string `json:"staged"`
	Source string `json:"source,omitempty"`
	// Apply is the update back to it with blue/green.
	Apply advice.Cmd `json:"apply"`
}

// Previous finds, in the history, the package the active slot's package
// replaced: the fallback of the last update that installed it and
// completed (blue-green RETIRED, in-place or recreate COMMITTED). A later
// update that failed or was reverted does not count: its fallback is the
// current package.
func previous(events []journal.Event, slotName, current string) (*previousView, error) {
	begins := map[string]journal.Event{}
	var by *journal.Event
	var phase journal.Phase
	for _, ev := range events {
		switch ev.Type {
		case journal.EventBegin:
			begins[ev.TxnID] = ev
		case journal.EventEnd:
			b, ok := begins[ev.TxnID]
			if ok && b.Target == current && (ev.Phase == journal.Retired || ev.Phase == journal.Committed) {
				by, phase = &b, ev.Phase
			}
		}
	}
	if by == nil {
		return nil, errkind.New(errkind.Environment, "slot %s serves package %s, which no completed update in the history installed (the first install, or one made by hand): there is no earlier package in the records to go back to", slotName, current)
	}
	if by.Fallback == "" {
		return nil, errkind.New(errkind.Environment, "slot %s serves package %s, installed by transaction %s (%s), which recorded no package to fall back to: there is no earlier package in the records to go back to", slotName, current, by.TxnID, by.Strategy)
	}
	v := &previousView{APIVersion: journal.APIVersion, Kind: "JournalPrevious", Slot: slotName, Current: current,
		InstalledBy: by.TxnID, Strategy: string(by.Strategy), Phase: string(phase), Digest: by.Fallback}
	for _, ev := range events {
		if ev.Type == journal.EventBegin && ev.Target == by.Fallback && ev.Package != "" {
			v.Source = ev.Package
		}
	}
	return v, nil
}

// previousCmd is `journal previous`.
func previousCmd(streams kcli.IOStreams, cmd *cli.Command) error {
	if cmd.Args().Len() > 0 {
		return kcli.Usage("previous takes no arguments (see --help)")
	}
	s, err := openSession(streams, cmd, false)
	if err != nil {
		return err
	}
	here := site.Read(s.dir)
	a, err := here.Active()
	if err != nil {
		return err
	}
	if a == "" {
		return errkind.New(errkind.Environment, "no slot is active: there is no current package to go back from (%s)", s.dir.Plugin("switch", "status"))
	}
	rec, err := here.Slot(a)
	if err != nil {
		return err
	}
	if rec.Package == nil || rec.Package.Digest == "" {
		return errkind.New(errkind.Environment, "the active slot %s holds no package: there is nothing to go back from", a)
	}
	h, err := journal.ReadHistory(s.dir.Join(journal.Dir, journal.HistoryFile))
	if err != nil {
		return err
	}
	v, err := previous(h.Events, a, rec.Package.Digest)
	if err != nil {
		return err
	}
	p, err := stage.Lookup(s.dir, &stage.Ref{Arg: v.Digest, Digest: v.Digest})
	if err != nil {
		var ns *stage.NotStagedError
		if errors.As(err, &ns) {
			from := "its archive"
			if v.Source != "" {
				from = v.Source + " (where it was staged from)"
			}
			return errkind.New(errkind.Environment, "the package slot %s's package replaced, %s, is not staged any more: stage it again from %s with %s, whose sha256 must be %s; then run this again",
				a, v.Digest, from, s.dir.Plugin("verify", "--stage", "PACKAGE"), v.Digest)
		}
		return err
	}
	// Staged is not enough: the copy must still be the bytes verified
	// (a cut copy exits 3 naming the command that stages it again).
	if err := p.Check(); err != nil {
		// As a copy that is gone (exit 3): no way back until it is staged again.
		return errkind.Wrap(errkind.Environment, err)
	}
	v.Staged = p.Path
	// The apply verifies with what the package was staged with: the
	// printed line runs as printed, without $ZARF_VERIFY_KEY.
	if p.Record.IsUnsigned() {
		// The scripts take only a verified package: a line without its
		// material would exit 2 as printed.
		return errkind.New(errkind.Environment, "the package slot %s's package replaced, %s, was staged without a signature (--insecure-skip-signature), and the strategy scripts take only signed packages: stage its signed archive with %s (with the site's key or keyless signer), then run this again",
			a, v.Digest, s.dir.Plugin("verify", "--stage", "PACKAGE"))
	}
	v.Apply = backCommand(s.dir, journal.Strategy(v.Strategy), p.Path, p.Record.Material())
	if s.common.Output == kcli.OutputJSON {
		return kcli.WriteJSON(streams.Out, v)
	}
	_, err = io.WriteString(streams.Out, fmt.Sprintf("slot %s serves %s, installed by transaction %s (%s, %s)\nthe package it replaced: %s\nstaged: %s\nto update back to it: %s\n",
		a, v.Current, v.InstalledBy, v.Strategy, v.Phase, v.Digest, v.Staged, v.Apply))
	return err
}

// backCommand is the strategy run that updates back to the staged copy
// path: blue/green where the site has two slots, else the strategy that
// installed the current package (in place or recreate), in place when
// that was blue/green on a site now of one slot.
func backCommand(d *state.Dir, installedBy journal.Strategy, path string, material []string) advice.Cmd {
	st := journal.BlueGreen
	if cfg, err := slot.LoadConfig(d.Join("config.yaml"), os.Getenv, nil); err == nil && len(cfg.Slots) < 2 {
		st = installedBy
		if st == journal.BlueGreen || st == "" {
			st = journal.InPlace
		}
	}
	args := append([]string{path}, material...)
	if st == journal.BlueGreen {
		args = append([]string{"apply"}, args...)
	}
	return advice.Program(journal.ScriptPath(st), args...)
}
