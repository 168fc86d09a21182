package slot

import (
	"slices"

	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
)

// Identity is the durable part of rec, as the history keeps it.
func Identity(rec *Record) *journal.SlotIdentity {
	id := &journal.SlotIdentity{Provider: rec.Provider, Cluster: rec.Cluster, Context: rec.Context, Kubeconfig: rec.Kubeconfig,
		Registry: rec.Registry, RegistryPort: rec.RegistryPort, Inputs: rec.Inputs, Adopted: rec.Adopted,
		Workloads: slices.Clone(rec.Workloads), OwnsWorkloads: slices.Clone(rec.OwnsWorkloads),
		MovedIn: slices.Clone(rec.MovedIn), MovedOut: slices.Clone(rec.MovedOut)}
	if c := rec.ClusterID; c != nil {
		id.ClusterID = &journal.SlotClusterID{Server: c.Server, KubeSystemUID: c.KubeSystemUID, NodeContainer: c.NodeContainer}
	}
	return id
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
	if ev.Step == "" {
		ev.Step = m.Step
	}
	if err := m.Journal.Record(ev); err != nil {
		m.logf("warning: recording %s %s in the journal: %v", ev.Detail, ev.Status, err)
	}
}

// historyRecord is the stand-in record of slot name rebuilt from the
// history's last identity of it (nil when the history keeps none): what
// destroy and repair use when the record is lost or damaged. An adopt
// recorded before identities were takes the site's default names.
func (m *Manager) historyRecord(name string) *Record {
	l := site.Read(m.Dir).Lineage(name)
	if !l.Exists {
		return nil
	}
	id := l.ID
	if id == nil && l.Adopted {
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
	rec := &Record{Name: name, Provider: id.Provider, Cluster: id.Cluster, Context: id.Context, Kubeconfig: id.Kubeconfig,
		Registry: id.Registry, RegistryPort: id.RegistryPort, Inputs: id.Inputs, Adopted: id.Adopted || l.Adopted,
		Workloads: slices.Clone(id.Workloads), OwnsWorkloads: slices.Clone(id.OwnsWorkloads),
		MovedIn: slices.Clone(id.MovedIn), MovedOut: slices.Clone(id.MovedOut)}
	if c := id.ClusterID; c != nil {
		rec.ClusterID = &ClusterID{Server: c.Server, KubeSystemUID: c.KubeSystemUID, NodeContainer: c.NodeContainer}
	}
	return rec
}
