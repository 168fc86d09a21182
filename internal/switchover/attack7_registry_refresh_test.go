package switchover

import (
	"context"
	"slices"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/fakes"
)

// TestAttack7KilledSwitchRerunRefreshesReconnectedRegistry (d46e675): a
// switch to b killed inside its 4th docker network call (slot a's registry
// reconnected without the alias, Docker gave it another address) before
// any registry Service was written; its re-run, as status names it, must
// write slot a's Service too. The re-run finds a's registry already
// without the alias, reconnects nothing, and writes b's alone: slot a's
// in-cluster registry name keeps the address a's registry no longer has.
// Same as e2e attack7_switch_killed_registry_service_stale, without API
// servers.
func TestAttack7KilledSwitchRerunRefreshesReconnectedRegistry(t *testing.T) {
	s, _ := newSite(t)
	ctx := context.Background()
	var wrote []string
	s.RegistryService = func(_ context.Context, name string) error {
		wrote = append(wrote, name)
		return nil
	}
	t.Setenv(fakes.EnvKill, "docker-network@4")
	if _, err := s.To(ctx, "b", false); err == nil {
		t.Fatal("to b with FAKE_KILL=docker-network@4: no error")
	}
	if len(wrote) != 0 {
		t.Fatalf("the killed run wrote Services %v; want none (killed before)", wrote)
	}
	t.Setenv(fakes.EnvKill, "")
	if _, err := s.To(ctx, "b", false); err != nil {
		t.Fatalf("re-running to b: %v", err)
	}
	if !slices.Contains(wrote, "a") {
		t.Errorf("after the re-run, the registry Services written: %v; want slot a's too (its registry was reconnected by the killed run)", wrote)
	}
}
