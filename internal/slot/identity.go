package slot

import (
	"slices"

	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// DetailOwns is the history's note that a slot keeps workload clusters
// after an S1 (repoint) accept; its identity names them.
const DetailOwns = "owns"

// Identity is the durable part of rec, as the history keeps it.
func Identity(rec *Record) *journal.SlotIdentity {
	return &journal.SlotIdentity{Provider: rec.Provider, Cluster: rec.Cluster, Context: rec.Context, Kubeconfig: rec.Kubeconfig,
		Registry: rec.Registry, RegistryPort: rec.RegistryPort, Inputs: rec.Inputs, Adopted: rec.Adopted,
		Workloads: slices.Clone(rec.Workloads), OwnsWorkloads: slices.Clone(rec.OwnsWorkloads)}
}

// IdentityEvent is the history event of detail on rec's slot that keeps
// rec's identity: a lost or damaged record is rebuilt from the last one.
func IdentityEvent(rec *Record, detail, status string) journal.Event {
	return journal.Event{Type: "slot", Slot: rec.Name, Detail: detail, Status: status, Identity: Identity(rec)}
}

// recordIdentity records detail of rec's slot in the history with rec's
// identity.
func (m *Manager) recordIdentity(rec *Record, detail, status string) {
	m.recordEvent(IdentityEvent(rec, detail, status))
}

func (m *Manager) recordEvent(ev journal.Event) {
	if m.Journal == nil {
		return
	}
	if err := m.Journal.Record(ev); err != nil {
		m.logf("warning: recording %s %s in the journal: %v", ev.Detail, ev.Status, err)
	}
}

// lineage is what the history says of one slot.
type lineage struct {
	// exists: the last create (or completed adopt) is not followed by a
	// destroy or a repair that found it gone.
	exists bool
	// id is the last identity recorded since (nil: none, as in histories
	// written before identities were recorded).
	id *journal.SlotIdentity
	// adopted: the slot was adopted (its names are the site's, not
	// derived), even when the history predates identities.
	adopted bool
	// destroyed: the last word of the history on the slot is its destroy
	// (or a repair that found it gone).
	destroyed bool
}

// historyOf reads what the history says of slot name.
func historyOf(d *state.Dir, name string) lineage {
	h, err := journal.ReadHistory(d.Join(journal.Dir, journal.HistoryFile))
	if err != nil {
		return lineage{}
	}
	var l lineage
	for _, ev := range h.Events {
		if ev.Type != "slot" || ev.Slot != name {
			continue
		}
		switch ev.Detail {
		case "create":
			l = lineage{exists: true, id: ev.Identity}
		case "adopt":
			// A failed adopt built nothing; its started event precedes
			// the record, its done event follows it.
			if ev.Status == journal.StatusDone {
				l = lineage{exists: true, id: ev.Identity, adopted: true}
			}
		case "repair", DetailOwns:
			if ev.Identity != nil && l.exists {
				l.id, l.adopted = ev.Identity, l.adopted || ev.Identity.Adopted
			}
		case "destroy", DetailGone:
			l = lineage{destroyed: true}
		}
	}
	return l
}

// DestroyedPerHistory reports whether the history says slot name was
// destroyed (or found gone by a repair) and not created or adopted since:
// a slot with no record for that reason is gone, not lost.
func DestroyedPerHistory(d *state.Dir, name string) bool { return historyOf(d, name).destroyed }

// OwnedPerHistory lists the workload clusters the history says slot name
// owns (an S1 accept kept them): it decides protection when the slot's
// record is lost or damaged.
func OwnedPerHistory(d *state.Dir, name string) []string {
	if l := historyOf(d, name); l.exists && l.id != nil {
		return l.id.OwnsWorkloads
	}
	return nil
}

// WorkloadOwners lists the slots that own workload clusters, with those
// clusters: a readable record says so, else (record lost or damaged) the
// history does.
func WorkloadOwners(d *state.Dir) map[string][]string {
	names, _ := List(d)
	for _, n := range recordless(d) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	out := map[string][]string{}
	for _, n := range names {
		rec, err := Load(d, n)
		owns := OwnedPerHistory(d, n)
		if err == nil {
			owns = rec.OwnsWorkloads
		}
		if len(owns) > 0 {
			out[n] = owns
		}
	}
	return out
}

// historyRecord is the stand-in record of slot name rebuilt from the
// history's last identity of it (nil when the history keeps none): what
// destroy and repair use when the record is lost or damaged. An adopt
// recorded before identities were takes the site's default names.
func (m *Manager) historyRecord(name string) *Record {
	l := historyOf(m.Dir, name)
	if !l.exists {
		return nil
	}
	id := l.id
	if id == nil && l.adopted {
		n, err := m.Config.NamesFor(name)
		if err != nil {
			return nil
		}
		o := m.Config.AdoptDefaults()
		id = &journal.SlotIdentity{Provider: ProviderKind, Cluster: o.Cluster, Context: n.Context, Kubeconfig: m.Kubeconfig,
			Registry: o.Registry, RegistryPort: o.RegistryPort, Inputs: "adopted", Adopted: true, Workloads: o.Workloads}
	}
	if id == nil {
		return nil
	}
	return &Record{Name: name, Provider: id.Provider, Cluster: id.Cluster, Context: id.Context, Kubeconfig: id.Kubeconfig,
		Registry: id.Registry, RegistryPort: id.RegistryPort, Inputs: id.Inputs, Adopted: id.Adopted || l.adopted,
		Workloads: slices.Clone(id.Workloads), OwnsWorkloads: slices.Clone(id.OwnsWorkloads)}
}
