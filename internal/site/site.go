// Package site reads the state dir once into one value and answers, in
// one place, which slot serves, which slots are protected and why, and
// what repairs damage: every command, the guard and journal status take
// these answers from here (docs/architecture.md).
package site

import (
	"errors"
	"slices"

	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// Site is the state dir as one read found it. Each part keeps its own
// damage: a damaged part never hides the others, and reading never panics.
// A Site is a snapshot: a command that writes reads the site again.
type Site struct {
	Dir *state.Dir

	pointer        string
	pointerPresent bool
	pointerProblem error

	sw        *record.Switch
	swProblem error

	txn    *journal.Transaction
	txnErr error

	history    *journal.History
	historyErr error

	names    []string
	namesErr error
	slots    map[string]slotRead
}

type slotRead struct {
	rec *record.Slot
	err error
}

// Read reads every record of the state dir: the active pointer, the
// switch record, the open transaction, the history and each slot's record.
func Read(d *state.Dir) *Site {
	s := &Site{Dir: d, slots: map[string]slotRead{}}
	s.pointer, s.pointerPresent, s.pointerProblem = record.ReadActive(d)
	s.sw, s.swProblem = record.ReadSwitch(d)
	s.txn, s.history, s.txnErr = journal.New(d).LoadAndHistory()
	if s.history == nil {
		s.history, s.historyErr = journal.ReadHistory(d.Join(journal.Dir, journal.HistoryFile))
	}
	s.names, s.namesErr = record.ListSlots(d)
	for _, n := range s.names {
		rec, err := record.LoadSlot(d, n)
		s.slots[n] = slotRead{rec, err}
	}
	return s
}

// Names are the slots with a record file (readable or not).
func (s *Site) Names() []string { return slices.Clone(s.names) }

// Slot is slot name's record: *record.NotFoundError when it has none,
// *record.DamagedError when it cannot be read.
func (s *Site) Slot(name string) (*record.Slot, error) {
	if r, ok := s.slots[name]; ok {
		return r.rec, r.err
	}
	rec, err := record.LoadSlot(s.Dir, name)
	s.slots[name] = slotRead{rec, err}
	return rec, err
}

// Txn is the open transaction (nil when none), or the journal's damage.
func (s *Site) Txn() (*journal.Transaction, error) { return s.txn, s.txnErr }

// txnOrNil is the open transaction where a reading only consults it
// (damage is reported by whoever reads the journal strictly).
func (s *Site) txnOrNil() *journal.Transaction {
	if s.txnErr != nil {
		return nil
	}
	return s.txn
}

// blueGreen is the open transaction when it is a blue-green update.
func (s *Site) blueGreen() *journal.Transaction {
	if t := s.txnOrNil(); t != nil && t.Strategy == journal.BlueGreen {
		return t
	}
	return nil
}

// events are the history's events (none when it cannot be read: the
// journal's own reading names that damage).
func (s *Site) events() []journal.Event {
	if s.historyErr != nil || s.history == nil {
		return nil
	}
	return s.history.Events
}

// Lineage is what the history says of one slot.
type Lineage struct {
	// Exists: the last create (or completed adopt) is not followed by a
	// destroy or a repair that found it gone.
	Exists bool
	// ID is the last identity recorded since (nil: none, as in histories
	// written before identities were recorded).
	ID *journal.SlotIdentity
	// Adopted: the slot was adopted (its names are the site's, not
	// derived), even when the history predates identities.
	Adopted bool
	// Destroyed: the last word of the history on the slot is its destroy
	// (or a repair that found it gone).
	Destroyed bool
}

// Lineage reads what the history says of slot name.
func (s *Site) Lineage(name string) Lineage {
	var l Lineage
	for _, ev := range s.events() {
		if ev.Type != "slot" || ev.Slot != name {
			continue
		}
		switch ev.Detail {
		case "create":
			l = Lineage{Exists: true, ID: ev.Identity}
		case "adopt":
			// A failed adopt built nothing; its started event precedes
			// the record, its done event follows it.
			if ev.Status == journal.StatusDone {
				l = Lineage{Exists: true, ID: ev.Identity, Adopted: true}
			}
		case "repair", record.DetailOwns, record.DetailMoved:
			if ev.Identity != nil && l.Exists {
				l.ID, l.Adopted = ev.Identity, l.Adopted || ev.Identity.Adopted
			}
		case "destroy", record.DetailGone:
			l = Lineage{Destroyed: true}
		}
	}
	return l
}

// LastCluster is the last identity the history recorded for slot name
// with the identity of its cluster, destroyed since or not (nil: none):
// the cluster a recreate tore it down on (a create's started event names
// no cluster yet).
func (s *Site) LastCluster(name string) *journal.SlotIdentity {
	var id *journal.SlotIdentity
	for _, ev := range s.events() {
		if ev.Type == "slot" && ev.Slot == name && ev.Identity != nil && ev.Identity.ClusterID != nil {
			id = ev.Identity
		}
	}
	return id
}

// Exists reports whether slot name exists as far as the state can tell:
// its record is there (readable or not), or the history says it was
// created and not destroyed since (its record was removed from outside;
// slot repair asks the machine).
func (s *Site) Exists(name string) bool {
	if _, err := s.Slot(name); !errors.As(err, new(*record.NotFoundError)) {
		return true
	}
	return s.Lineage(name).Exists
}

// switched reports whether the history records a completed switch
// (switchover's "switch" event).
func (s *Site) switched() bool {
	for _, ev := range s.events() {
		if ev.Type == "switch" {
			return true
		}
	}
	return false
}

// Recordless lists the slots the history says exist whose record is gone.
func (s *Site) Recordless() []string {
	var out []string
	seen := map[string]bool{}
	for _, ev := range s.events() {
		if ev.Type == "slot" && !seen[ev.Slot] && record.ValidName(ev.Slot) == nil {
			seen[ev.Slot] = true
			if _, err := s.Slot(ev.Slot); errors.As(err, new(*record.NotFoundError)) && s.Lineage(ev.Slot).Exists {
				out = append(out, ev.Slot)
			}
		}
	}
	return out
}

// OwnedPerHistory lists the workload clusters the history says slot name
// owns (an S1 accept kept them): it decides protection when the slot's
// record is lost or damaged.
func (s *Site) OwnedPerHistory(name string) []string {
	if l := s.Lineage(name); l.Exists && l.ID != nil {
		return l.ID.OwnsWorkloads
	}
	return nil
}

// WorkloadOwners lists the slots that own workload clusters, with those
// clusters: a readable record says so, else (record lost or damaged) the
// history does.
func (s *Site) WorkloadOwners() map[string][]string {
	names := s.Names()
	for _, n := range s.Recordless() {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	out := map[string][]string{}
	for _, n := range names {
		rec, err := s.Slot(n)
		owns := s.OwnedPerHistory(n)
		if err == nil {
			owns = rec.OwnsWorkloads
		}
		if len(owns) > 0 {
			out[n] = owns
		}
	}
	return out
}

// ReadTxn is Read(d).Txn() without reading the rest of the site: the
// open transaction (nil when none), or the journal's damage.
func ReadTxn(d *state.Dir) (*journal.Transaction, error) {
	return journal.New(d).Load()
}
