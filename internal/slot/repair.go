package slot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
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
}

// ErrNotDamaged is returned by RepairRecord when the record reads fine.
var ErrNotDamaged = errors.New("the record is not damaged")

// RepairRecord rebuilds the damaged record of slotName without touching its
// cluster: its names and provider from the settings (as create derives
// them), its package from the last deploy the history recorded for it
// (when that package is still staged), and no gate result (the gate is run
// again). The damaged file is moved aside, not deleted. The caller holds
// the lock and has decided the slot is to be kept (a protected slot).
func (m *Manager) RepairRecord(_ context.Context, slotName string) (*Repaired, error) {
	_, err := Load(m.Dir, slotName)
	var dmg *DamagedError
	switch {
	case err == nil:
		return nil, ErrNotDamaged
	case !errors.As(err, &dmg):
		return nil, err
	}
	n, err := m.Config.NamesFor(slotName)
	if err != nil {
		return nil, err
	}
	p, err := m.provider()
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	rec := &Record{Name: slotName, Provider: p.Name(), Context: n.Context, State: StateReady, Created: now, Inputs: m.inputs(p, n)}
	p.NewRecord(m, rec, n)
	out := &Repaired{Record: rec}
	if ref, from := lastDeployed(m.Dir, slotName); ref != nil {
		rec.Package, out.PackageFrom = ref, from
	}
	out.Aside = dmg.Path + ".damaged-" + now.Format("20060102T150405Z")
	state.CrashPoint("slot:repair/aside")
	if err := os.Rename(dmg.Path, out.Aside); err != nil {
		return nil, fmt.Errorf("moving the damaged record aside: %w", err)
	}
	if err := Save(m.Dir, rec); err != nil {
		return nil, err
	}
	m.record(slotName, "repair", journal.StatusDone, nil)
	return out, nil
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
