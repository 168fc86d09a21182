package switchcmd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
	"github.com/kubectl-bundle/kubectl-bundle/internal/switchcmd"
)

func run(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	streams := kcli.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	code := switchcmd.Main(context.Background(), streams, append([]string{"kubectl-bundle-switch", "--state-dir", dir}, args...))
	return code, out.String(), errOut.String()
}

// soaking writes the switch record of slot b, switched to from a, soaking
// since started for window.
func soaking(t *testing.T, started time.Time, window time.Duration) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "state")
	d, err := state.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	// The commands printed find this state dir by themselves (no
	// KUBECTL_BUNDLE_STATE_DIR in them).
	t.Setenv(state.EnvStateDir, d.Path)
	rec := record.Switch{APIVersion: slot.RecordAPIVersion, Kind: "Switch", Phase: record.PhaseSwitched,
		Target: "b", Previous: "a", SoakStarted: started, SoakWindow: window.String(), Updated: started}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := state.WriteFile(d.Join("switch.json"), b); err != nil {
		t.Fatal(err)
	}
	return p
}

// Defect 11: while the soak lasts, accept --if-soaked exits 1 and says when
// it ends, so that "accept --if-soaked && retire the old slot" waits.
func TestAcceptIfSoakedFailsWhileSoaking(t *testing.T) {
	started := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	ends := started.Add(24 * time.Hour)
	dir := soaking(t, started, 24*time.Hour)

	code, stdout, stderr := run(t, dir, "accept", "--if-soaked")
	want := regexp.MustCompile(`^slot b is still soaking until ` + regexp.QuoteMeta(ends.Format(time.RFC3339)) + ` \(2[23]h\d+m\d+s left\); not accepted yet\n$`)
	if code != kcli.ExitNegative || !want.MatchString(stdout) || stderr != "" {
		t.Errorf("accept --if-soaked: exit %d, stdout %q, stderr %q; want exit 1 and %s", code, stdout, stderr, want)
	}

	code, stdout, _ = run(t, dir, "accept", "--if-soaked", "-o", "json")
	var res struct {
		Accepted bool      `json:"accepted"`
		Slot     string    `json:"slot"`
		Retire   string    `json:"retire"`
		LeftNs   int64     `json:"soakLeftNs"`
		SoakEnds time.Time `json:"soakEnds"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("accept --if-soaked -o json: %v in %q", err, stdout)
	}
	left := time.Duration(res.LeftNs)
	if code != kcli.ExitNegative || res.Accepted || res.Slot != "b" || res.Retire != "" || !res.SoakEnds.Equal(ends) ||
		left <= 22*time.Hour || left > 23*time.Hour {
		t.Errorf("accept --if-soaked -o json: exit %d, %+v; want exit 1, not accepted, the soak ending %s, about 23h left", code, res, ends)
	}

	if code, stdout, stderr := run(t, dir, "accept", "--if-soaked", "-q"); code != kcli.ExitNegative || stdout != "" || stderr != "" {
		t.Errorf("accept --if-soaked -q: exit %d, %q %q; want exit 1 and nothing printed", code, stdout, stderr)
	}
}

// Once the window has passed, accept --if-soaked accepts (exit 0) and names
// the command that retires the old slot.
func TestAcceptIfSoakedAcceptsAfterTheWindow(t *testing.T) {
	dir := soaking(t, time.Now().UTC().Add(-25*time.Hour), 24*time.Hour)
	code, stdout, stderr := run(t, dir, "accept", "--if-soaked")
	if code != 0 || stdout != "accepted slot b; retire the old slot with: kubectl bundle-slot destroy a\n" {
		t.Errorf("accept --if-soaked after the window: exit %d, %q, %q", code, stdout, stderr)
	}
	// Accepted already: a timer's next tick is a no-op that still exits 0.
	if code, _, stderr := run(t, dir, "accept", "--if-soaked", "-q"); code != 0 {
		t.Errorf("accept --if-soaked when accepted: exit %d: %s", code, stderr)
	}
}

// A plain accept (no transaction) of a slot switched to and then destroyed
// with --force refuses (exit 4) while slot a, the previous slot, still
// holds the previous deployment: accepting would end its protection, and
// the retire command accept prints would leave nothing. With no destroy in
// the history (a switch record written without slot records) it accepts
// as before.
func TestAcceptRefusesDestroyedTarget(t *testing.T) {
	dir := soaking(t, time.Now().UTC().Add(-time.Hour), 24*time.Hour)
	d, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := slot.Save(d, &slot.Record{APIVersion: slot.RecordAPIVersion, Kind: "Slot", Name: "a", Provider: "existing", Context: "airgap-mgmt-a", State: slot.StateReady}); err != nil {
		t.Fatal(err)
	}
	if err := journal.New(d).Record(journal.Event{Type: "slot", Slot: "b", Detail: "destroy", Status: journal.StatusDone}); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run(t, dir, "accept")
	if code != kcli.ExitConflict || stdout != "" ||
		!strings.Contains(stderr, "slot b, the slot switched to, is gone (the history says it was destroyed)") ||
		!strings.Contains(stderr, "Go back to it: kubectl bundle-switch to a") || strings.Contains(stderr, "destroy a") {
		t.Errorf("accept of a destroyed target: exit %d, stdout %q, stderr %q; want exit 4 naming the way back to a", code, stdout, stderr)
	}
	if sw, err := site.Read(d).Switch(); err != nil || sw.Phase != record.PhaseSwitched {
		t.Errorf("the refused accept changed the switch record: %+v, %v", sw, err)
	}

	// The destroy lost from the history (cut, then repaired): the target
	// has no record while the previous slot has one, still refused.
	dir = soaking(t, time.Now().UTC().Add(-time.Hour), 24*time.Hour)
	if d, err = state.Open(dir); err != nil {
		t.Fatal(err)
	}
	if err := slot.Save(d, &slot.Record{APIVersion: slot.RecordAPIVersion, Kind: "Slot", Name: "a", Provider: "existing", Context: "airgap-mgmt-a", State: slot.StateReady}); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = run(t, dir, "accept")
	if code != kcli.ExitConflict || stdout != "" || !strings.Contains(stderr, "slot b, the slot switched to, has no record") ||
		!strings.Contains(stderr, "kubectl bundle-slot repair b") || !strings.Contains(stderr, "kubectl bundle-switch to a") {
		t.Errorf("accept of a target with no record, no destroy in the history: exit %d, stdout %q, stderr %q; want exit 4", code, stdout, stderr)
	}

	// No slot records at all (and no destroy in the history): today's behaviour.
	dir = soaking(t, time.Now().UTC().Add(-time.Hour), 24*time.Hour)
	code, stdout, _ = run(t, dir, "accept")
	if code != 0 || !strings.Contains(stdout, "accepted slot b; retire the old slot with: kubectl bundle-slot destroy a") {
		t.Errorf("accept with no slot records: exit %d, %q; want exit 0 as before", code, stdout)
	}
}
