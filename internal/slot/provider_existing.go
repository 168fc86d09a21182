package slot

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
)

// ProviderExisting uses a cluster the operator already has, reached
// through a kube context; it never builds or removes the cluster itself.
const ProviderExisting = "existing"

type existingProvider struct{}

func (existingProvider) Name() string { return ProviderExisting }

func (existingProvider) ValidateConfig(*Config) error { return nil }

func (existingProvider) Inputs(m *Manager, n *Names) []string {
	es := m.Config.Existing[n.Slot]
	return []string{es.Context, es.Kubeconfig, strconv.FormatBool(es.Init)}
}

func (existingProvider) NewRecord(m *Manager, rec *Record, n *Names) {
	es := m.Config.Existing[n.Slot]
	rec.Context, rec.Kubeconfig = es.Context, absPath(es.Kubeconfig)
}

func (existingProvider) Summary(r *Record) string {
	return fmt.Sprintf("existing cluster, context %s", r.Context)
}

func (existingProvider) Preflight(ctx context.Context, m *Manager, rep *PreflightReport, n *Names, _ int64) {
	es, ok := m.Config.Existing[rep.Slot]
	if !ok || es.Context == "" {
		rep.add("context", false, "no kube context configured for slot %s: pass --context (and --kubeconfig), or set existing.%s.context in config.yaml", rep.Slot, rep.Slot)
		return
	}
	if es.Context == m.Config.AliasContext {
		// The alias follows the active slot: a slot reached through it
		// would reach whichever slot is active, its revert target too.
		rep.add("context", false, "context %s is the alias the switch plugin points at the active slot (aliasContext): slot %s would follow it to the other slot's cluster at the next switch; give slot %s a context of its own cluster in config.yaml (existing.%s.context, or --context)",
			es.Context, rep.Slot, rep.Slot, rep.Slot)
		return
	}
	cfg, err := restConfig(es.Kubeconfig, es.Context)
	if err != nil {
		rep.add("context", false, "%v", err)
		return
	}
	if err := ping(ctx, cfg, 10*time.Second); err != nil {
		rep.add("context", false, "context %s (%s) is unreachable: %v", es.Context, cfg.Host, err)
		return
	}
	rep.add("context", true, "context %s reaches %s", es.Context, cfg.Host)
	// Two slots cannot be one cluster: a context copied from another
	// slot's, or two contexts swapped, would build the candidate in the
	// active slot's cluster.
	id, err := identify(ctx, cfg)
	if err != nil {
		rep.add("cluster", false, "%v", err)
		return
	}
	others := m.otherClusters(ctx, rep.Slot)
	names := make([]string, 0, len(others))
	for n := range others {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if others[n].Same(id) {
			rep.add("cluster", false, "slots %s and %s would be one cluster: context %s of slot %s reaches %s, which is slot %s's cluster%s; give slot %s a context of a cluster of its own in config.yaml (existing.%s.context, or --context)",
				n, rep.Slot, es.Context, rep.Slot, id, n, otherVia(m, n), rep.Slot, rep.Slot)
			return
		}
	}
	rep.add("cluster", true, "%s, no other slot's cluster", id)
}

// otherVia says how slot n reaches its cluster, for a message.
func otherVia(m *Manager, n string) string {
	if rec, err := Load(m.Dir, n); err == nil {
		return " (its record: context " + rec.Context + ")"
	}
	if es, ok := m.Config.Existing[n]; ok {
		return " (config.yaml: existing." + n + ".context " + es.Context + ")"
	}
	return ""
}

