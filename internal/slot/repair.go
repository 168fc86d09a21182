package slot

import (
	"context"
	"errors"
	"fmt"
	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"maps"
	"os"
	"strings"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
	"github.com/kubectl-bundle/kubectl-bundle/internal/stage"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// Repaired says what RepairRecord rebuilt.
type Repaired struct {
	Record *Record `json:"record"`
	// Aside is where the damaged record was moved, kept for inspection.
	Aside string `json:"aside"`
	// PackageFrom says where the package came from ("" when unknown).
	PackageFrom string `json:"packageFrom,omitempty"`
	// Running lists what the machine runs of the slot, when the record was
	// missing (rebuilt from what runs).
	Running []string `json:"running,omitempty"`
	// FromHistory: the slot's provider, names and context came from the
	// history's record of its create, adopt or last repair, not from the
	// settings.
	FromHistory bool `json:"fromHistory,omitempty"`
}

// GoneError is a slot with no record of which nothing runs: it is gone,
// and Next is the repair of what still names it.
type GoneError struct {
	Slot string
	Next advice.Fix
}

func (e *GoneError) Error() string {
	return fmt.Sprintf("slot %s has no record and nothing of slot %s runs on this machine (no cluster, no registry or workload container): it is gone, and its record is not rebuilt; next: %s", e.Slot, e.Slot, e.Next)
}

// ErrorKind: the state names a slot that is gone.
func (e *GoneError) ErrorKind() errkind.Kind { return errkind.Environment }

// ErrNotDamaged is returned by RepairRecord when the record reads fine.
var ErrNotDamaged = errors.New("the record is not damaged")

// RepairRecord rebuilds the damaged record of slotName without touching its
// cluster: its provider, names, context and owned workload clusters from
// the identity the history recorded with its create, adopt, last repair or
// S1 accept (from the settings, as create derives them, when the history
// predates identities), its package from the last deploy or adopt the
// history recorded for it (when that package is still staged), and no gate
// result (the gate is run again). The damaged file is moved aside, not deleted. The caller holds
// the lock and has decided the slot is to be kept (a protected slot).
//
// A missing record (removed from outside) is rebuilt the same way when the
// machine runs something of the slot (the provider asks Docker and kind,
// as destroy does); when nothing runs, the slot is gone: that is recorded
// in the history and *GoneError names the next repair.
func (m *Manager) RepairRecord(ctx context.Context, slotName string) (*Repaired, error) {
	_, err := Load(m.Dir, slotName)
	var dmg *DamagedError
	var nf *NotFoundError
	switch {
	case err == nil:
		return nil, ErrNotDamaged
	case !errors.As(err, &dmg) && !errors.As(err, &nf):
		return nil, err
	}
	n, err := m.NamesOf(slotName)
	if err != nil {
		return nil, err
	}
	// What the history says the slot was built as (its provider, an
	// adopted site's names, its context, what it owns) outlives the
	// record; only a history that predates that falls back to the
	// settings.
	kept := m.historyRecord(slotName)
	p, err := m.provider()
	if kept != nil {
		p, err = recordProvider(kept)
	}
	if err != nil {
		return nil, err
	}
	if kept != nil && kept.Provider == ProviderExisting && m.Config.Existing[slotName].Context == "" {
		ex := maps.Clone(m.Config.Existing)
		if ex == nil {
			ex = map[string]ExistingSlot{}
		}
		ex[slotName] = ExistingSlot{Context: kept.Context, Kubeconfig: kept.Kubeconfig}
		m.Config.Existing = ex
	}
	var running []string
	if nf != nil {
		if running, err = p.Running(ctx, m, n); err != nil {
			return nil, fmt.Errorf("asking the machine what runs of slot %s: %w", slotName, err)
		}
		if len(running) == 0 {
			m.record(slotName, record.DetailGone, journal.StatusDone, nil)
			return nil, &GoneError{Slot: slotName, Next: m.afterGone(slotName)}
		}
	}
	now := time.Now().UTC()
	rec := &Record{Name: slotName, Provider: p.Name(), Context: n.Context, State: StateReady, Created: now, Inputs: m.inputs(p, n)}
	p.NewRecord(m, rec, n)
	if kept != nil {
		rec.Cluster, rec.Context, rec.Kubeconfig, rec.Registry, rec.RegistryPort = kept.Cluster, kept.Context, kept.Kubeconfig, kept.Registry, kept.RegistryPort
		rec.Adopted, rec.Workloads, rec.OwnsWorkloads = kept.Adopted, kept.Workloads, kept.OwnsWorkloads
		// The cluster it was created on, not the one its context reaches
		// now (issue 32, class 2).
		rec.ClusterID = kept.ClusterID
		if kept.Inputs != "" {
			rec.Inputs = kept.Inputs
		}
	}
	out := &Repaired{Record: rec, Running: running, FromHistory: kept != nil}
	if ref, from := lastDeployed(m.Dir, slotName); ref != nil {
		rec.Package, out.PackageFrom = ref, from
	}
	if dmg != nil {
		state.CrashPoint("slot:repair/aside")
		if out.Aside, err = state.MoveAside(dmg.Path); err != nil {
			return nil, err
		}
	}
	if err := Save(m.Dir, rec); err != nil {
		return nil, err
	}
	m.recordIdentity(rec, "repair", journal.StatusDone)
	return out, nil
}

// afterGone is what to run once slot name was found gone: the repair of
// the pointer when it names that slot, else nothing more for it.
func (m *Manager) afterGone(name string) advice.Fix {
	if a, err := site.Read(m.Dir).Active(); err == nil && a == name {
		return site.Read(m.Dir).ActiveRepair()
	} else if lp := (*site.LostPointerError)(nil); errors.As(err, &lp) {
		return lp.Fix
	} else if err != nil {
		return site.Read(m.Dir).ActiveFix()
	}
	return advice.Do(m.Dir.Plugin("slot", "list")).Because("slot " + name + " is no longer listed")
}

// lastDeployed is the package the history last recorded deployed into
// slotName (after its last create), resolved among the staged packages.
func lastDeployed(d *state.Dir, slotName string) (*PackageRef, string) {
	h, err := journal.ReadHistory(d.Join(journal.Dir, journal.HistoryFile))
	if err != nil {
		return nil, ""
	}
	var prefix string
	var when time.Time
	for _, ev := range h.Events {
		if ev.Type != "slot" || ev.Slot != slotName {
			continue
		}
		switch {
		case strings.HasPrefix(ev.Detail, "deploy/") && ev.Status == journal.StatusDone:
			prefix, when = strings.TrimPrefix(ev.Detail, "deploy/"), ev.Time
		case ev.Detail == "adopt" && ev.Status == journal.StatusDone:
			prefix, when = ev.Package, ev.Time // "" before adopt recorded it
		case ev.Detail == "create" || ev.Detail == "destroy":
			prefix = ""
		}
	}
	if prefix == "" {
		return nil, ""
	}
	ents, err := os.ReadDir(d.Join(stage.PackagesDir))
	if err != nil {
		return nil, ""
	}
	var digest string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			if digest != "" {
				return nil, "" // ambiguous: better unknown than wrong
			}
			digest = e.Name()
		}
	}
	pkg, err := stage.Lookup(d, &stage.Ref{Digest: digest})
	if digest == "" || err != nil {
		return nil, ""
	}
	r := pkg.Record.Report.Package
	return &PackageRef{Digest: digest, Name: r.Name, Version: r.Version, Deployed: when},
		fmt.Sprintf("the history's deploy of %s at %s", prefix, when.Format(time.RFC3339))
}
