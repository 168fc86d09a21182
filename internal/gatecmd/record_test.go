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
	load := func() *slot.Record { t.Helper(); return mustLoad(t, d, "a") }

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
			err := record(d, "a", &slot.Record{Package: tc.started}, gateSource{}, rep)
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
	src := gateSource{File: "/site/gate.yaml", Digest: "sha256:" + strings.Repeat("9", 64)}
	if err := record(d, "a", &slot.Record{Package: v1}, src, rep); err != nil {
		t.Fatalf("record: %v", err)
	}
	if g := load().Gate; g == nil || !g.Passed || g.Package != v1.Digest || g.File != src.File || g.Digest != src.Digest {
		t.Errorf("recorded %+v, want a pass for %s by gate %+v", g, v1.Digest, src)
	}
}

// A deploy that starts, fails or finishes while the gate runs changes what
// the slot holds: the result is refused. A pass after a deploy that did
// not finish vouches for what the slot holds now and clears it; a failure
// leaves the slot not gated.
func TestRecordAndUnfinishedDeploys(t *testing.T) {
	d, err := state.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	v1 := &slot.PackageRef{Digest: strings.Repeat("1", 64), Deployed: at}
	started := &slot.DeployAttempt{Digest: strings.Repeat("2", 64), Started: at.Add(time.Minute)}
	failed := &slot.DeployAttempt{Digest: started.Digest, Started: started.Started, Failed: at.Add(2 * time.Minute), Error: "zarf failed"}
	save := func(a *slot.DeployAttempt) {
		t.Helper()
		if err := slot.Save(d, &slot.Record{Name: "a", Provider: "existing", Context: "a", Package: v1, Deploying: a}); err != nil {
			t.Fatal(err)
		}
	}
	load := func() *slot.Record { t.Helper(); return mustLoad(t, d, "a") }
	pass := &gate.Report{Gate: "marker", Passed: true, Finished: at.Add(3 * time.Minute)}
	fail := &gate.Report{Gate: "marker", Finished: at.Add(3 * time.Minute)}
	for _, tc := range []struct {
		name       string
		start, now *slot.DeployAttempt
	}{
		{"a deploy started", nil, started},
		{"the deploy failed", started, failed},
		{"another deploy started after a failed one", failed, &slot.DeployAttempt{Digest: started.Digest, Started: at.Add(4 * time.Minute)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			save(tc.now)
			err := record(d, "a", &slot.Record{Package: v1, Deploying: tc.start}, gateSource{}, pass)
			if kcli.ExitCode(err) != kcli.ExitConflict || !strings.Contains(err.Error(), "slot a changed under the gate: a deploy into it") {
				t.Fatalf("record: exit %d, %v; want exit 4 saying a deploy changed the slot", kcli.ExitCode(err), err)
			}
			if r := load(); r.Gate != nil || !r.Deploying.Equal(tc.now) {
				t.Errorf("the record changed: gate %+v, deploying %+v", r.Gate, r.Deploying)
			}
		})
	}
	save(failed)
	if err := record(d, "a", &slot.Record{Package: v1, Deploying: failed}, gateSource{}, fail); err != nil {
		t.Fatalf("record a failure: %v", err)
	}
	if r := load(); r.Gate == nil || r.Gate.Passed || r.Deploying == nil || r.Gated() {
		t.Errorf("after a failing gate: gate %+v, deploying %+v; want the failure recorded, the deploy kept, not gated", r.Gate, r.Deploying)
	}
	if err := record(d, "a", &slot.Record{Package: v1, Deploying: failed}, gateSource{}, pass); err != nil {
		t.Fatalf("record a pass: %v", err)
	}
	if r := load(); r.Deploying != nil || !r.Gated() {
		t.Errorf("after a passing gate: gate %+v, deploying %+v; want gated, the unfinished deploy cleared", r.Gate, r.Deploying)
	}
}

// mustLoad is slot name's record in d, failing the test when it cannot be read.
func mustLoad(t *testing.T, d *state.Dir, name string) *slot.Record {
	t.Helper()
	r, err := slot.Load(d, name)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
