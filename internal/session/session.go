// Package session opens the state dir for one command: it checks the dir,
// takes the state lock when the command mutates, repairs the journal after a
// crash and says what it repaired. Every command opens its state here, so
// these rules are written once.
package session

import (
	"errors"
	"fmt"
	"io"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// Options say how a command uses the state dir.
type Options struct {
	// StateDir is the --state-dir flag ("" for the default).
	StateDir string
	// Mutate takes the state lock for the session and repairs the journal
	// first. Read-only sessions take no lock: every state file is replaced
	// atomically, so each file they read is whole, and they never fail
	// because another command is running.
	Mutate bool
	// Log receives what a repair did and --force overrides; nil discards them.
	Log io.Writer
	// SkipJournalRepair leaves the journal as it is, for the command that
	// repairs damage to it (kubectl bundle-journal repair).
	SkipJournalRepair bool
	// RepairRunLock lets the session open while the run lock is damaged
	// (not a regular file), for the command that repairs it (kubectl
	// bundle-journal repair): it holds the state lock when it moves it aside.
	RepairRunLock bool
	// Step is the transaction step (TXN/PHASE) this process runs, for
	// `journal run` itself; its command inherits it through $KUBECTL_BUNDLE_STEP.
	Step string
}

// Session is an opened state dir, locked when it mutates.
type Session struct {
	Dir     *state.Dir
	Journal *journal.Journal
	lock    *state.Lock
	log     io.Writer
	step    string
}

// Open opens the state dir as o says. A lock held by another command is a
// conflict that names the transaction the holder works on, when one is open.
func Open(o Options) (*Session, error) {
	d, err := state.Open(o.StateDir)
	if err != nil {
		return nil, errkind.Wrap(errkind.Environment, err)
	}
	s := &Session{Dir: d, Journal: journal.New(d), log: o.Log, step: o.Step}
	if s.step == "" {
		s.step = envStep()
	}
	if !o.Mutate {
		return s, nil
	}
	// A live strategy run owns the state dir for its whole run: only its
	// own plugin calls (which inherited its lock) go on. Said first, as
	// the reason, even while one of its calls holds the state lock; and
	// checked again with the state lock held, so that a run starting now
	// waits for this command (journal lock-run).
	if err := runConflict(d); err != nil && !(o.RepairRunLock && d.IsRunLockDamage(err)) {
		return nil, err
	}
	if s.lock, err = d.Lock(); err != nil {
		var le *state.LockedError
		if errors.As(err, &le) {
			if t, lerr := site.ReadTxn(s.Dir); lerr == nil && t != nil {
				return nil, errkind.Wrap(errkind.Conflict, fmt.Errorf("%w; transaction %s (%s) is open in phase %s (%s)",
					err, t.ID, t.Strategy, t.Phase, t.Status))
			}
		}
		return nil, err
	}
	if err := runConflict(d); err != nil && !(o.RepairRunLock && d.IsRunLockDamage(err)) {
		s.Close()
		return nil, err
	}
	if err := stepConflict(d, s.step); err != nil {
		s.Close()
		return nil, err
	}
	if o.SkipJournalRepair {
		return s, nil
	}
	note, err := s.Journal.Repair()
	if err != nil {
		s.Close()
		return nil, err
	}
	if note != "" && o.Log != nil {
		fmt.Fprintf(o.Log, "repaired: %s\n", note)
	}
	return s, nil
}

// Mutating reports whether the session holds the state lock.
func (s *Session) Mutating() bool { return s.lock != nil }

// Close releases the lock, if held. It may be called more than once.
func (s *Session) Close() {
	if s != nil && s.lock != nil {
		_ = s.lock.Unlock()
		s.lock = nil
	}
}

// runConflict refuses a mutating command while a live strategy run that
// this process is not part of holds the state dir.
func runConflict(d *state.Dir) error {
	e, err := d.RunConflict()
	if err != nil || e == nil {
		return err
	}
	return e
}