func (existingProvider) Create(ctx context.Context, m *Manager, rec *Record, _ *Names) error {
	es := m.Config.Existing[rec.Name]
	if len(m.Config.Seed) > 0 {
		m.logf("slot %s: the existing provider runs no registry of its own: seed: is not pushed (seed the cluster's registry as the site does)", rec.Name)
	}
	if err := m.step(rec, "create", "kubeconfig", func() error {
		return writeSlotKubeconfig(m.Dir, rec.Name, es.Kubeconfig, es.Context)
	}); err != nil {
		return err
	}
	// The cluster's identity, as zarf reaches it: every later deploy,
	// switch and destroy checks it.
	id, err := identifyContext(ctx, KubeconfigPath(m.Dir, rec.Name), "")
	if err != nil {
		return fmt.Errorf("slot %s: %w", rec.Name, err)
	}
	if err := m.otherSlotIs(rec.Name, id, "create"); err != nil {
		return err
	}
	if err := m.sameAsTornDown(rec.Name, es.Context, id); err != nil {
		return err
	}
	rec.ClusterID = id
	if err := Save(m.Dir, rec); err != nil {
		return err
	}
	if !es.Init {
		return nil
	}
	initPkg, err := m.InitPackage()
	if err != nil {
		return err
	}
	return m.step(rec, "create", "zarf-init", func() error { return m.zarfInit(ctx, rec.Name, initPkg, 0) })
}

// sameAsTornDown refuses to build slot name on another cluster than the
// one the open recreate tore it down on: config.yaml's context for it
// changed after the teardown, and the rebuild (the update's or the way
// back's) would leave its own cluster empty and build on another.
func (m *Manager) sameAsTornDown(name, context string, id *ClusterID) error {
	s := site.Read(m.Dir)
	t, err := s.Txn()
	if err != nil || t == nil || t.Strategy != journal.Recreate || t.Slots.Active != name {
		return nil
	}
	last := s.LastCluster(name)
	if last == nil {
		return nil
	}
	was := &ClusterID{Server: last.ClusterID.Server, KubeSystemUID: last.ClusterID.KubeSystemUID, NodeContainer: last.ClusterID.NodeContainer}
	if was.Same(id) {
		return nil
	}
	return errkind.New(errkind.Environment, "refusing to create slot %s: recreate transaction %s tore it down on %s, and context %s (config.yaml's existing.%s.context) now reaches %s, another cluster; nothing was created. "+
		"Point existing.%s.context back at the cluster it was torn down on (context %s), then re-run the same command",
		name, t.ID, was, context, name, id, name, last.Context)
}

// recreatableExisting: an existing slot is built again on the context its
// record names; config.yaml naming another one would build it elsewhere.
func (m *Manager) recreatableExisting(slotName string) error {
	rec, err := Load(m.Dir, slotName)
	if err != nil {
		return nil // its own damage, or gone: met by the step itself
	}
	es := m.Config.Existing[slotName]
	if es.Context != rec.Context || absPath(es.Kubeconfig) != absPath(rec.Kubeconfig) {
		return fmt.Errorf("config.yaml builds slot %s with context %s%s, but it runs on context %s%s: a rebuild would build it on another cluster than its own; set existing.%s.context back to %s",
			slotName, es.Context, inFile(es.Kubeconfig), rec.Context, inFile(rec.Kubeconfig), slotName, rec.Context)
	}
	return nil
}

func inFile(kubeconfig string) string {
	if kubeconfig == "" {
		return ""
	}
	return " of " + kubeconfig
}

func (existingProvider) Destroy(_ context.Context, m *Manager, rec *Record, _ *Names) error {
	m.logf("slot %s: the existing cluster (context %s) is left as it is; only the slot's record is removed", rec.Name, rec.Context)
	return nil
}

// Running: the existing cluster runs when its context is configured and
// found in its kubeconfig (the cluster itself is the operator's).
func (existingProvider) Running(_ context.Context, m *Manager, n *Names) ([]string, error) {
	es, ok := m.Config.Existing[n.Slot]
	if !ok || es.Context == "" {
		return nil, nil
	}
	if _, err := restConfig(es.Kubeconfig, es.Context); err != nil {
		return nil, nil
	}
	return []string{"kube context " + es.Context}, nil
}
