package site_test

import (
	"errors"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// pkg is the digest the slots of these tests hold.
const pkg = "1111111111111111111111111111111111111111111111111111111111111111"

// openFound opens a new state dir that the commands find by themselves
// (TestRepairNamesTheStateDir): the repairs name no state dir.
func openFound(t *testing.T) *state.Dir {
	t.Helper()
	d, err := state.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(state.EnvStateDir, d.Path)
	return d
}

// The alias repairs switch status prints (a pointer, or an unfinished
// switch, naming a slot with no record) force a switch, which skips the
// gate: they name the preferred slot (the one the pointer or the switch
// record says serves) only when it passed its gate for what it holds,
// else another that did, and with none gated they gate one first; never
// a forced switch to a slot that never passed its gate.
func TestActiveRepairNamesOnlyAGatedSlot(t *testing.T) {
	d := openFound(t)
	empty := func(name string) {
		t.Helper()
		if err := slot.Save(d, &slot.Record{Name: name, Provider: slot.ProviderExisting, Context: name, State: slot.StateReady}); err != nil {
			t.Fatal(err)
		}
	}
	// Empty slots vouch for nothing and cannot be gated: the switch only
	// makes the pointer readable again.
	empty("a")
	empty("b")
	if got := site.Read(d).ActiveRepair("b", "a").String(); got != "kubectl bundle-switch to b --force" {
		t.Errorf("empty slots: %q", got)
	}
	save := func(name string, gate *slot.GateResult) {
		t.Helper()
		r := &slot.Record{Name: name, Provider: slot.ProviderExisting, Context: name, State: slot.StateReady,
			Package: &slot.PackageRef{Digest: pkg, Deployed: time.Now()}, Gate: gate}
		if err := slot.Save(d, r); err != nil {
			t.Fatal(err)
		}
	}
	passed := &slot.GateResult{Gate: "default", Passed: true, Time: time.Now(), Package: pkg}
	save("a", nil)
	save("b", nil)
	got := site.Read(d).ActiveRepair("b", "a").String()
	if !strings.HasPrefix(got, "kubectl bundle-gate --slot b && kubectl bundle-switch to b --force   # ") {
		t.Errorf("no slot gated: %q, want slot b gated first, then the switch", got)
	}
	save("a", passed)
	if got := site.Read(d).ActiveRepair("b", "a").String(); got != "kubectl bundle-switch to a --force" {
		t.Errorf("b ungated, a gated: %q, want the switch to a", got)
	}
	if got := site.Read(d).ActiveRepair().String(); got != "kubectl bundle-switch to a --force" {
		t.Errorf("no preference: %q, want the gated a", got)
	}
	// A pass for another package than the one the slot holds is no pass.
	save("b", &slot.GateResult{Gate: "default", Passed: true, Time: time.Now(), Package: strings.Repeat("2", 64)})
	if got := site.Read(d).ActiveRepair("b").String(); got != "kubectl bundle-switch to a --force" {
		t.Errorf("b gated for another package: %q, want the switch to a", got)
	}
	save("b", passed)
	if got := site.Read(d).ActiveRepair("b", "a").String(); got != "kubectl bundle-switch to b --force" {
		t.Errorf("both gated, b preferred: %q", got)
	}
	// A failed gate is no pass either.
	save("b", &slot.GateResult{Gate: "default", Passed: false, Time: time.Now(), Package: pkg})
	if got := site.Read(d).ActiveRepair("b").String(); got != "kubectl bundle-switch to a --force" {
		t.Errorf("b failed its gate: %q, want the switch to a", got)
	}
	// Nor is a pass followed by a deploy that did not finish (failed or
	// killed): what the slot holds is not known.
	save("b", passed)
	r, err := slot.Load(d, "a")
	if err != nil {
		t.Fatal(err)
	}
	r.Deploying = &slot.DeployAttempt{Digest: strings.Repeat("3", 64), Started: time.Now()}
	if err := slot.Save(d, r); err != nil {
		t.Fatal(err)
	}
	if got := site.Read(d).ActiveRepair("a").String(); got != "kubectl bundle-switch to b --force" {
		t.Errorf("a's deploy did not finish: %q, want the switch to b", got)
	}
	save("b", nil)
	if got := site.Read(d).ActiveRepair("a").String(); !strings.HasPrefix(got, "kubectl bundle-gate --slot a && kubectl bundle-switch to a --force   # ") {
		t.Errorf("a's deploy did not finish, b not gated: %q, want slot a gated first", got)
	}
}

// TestRepairNamesTheStateDir (issue 32, class 4): a repair, pasted in
// another directory, acts on the state dir that printed it: when the state
// dir was named relatively (or by --state-dir), every command of the
// repair names it by its absolute path; a path in it is absolute too.
func TestRepairNamesTheStateDir(t *testing.T) {
	root := t.TempDir()
	t.Chdir(root)
	t.Setenv(state.EnvStateDir, "state")
	d, err := state.Open("state")
	if err != nil {
		t.Fatal(err)
	}
	env := state.EnvStateDir + "=" + filepath.Join(root, "state")
	// No slot: the pointer is removed, by its absolute path.
	if err := os.WriteFile(d.Join("active"), []byte("a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := site.Read(d).ActiveRepair().String(), "rm "+filepath.Join(root, "state", "active")+"   # no slot exists: no slot is active"; got != want {
		t.Errorf("no slot: %q, want %q", got, want)
	}
	if err := slot.Save(d, &slot.Record{Name: "a", Provider: slot.ProviderExisting, Context: "a", State: slot.StateReady}); err != nil {
		t.Fatal(err)
	}
	if got, want := site.Read(d).ActiveRepair().String(), env+" kubectl bundle-switch to a --force"; got != want {
		t.Errorf("slot a: %q, want %q", got, want)
	}
	// A damaged record's repair, and the journal's.
	if err := os.WriteFile(d.Join("slots", "a.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = slot.Load(d, "a")
	if err == nil || !strings.Contains(err.Error(), ": "+env+" kubectl bundle-slot destroy a --force") {
		t.Errorf("damaged record: %v, want its repair to name %s", err, env)
	}
	if err := os.MkdirAll(d.Join("journal", "run.lock"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := d.RunConflict(); err == nil || !strings.Contains(err.Error(), "; repair: "+env+" kubectl bundle-journal repair   # ") {
		t.Errorf("damaged run lock: %v, want its repair to name %s", err, env)
	}
	hist := d.Join("journal", "history.jsonl")
	if err := os.WriteFile(hist, []byte("garbage\ngarbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := journal.ReadHistory(hist); err == nil || !strings.Contains(err.Error(), ": "+env+" kubectl bundle-journal repair   # ") {
		t.Errorf("damaged history: %v, want its repair to name %s", err, env)
	}
	// With the state dir found by itself, a repair is the bare command.
	t.Setenv(state.EnvStateDir, d.Path)
	if got := site.Read(d).ActiveRepair().String(); got != "kubectl bundle-slot repair a" && !strings.HasPrefix(got, "kubectl bundle-") && !strings.HasPrefix(got, "rm ") {
		t.Errorf("absolute state dir: %q names the state dir", got)
	}
}

// The pointer's repair never names a slot a switch refuses: a slot that
// is not ready (a create that failed, a destroy killed half way) is
// skipped, and with no ready slot the pointer goes (no slot is active).
// A slot whose record is damaged has its record rebuilt first: removing
// the pointer then would lose which slot serves.
func TestActiveRepairSkipsUnreadySlotsAndRepairsRecordsFirst(t *testing.T) {
	d := openFound(t)
	save := func(name, st string) { t.Helper(); saveGated(t, d, name, st) }
	save("a", slot.StateDestroying)
	save("b", slot.StateReady)
	for what, got := range map[string]string{
		"ActiveRepair(a)": site.Read(d).ActiveRepair("a").String(),
		"ActiveFix":       site.Read(d).ActiveFix().String(),
	} {
		if got != "kubectl bundle-switch to b --force" {
			t.Errorf("a destroying, b ready and gated: %s = %q, want the switch to b", what, got)
		}
	}
	save("b", slot.StateFailed)
	rm := "rm " + d.Join("active") + "   # no slot is ready (slot a is destroying, slot b is failed): no slot is active"
	for what, got := range map[string]string{
		"ActiveRepair(a)": site.Read(d).ActiveRepair("a").String(),
		"ActiveFix":       site.Read(d).ActiveFix().String(),
	} {
		if got != rm {
			t.Errorf("no slot ready: %s = %q, want %q", what, got, rm)
		}
	}
	// A damaged record: its repair, not the pointer's removal.
	if err := os.WriteFile(d.Join("slots", "b.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	for what, got := range map[string]string{
		"ActiveRepair(a)": site.Read(d).ActiveRepair("a").String(),
		"ActiveFix":       site.Read(d).ActiveFix().String(),
	} {
		if !strings.HasPrefix(got, "kubectl bundle-slot repair b   # ") {
			t.Errorf("b's record damaged: %s = %q, want slot b's record repaired first", what, got)
		}
	}
}

// A damaged switch record's repair never names a forced switch to an
// active slot that is not ready (found by TestModel: a recreate's create
// failed, then switch.json was damaged). While the recreate rebuilds the
// slot, the damaged record is removed and the recreate goes on; else the
// pointer goes to a slot that can serve.
func TestSwitchRepairSkipsAnActiveSlotThatIsNotReady(t *testing.T) {
	d := openFound(t)
	save := func(name, st string) { t.Helper(); saveGated(t, d, name, st) }
	fix := func() string {
		t.Helper()
		_, err := site.Read(d).Switch()
		var dmg *state.DamageError
		if !errors.As(err, &dmg) {
			t.Fatalf("Switch() = %v, want damage", err)
		}
		return dmg.Fix.String()
	}
	save("a", slot.StateFailed)
	save("b", slot.StateReady)
	if err := os.WriteFile(d.Join("active"), []byte("a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.Join("switch.json"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := fix(), "kubectl bundle-switch to b --force   # slot a is failed, not ready: makes a slot that can serve active and writes the switch record anew"; got != want {
		t.Errorf("a failed, b ready: the repair is %q, want %q", got, want)
	}
	save("b", slot.StateFailed)
	if got, want := fix(), "rm "+d.Join("switch.json")+"   # slot a is failed and no other slot can serve: there is no switch to keep"; got != want {
		t.Errorf("no slot ready: the repair is %q, want %q", got, want)
	}
	save("b", slot.StateReady)
	if _, err := journal.New(d).Begin(journal.BeginOptions{Strategy: journal.Recreate, Target: pkg, Slots: journal.Slots{Active: "a"}}); err != nil {
		t.Fatal(err)
	}
	if got, want := fix(), "rm "+d.Join("switch.json")+"   # slot a is being rebuilt by a recreate: there is no switch to keep"; got != want {
		t.Errorf("a recreate rebuilds a: the repair is %q, want %q", got, want)
	}
}

// saveGated saves slot NAME's record in state ST on an existing cluster,
// holding pkg with a passed gate.
func saveGated(t *testing.T, d *state.Dir, name, st string) {
	t.Helper()
	r := &slot.Record{Name: name, Provider: slot.ProviderExisting, Context: name, State: st,
		Package: &slot.PackageRef{Digest: pkg, Deployed: time.Now()},
		Gate:    &slot.GateResult{Gate: "default", Passed: true, Time: time.Now(), Package: pkg}}
	if err := slot.Save(d, r); err != nil {
		t.Fatal(err)
	}
}
