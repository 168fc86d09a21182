package switchover

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/fakes"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// newSite is two ready slots, a and b, each with a registry container on
// the fake Docker's kind network, a context in the kubeconfig and a
// passing gate; a is active and holds both aliases.
func newSite(t *testing.T) (*Switcher, *fakes.Machine) {
	t.Helper()
	fm := fakes.Setup(t)
	root := t.TempDir()
	d, err := state.Open(filepath.Join(root, "state"))
	if err != nil {
		t.Fatal(err)
	}
	// The commands printed find this state dir by themselves (no
	// KUBECTL_BUNDLE_STATE_DIR in them).
	t.Setenv(state.EnvStateDir, d.Path)
	kubeconfig := filepath.Join(root, "kubeconfig")
	writeKubeconfig(t, kubeconfig, "kind-airgap-mgmt-a", "kind-airgap-mgmt-b")
	run := fakes.Runner{}
	for _, sl := range []string{"a", "b"} {
		reg := "krops-registry-airgap-" + sl
		if _, err := run.Run(context.Background(), "docker", "run", "-d", "--name", reg, "--network", "kind", "registry:2"); err != nil {
			t.Fatal(err)
		}
		rec := &slot.Record{Name: sl, Provider: "kind", Cluster: "airgap-mgmt-" + sl, Context: "kind-airgap-mgmt-" + sl,
			Registry: reg, State: slot.StateReady, Gate: &slot.GateResult{Gate: "default", Passed: true, Time: t0}}
		if err := slot.Save(d, rec); err != nil {
			t.Fatal(err)
		}
	}
	s := &Switcher{Dir: d, Run: run, AliasContext: "kind-airgap-mgmt", RegistryAlias: "krops-registry", Network: "kind",
		Kubeconfig: kubeconfig, SoakWindow: time.Hour, MaxGateAge: time.Hour, Now: func() time.Time { return t0 },
		GateBack: func(context.Context, string) error { return nil }}
	if _, err := s.To(context.Background(), "a", false); err != nil {
		t.Fatal(err)
	}
	return s, fm
}

// where reports the active pointer, the slot the alias context reaches,
// the slot whose registry holds the network alias, and whether every
// registry is still on the network.
func where(t *testing.T, s *Switcher, fm *fakes.Machine) (active, kube, registry string, allOnNetwork bool) {
	t.Helper()
	st, err := s.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ms, err := fm.State()
	if err != nil {
		t.Fatal(err)
	}
	allOnNetwork = true
	for _, sl := range []string{"a", "b"} {
		c := ms.Containers["krops-registry-airgap-"+sl]
		allOnNetwork = allOnNetwork && c != nil && c.Network == "kind"
		if c != nil && slices.Contains(c.Aliases, "krops-registry") && registry != "" {
			t.Errorf("two registries hold the alias")
		}
		if c != nil && slices.Contains(c.Aliases, "krops-registry") {
			registry = sl
		}
	}
	if st.RegistryHolder != registry {
		t.Errorf("status names %q as the alias holder, the machine %q", st.RegistryHolder, registry)
	}
	return st.Active, st.KubeconfigAlias, registry, allOnNetwork
}

func wantAt(t *testing.T, s *Switcher, fm *fakes.Machine, slotName string) {
	t.Helper()
	active, kube, reg, on := where(t, s, fm)
	if active != slotName || kube != slotName || reg != slotName || !on {
		t.Errorf("active %q, kube alias %q, registry alias %q, all registries on the network %v: want everything at %s", active, kube, reg, on, slotName)
	}
}

