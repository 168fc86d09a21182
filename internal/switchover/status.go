package switchover

import (
	"context"
	"errors"
	"fmt"
	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"

	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
)

// Status is what `status` reports.
type Status struct {
	Active   string `json:"active"`
	Previous string `json:"previous,omitempty"`
	Phase    string `json:"phase,omitempty"`
	Target   string `json:"target,omitempty"`
	// Mode is the last switch's mode ("repoint" for S1).
	Mode string `json:"mode,omitempty"`
	// Owners says which slots own workload clusters ("slot a owns
	// workload clusters: ...").
	Owners        []string   `json:"owners,omitempty"`
	SoakStarted   *time.Time `json:"soakStarted,omitempty"`
	SoakWindow    string     `json:"soakWindow,omitempty"`
	SoakRemaining string     `json:"soakRemaining,omitempty"`
	// KubeconfigAlias is the slot whose context the alias context uses.
	AliasContext    string `json:"aliasContext"`
	KubeconfigAlias string `json:"kubeconfigAlias"`
	KubeconfigAgree bool   `json:"kubeconfigAgrees"`
	RegistryAlias   string `json:"registryAlias"`
	RegistryHolder  string `json:"registryAliasSlot"`
	RegistryAgree   bool   `json:"registryAgrees"`
	Consistent      bool   `json:"consistent"`
	// Damaged lists the slot records that cannot be read, each with the
	// command that clears it.
	Damaged []string `json:"damaged,omitempty"`
	// Next is the command that completes an interrupted switch.
	Next string `json:"next,omitempty"`
}

// Status compares the active pointer with where the aliases point.
func (s *Switcher) Status(ctx context.Context) (*Status, error) {
	st := &Status{AliasContext: s.AliasContext, RegistryAlias: s.RegistryAlias}
	here := site.Read(s.Dir)
	var err error
	if st.Active, err = here.Active(); err != nil {
		return nil, err
	}
	sw, err := here.Switch()
	if err != nil {
		return nil, err
	}
	var historyNext advice.Fix
	if to, from := here.HistorySoak(); sw == nil && from != "" && to == st.Active {
		// switch.json is gone while the history says a soak began: its
		// revert target stays protected (site.Kept) until the record is
		// written again.
		st.Previous, st.Target = from, to
		st.Damaged = append(st.Damaged, fmt.Sprintf("the switch record is missing, but the history says slot %s was switched to from slot %s and not accepted (slot %s stays protected as the revert target); repair: %s", to, from, from, s.Dir.Plugin("switch", "to", to, "--force")))
		historyNext = advice.Do(s.Dir.Plugin("switch", "to", to, "--force"))
	}
	if sw != nil {
		st.Previous, st.Phase, st.Target, st.Mode = sw.Previous, sw.Phase, sw.Target, sw.Mode
		if sw.Phase == record.PhaseSwitched && !sw.SoakStarted.IsZero() {
			t := sw.SoakStarted
			st.SoakStarted, st.SoakWindow = &t, sw.SoakWindow
			w, _ := time.ParseDuration(sw.SoakWindow)
			left := t.Add(w).Sub(s.now())
			if left < 0 {
				left = 0
			}
			st.SoakRemaining = left.Round(time.Second).String()
		}
	}
	names, err := slot.List(s.Dir)
	if err != nil {
		return nil, err
	}
	ctxOf, regOf := map[string]string{}, map[string]string{}
	var contexts, registries []string
	kept := here.Kept(st.Active)
	for _, n := range names {
		rec, err := slot.Load(s.Dir, n)
		var dmg *slot.DamagedError
		if errors.As(err, &dmg) {
			dmg.Protected = n == st.Active || n == kept
			st.Damaged = append(st.Damaged, fmt.Sprintf("slot %s: its record cannot be read (%v); repair: %s", n, dmg.Err, dmg.Repair()))
			continue
		}
		if err != nil {
			return nil, err
		}
		if line := rec.OwnsWorkloadsLine(); line != "" {
			st.Owners = append(st.Owners, line)
		}
		ctxOf[rec.Context] = n
		contexts = append(contexts, rec.Context)
		if rec.Registry != "" {
			regOf[rec.Registry] = n
			registries = append(registries, rec.Registry)
		}
	}
	target, err := aliasTarget(s.Kubeconfig, s.AliasContext, contexts)
	if err != nil {
		return nil, err
	}
	st.KubeconfigAlias = ctxOf[target]
	st.KubeconfigAgree = st.Active == "" || st.KubeconfigAlias == st.Active
	st.RegistryAgree = true
	if len(registries) > 0 && st.Active != "" {
		holder, err := s.registryAliasHolder(ctx, registries)
		if err != nil {
			return nil, fmt.Errorf("reading the registry alias: %w", err)
		}
		st.RegistryHolder = regOf[holder]
		if act, err := slot.Load(s.Dir, st.Active); err == nil && act.Registry != "" {
			// An adopted site's registry is reached by its own name until a
			// switch gives the alias to a slot.
			st.RegistryAgree = st.RegistryHolder == st.Active || act.Adopted && st.RegistryHolder == ""
		}
	}
	st.Consistent = st.KubeconfigAgree && st.RegistryAgree && st.Phase != record.PhaseSwitching && st.Phase != record.PhaseSwitchingBack
	var next advice.Fix
	switch {
	case st.Phase == record.PhaseSwitching:
		next = advice.Do(s.Dir.Plugin("switch", "to", st.Target))
	case st.Phase == record.PhaseSwitchingBack:
		next = advice.Do(s.Dir.Plugin("switch", "back"))
	case !st.Consistent && st.Active != "":
		next = advice.Do(s.Dir.Plugin("switch", "to", st.Active))
	}
	if !historyNext.IsZero() {
		st.Consistent, next = false, historyNext
	}
	// A pointer (or an unfinished switch) naming a slot that has no record
	// cannot be completed by a switch to that slot: its repair points the
	// pointer at a slot that exists (the one the aliases still follow,
	// first), or removes it when none does.
	if err := here.CheckActiveRecord(st.Active); err != nil {
		// The slot the switch record says serves first, then the ones the
		// aliases follow: ActiveRepair names only a gated one.
		fix := here.PointerRepair(st.Active, st.Target, st.KubeconfigAlias, st.RegistryHolder, st.Previous)
		st.Damaged = append(st.Damaged, fmt.Sprintf("the active pointer names slot %s, which has no record; repair: %s", st.Active, fix))
		st.Consistent, next = false, fix
	} else if last := next.Last(); last.Is("switch", "to") {
		if _, err := slot.Load(s.Dir, last.Argv[3]); errors.As(err, new(*slot.NotFoundError)) {
			next = here.ActiveRepair(st.Active, st.Target, st.KubeconfigAlias, st.RegistryHolder, st.Previous)
		}
	}
	if !next.IsZero() {
		st.Next = next.String()
	}
	return st, nil
}
