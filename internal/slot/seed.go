package slot

import (
	"context"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/seed"
)

// SeedTimeout bounds the push of one seeded artifact.
const SeedTimeout = 5 * time.Minute

// seedRegistry pushes the configured artifacts into the slot's registry,
// as stage-and-create-cluster.sh seeds krops-registry: the slot's
// workloads pull from their own registry, never from another slot's
// through the shared alias. Each artifact is skipped when the registry
// has its digest under its ref already, checked by digest after the push,
// and kept in the record and the history.
func (m *Manager) seedRegistry(ctx context.Context, rec *Record, n *Names) error {
	addr := m.registryHost(n.RegistryPort)
	for _, e := range m.Config.Seed {
		pctx, cancel := context.WithTimeout(ctx, SeedTimeout)
		res, err := seed.Push(pctx, addr, m.Config.Archives, e, seed.Options{PlainHTTP: true})
		cancel()
		if err != nil {
			return err
		}
		how := "present"
		if res.Pushed {
			how = "pushed"
		}
		m.logf("  seed %s %s (%s, %s)", res.Ref, res.Digest, res.Kind, how)
		rec.Seeded = upsertSeed(rec.Seeded, *res)
		if m.Journal != nil {
			if jerr := m.Journal.Record(journal.Event{Type: "slot", Slot: rec.Name, Detail: "seed " + res.Ref + "@" + res.Digest, Status: how}); jerr != nil {
				m.logf("warning: recording the seed of %s in the journal: %v", res.Ref, jerr)
			}
		}
		if err := Save(m.Dir, rec); err != nil {
			return err
		}
	}
	return nil
}

// upsertSeed keeps one result per ref: the newest.
func upsertSeed(rs []seed.Result, r seed.Result) []seed.Result {
	for i := range rs {
		if rs[i].Ref == r.Ref {
			rs[i] = r
			return rs
		}
	}
	return append(rs, r)
}