// TestToBackAccept: a switch moves the pointer and both aliases, back moves
// them home, and accept ends the soak naming the slot to retire.
func TestToBackAccept(t *testing.T) {
	s, fm := newSite(t)
	ctx := context.Background()
	wantAt(t, s, fm, "a")
	rec, err := s.To(ctx, "b", false)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Phase != record.PhaseSwitched || rec.Target != "b" || rec.Previous != "a" || !rec.SoakStarted.Equal(t0) || rec.SoakWindow != "1h0m0s" {
		t.Errorf("record after to: %+v", rec)
	}
	wantAt(t, s, fm, "b")

	rec, err = s.Back(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Phase != record.PhaseSwitchedBack || rec.Target != "a" || rec.Previous != "b" {
		t.Errorf("record after back: %+v", rec)
	}
	wantAt(t, s, fm, "a")

	if _, err := s.To(ctx, "b", false); err != nil {
		t.Fatal(err)
	}
	// Not soaked yet: accept --if-soaked waits and says how long.
	s.Now = func() time.Time { return t0.Add(20 * time.Minute) }
	res, err := s.Accept(context.Background(), true)
	if err != nil || res.Accepted || res.Left != 40*time.Minute || res.SoakEnds == nil || !res.SoakEnds.Equal(t0.Add(time.Hour)) || res.Retire != "" {
		t.Fatalf("accept --if-soaked within the window: %+v, %v", res, err)
	}
	s.Now = func() time.Time { return t0.Add(2 * time.Hour) }
	res, err = s.Accept(context.Background(), true)
	if err != nil || !res.Accepted || res.Slot != "b" || res.Retire != "kubectl bundle-slot destroy a" {
		t.Fatalf("accept after the window: %+v, %v", res, err)
	}
	if sw, _ := s.Load(); sw.Phase != record.PhaseAccepted {
		t.Errorf("phase after accept: %s", sw.Phase)
	}
	wantAt(t, s, fm, "b")
}

// TestRerunsAreNoOps: to the slot that is active, back after back and
// accept after accept change nothing and touch no network.
func TestRerunsAreNoOps(t *testing.T) {
	s, fm := newSite(t)
	ctx := context.Background()
	if _, err := s.To(ctx, "b", false); err != nil {
		t.Fatal(err)
	}
	if err := fm.ResetCalls(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.To(ctx, "b", false); err != nil {
		t.Fatal(err)
	}
	for _, c := range fm.Calls() {
		if strings.HasPrefix(c, "docker network") {
			t.Errorf("a second to b moved an alias: %s", c)
		}
	}
	wantAt(t, s, fm, "b")
	if _, err := s.Back(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := fm.ResetCalls(); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Back(ctx, false)
	if err != nil || rec.Phase != record.PhaseSwitchedBack || len(fm.Calls()) != 0 {
		t.Errorf("second back: %+v, %v, calls %q", rec, err, fm.Calls())
	}
	wantAt(t, s, fm, "a")
	if _, err := s.To(ctx, "b", false); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if res, err := s.Accept(context.Background(), false); err != nil || !res.Accepted {
			t.Fatalf("accept %d: %+v, %v", i+1, res, err)
		}
	}
}

// TestRepairAfterAFailedMove: a Docker failure mid-switch leaves the
// switch recorded as in progress, status says it is inconsistent and names
// the command, and re-running it completes the switch without a fresh gate.
func TestRepairAfterAFailedMove(t *testing.T) {
	s, fm := newSite(t)
	ctx := context.Background()
	t.Setenv(fakes.EnvFail, "docker-network")
	_, err := s.To(ctx, "b", false)
	if err == nil || !strings.Contains(err.Error(), "giving alias krops-registry to krops-registry-airgap-b") {
		t.Fatalf("to b with docker network failing: %v", err)
	}
	st, err := s.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Consistent || st.Phase != record.PhaseSwitching || st.Active != "b" || st.RegistryHolder != "a" || st.Next != "kubectl bundle-switch to b" {
		t.Errorf("status after the failure: %+v", st)
	}
	t.Setenv(fakes.EnvFail, "")
	// The gate is stale by now: a resumed switch does not ask again.
	s.Now = func() time.Time { return t0.Add(3 * time.Hour) }
	if _, err := s.To(ctx, "b", false); err != nil {
		t.Fatalf("re-running to b: %v", err)
	}
	wantAt(t, s, fm, "b")
	if st, _ := s.Status(ctx); !st.Consistent || st.Next != "" {
		t.Errorf("status after the repair: %+v", st)
	}
}

// TestRefusals: each refusal is typed for the cmd layer and moves nothing.
func TestRefusals(t *testing.T) {
	s, fm := newSite(t)
	ctx := context.Background()
	var gate *GateError
	var conflict *ConflictError

	// No switch yet besides the initial one: nothing to go back to.
	if _, err := s.Back(ctx, false); !errors.As(err, &conflict) {
		t.Errorf("back with no previous slot: %v", err)
	}

	b, _ := slot.Load(s.Dir, "b")
	b.Gate.Passed, b.Gate.Failed = false, []string{"pods"}
	if err := slot.Save(s.Dir, b); err != nil {
		t.Fatal(err)
	}
	if _, err := s.To(ctx, "b", false); !errors.As(err, &gate) || !strings.Contains(err.Error(), "last gate FAILED") {
		t.Errorf("to b with a failing gate: %v", err)
	}
	b.Gate.Passed, b.Gate.Failed = true, nil
	b.State = slot.StateFailed
	if err := slot.Save(s.Dir, b); err != nil {
		t.Fatal(err)
	}
	if _, err := s.To(ctx, "b", true); !errors.As(err, &conflict) || !strings.Contains(err.Error(), "not ready") {
		t.Errorf("to a failed slot, even forced: %v", err)
	}
	var nf *slot.NotFoundError
	if _, err := s.To(ctx, "c", true); !errors.As(err, &nf) {
		t.Errorf("to a slot with no record: %v", err)
	}
	wantAt(t, s, fm, "a")

	b.State = slot.StateReady
	if err := slot.Save(s.Dir, b); err != nil {
		t.Fatal(err)
	}
	// Accept after back: nothing is soaking.
	if _, err := s.To(ctx, "b", false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Back(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Accept(context.Background(), false); !errors.As(err, &conflict) || !strings.Contains(err.Error(), "nothing is soaking (switch phase SWITCHED_BACK)") {
		t.Errorf("accept after back: %v", err)
	}
	// Back after accept is a new switch, not a back.
	if _, err := s.To(ctx, "b", false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Accept(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Back(ctx, false); !errors.As(err, &conflict) || !strings.Contains(err.Error(), "was accepted") {
		t.Errorf("back after accept: %v", err)
	}
	wantAt(t, s, fm, "b")
}

// A switch back to the slot a blue-green transaction replaced is refused
// while it soaks (even forced): that is the transaction's revert, which
// its script owns; otherwise the transaction stays SOAKING on a slot no
// longer active and its accept would retire the slot that serves.
func TestToPreviousDuringABlueGreenSoakIsTheRevert(t *testing.T) {
	s, fm := newSite(t)
	ctx := context.Background()
	s.Journal = journal.New(s.Dir)
	if _, err := s.Journal.Begin(journal.BeginOptions{Strategy: journal.BlueGreen, Target: strings.Repeat("1", 64), Slots: journal.Slots{Active: "a", Candidate: "b"}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []journal.Phase{journal.Verified, journal.Provisioning, journal.Provisioned, journal.Healthy} {
		if _, err := s.Journal.Start(p); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Journal.Done(p); err != nil {
			t.Fatal(err)
		}
	}
	// The candidate holds the update (a switch to it confirms that).
	rec, err := slot.Load(s.Dir, "b")
	if err != nil {
		t.Fatal(err)
	}
	rec.Package = &slot.PackageRef{Digest: strings.Repeat("1", 64)}
	if err := slot.Save(s.Dir, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := s.To(ctx, "b", false); err != nil {
		t.Fatal(err)
	}
	for _, force := range []bool{false, true} {
		_, err := s.To(ctx, "a", force)
		if errkind.Of(err) != errkind.Conflict || !strings.Contains(err.Error(), "blue-green.sh revert") {
			t.Errorf("to a (force %v) while soaking on b: %v", force, err)
		}
	}
	wantAt(t, s, fm, "b")
	if tx, _ := s.Journal.Load(); tx == nil || tx.Phase != journal.Soaking {
		t.Fatalf("transaction: %+v", tx)
	}
	// The revert works: back to a, SWITCHED_BACK recorded.
	if _, err := s.Back(ctx, false); err != nil {
		t.Fatal(err)
	}
	wantAt(t, s, fm, "a")
	if tx, _ := s.Journal.Load(); tx == nil || tx.Phase != journal.SwitchedBack {
		t.Fatalf("after back: %+v", tx)
	}
}

// A step of the open transaction is running only while a live process
// holds the step lock: then every switch is refused, forced too. A step
// left started by a killed process is interrupted: a plain switch is
// refused naming the way on, and a forced one (the repair of a damaged
// pointer or switch record) proceeds.
func TestSwitchDuringAStartedStep(t *testing.T) {
	s, fm := newSite(t)
	ctx := context.Background()
	s.Journal = journal.New(s.Dir)
	tx, err := s.Journal.Begin(journal.BeginOptions{Strategy: journal.InPlace, Target: strings.Repeat("1", 64), Slots: journal.Slots{Active: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Journal.Start(journal.Verified); err != nil {
		t.Fatal(err)
	}
	var conflict *ConflictError

	// A live owner: refused, forced or not.
	l, err := s.Dir.LockStep(tx.ID + "/" + string(journal.Verified))
	if err != nil {
		t.Fatal(err)
	}
	for _, force := range []bool{false, true} {
		if _, err := s.To(ctx, "b", force); !errors.As(err, &conflict) || !strings.Contains(err.Error(), "runs now: switching now would race it") {
			t.Errorf("to b (force %v) while a live process runs VERIFIED: %v", force, err)
		}
	}
	wantAt(t, s, fm, "a")
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}

	// The owner is gone: the step is interrupted, not running.
	if _, err := s.To(ctx, "b", false); !errors.As(err, &conflict) || !strings.Contains(err.Error(), "interrupted in step VERIFIED (no process runs it)") {
		t.Errorf("to b after the owner died: %v", err)
	}
	wantAt(t, s, fm, "a")
	if err := state.WriteFile(s.Dir.Join(record.ActiveFile), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.To(ctx, "a", true); err != nil {
		t.Fatalf("the forced repair of the emptied pointer after the owner died: %v", err)
	}
	wantAt(t, s, fm, "a")
}

// TestBackGatesThePreviousSlot: back runs the gate against the slot it
// returns to before anything moves; a failing gate refuses (exit 3,
// naming --force and accept) with everything still at the candidate, and
// --force switches back without gating.
func TestBackGatesThePreviousSlot(t *testing.T) {
	s, fm := newSite(t)
	ctx := context.Background()
	if _, err := s.To(ctx, "b", false); err != nil {
		t.Fatal(err)
	}
	var gated []string
	s.GateBack = func(_ context.Context, sl string) error {
		gated = append(gated, sl)
		return errkind.New(errkind.Negative, "gate failed: healthy")
	}
	_, err := s.Back(ctx, false)
	var refused *BackGateError
	if !errors.As(err, &refused) || errkind.Of(err) != errkind.Environment {
		t.Fatalf("back with a failing gate: %v, want a BackGateError (environment)", err)
	}
	for _, want := range []string{"slot a, the previous slot, fails its gate", "slot b stays active", "kubectl bundle-switch back --force", "kubectl bundle-switch accept"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if !slices.Equal(gated, []string{"a"}) {
		t.Errorf("gated %v, want [a]", gated)
	}
	wantAt(t, s, fm, "b")
	if sw, _ := s.Load(); sw.Phase != record.PhaseSwitched || sw.Target != "b" {
		t.Errorf("switch record after the refusal: %+v", sw)
	}
	s.GateBack = nil // cannot gate: refuses too
	if _, err := s.Back(ctx, false); !errors.As(err, &refused) {
		t.Fatalf("back with no gate: %v", err)
	}
	wantAt(t, s, fm, "b")
	rec, err := s.Back(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Target != "a" || rec.Phase != record.PhaseSwitchedBack {
		t.Errorf("forced back: %+v", rec)
	}
	wantAt(t, s, fm, "a")
}

// The repair of a damaged pointer during a blue-green update that has not
// switched yet is the forced switch to the slot the update builds from
// (site.ActiveRepair names it): it re-points the aliases there and records
// no step of the update, which goes on from where it was. Before, the
// forced switch tried to record SWITCHED and was refused ("cannot start
// SWITCHED"), so the printed repair never ran.
func TestPointerRepairDuringABlueGreenUpdate(t *testing.T) {
	s, fm := newSite(t)
	ctx := context.Background()
	s.Journal = journal.New(s.Dir)
	if _, err := s.Journal.Begin(journal.BeginOptions{Strategy: journal.BlueGreen, Target: strings.Repeat("1", 64), Slots: journal.Slots{Active: "a", Candidate: "b"}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []journal.Phase{journal.Verified, journal.Provisioning} {
		if _, err := s.Journal.Start(p); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Journal.Done(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(s.Dir.Join("active"), []byte("a\nb\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.To(ctx, "a", false); err == nil {
		t.Fatal("a plain switch over a damaged pointer ran")
	}
	if _, err := s.To(ctx, "a", true); err != nil {
		t.Fatalf("the pointer's repair: %v", err)
	}
	wantAt(t, s, fm, "a")
	tx, err := s.Journal.Load()
	if err != nil || tx == nil || tx.Phase != journal.Provisioning || tx.Step(journal.Switched) != nil {
		t.Fatalf("the repair changed the update: %+v, %v", tx, err)
	}
	if st, err := s.Status(ctx); err != nil || st.Active != "a" || st.Previous != "" {
		t.Errorf("status after the repair: %+v, %v", st, err)
	}
}
