package gatecmd

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/gate"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// A pass is recorded for the package deployed when the gate started, and
// refused when the slot changed while the gate ran (defect 10).
func TestRecordRefusesASlotChangedUnderTheGate(t *testing.T) {
	d, err := state.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	deployed := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.UTC)
	v1 := &slot.PackageRef{Digest: strings.Repeat("1", 64), Name: "demo", Deployed: deployed}
	v2 := &slot.PackageRef{Digest: strings.Repeat("2", 64), Name: "demo", Deployed: deployed.Add(time.Minute)}
	redeployed := &slot.PackageRef{Digest: v1.Digest, Name: "demo", Deployed: deployed.Add(time.Minute)}
	rep := &gate.Report{Gate: "marker", Passed: true, Finished: deployed.Add(2 * time.Minute)}
	save := func(p *slot.PackageRef) {
		t.Helper()
		if err := slot.Save(d, &slot.Record{Name: "a", Provider: "existing", Context: "a", Package: p}); err != nil {
			t.Fatal(err)
		}
	}
	load := func() *slot.Record {
		t.Helper()
		r, err := slot.Load(d, "a")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	for _, tc := range []struct {
		name         string
		started, now *slot.PackageRef
		wantStarted  string
		wantNow      string
	}{
		{"another package deployed", v1, v2, "package 111111111111 (deployed 2026-12-01T10:00:00Z)", "package 222222222222"},
		{"the same package deployed again", v1, redeployed, "package 111111111111 (deployed 2026-12-01T10:00:00Z)", "package 111111111111 (deployed 2026-12-01T10:01:00Z)"},
		{"a package deployed into an empty slot", nil, v1, "no package", "package 111111111111"},
		{"the slot rebuilt empty", v1, nil, "package 111111111111", "no package"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			save(tc.now)
			err := record(d, "a", tc.started, rep)
			if kcli.ExitCode(err) != kcli.ExitConflict || err == nil ||
				!strings.Contains(err.Error(), "slot a changed under the gate: "+tc.wantStarted) ||
				!strings.Contains(err.Error(), tc.wantNow+" ") || !strings.Contains(err.Error(), "the result is not recorded") {
				t.Fatalf("record: exit %d, %v; want exit 4 saying the slot changed under the gate", kcli.ExitCode(err), err)
			}
			if g := load().Gate; g != nil {
				t.Errorf("a gate result was recorded: %+v", g)
			}
		})
	}

	// Unchanged (the record read back from disk): the pass is recorded
	// for that package.
	save(v1)
	if err := record(d, "a", v1, rep); err != nil {
		t.Fatalf("record: %v", err)
	}
	if g := load().Gate; g == nil || !g.Passed || g.Package != v1.Digest {
		t.Errorf("recorded %+v, want a pass for %s", g, v1.Digest)
	}
}
