package plan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
	"github.com/kubectl-bundle/kubectl-bundle/internal/session"
	"github.com/kubectl-bundle/kubectl-bundle/internal/stage"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

const (
	v1 = "1111111111111111111111111111111111111111111111111111111111111111"
	v2 = "2222222222222222222222222222222222222222222222222222222222222222"
)

// site is a state dir with slot a active, holding v1, gated.
func newSite(t *testing.T) (*state.Dir, *journal.Journal) {
	t.Helper()
	d, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b"} {
		rec := &record.Slot{APIVersion: journal.APIVersion, Kind: "Slot", Name: n, Provider: "kind", Cluster: "airgap-mgmt-" + n, Context: "kind-airgap-mgmt-" + n, RegistryPort: 5900}
		if n == "a" {
			rec.Package = &record.PackageRef{Digest: v1}
			rec.OwnsWorkloads = []string{"airgap-wl"}
		}
		if err := record.SaveSlot(d, rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := record.WriteActive(d, "a"); err != nil {
		t.Fatal(err)
	}
	return d, journal.New(d)
}

func states(p *Plan) string {
	var s []string
	for _, st := range p.Steps {
		s = append(s, string(st.Phase)+"="+st.State)
	}
	for _, st := range p.OnFailure {
		s = append(s, "!"+string(st.Phase)+"="+st.State)
	}
	return strings.Join(s, " ")
}

func plan(t *testing.T, d *state.Dir, in Input) *Plan {
	t.Helper()
	s, err := session.Open(session.Options{StateDir: d.Path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return Make(s, in)
}

// TestResumesWhereTheTransactionStands: the plan of a re-run marks what
// the open transaction did, what was interrupted, and what runs next.
func TestResumesWhereTheTransactionStands(t *testing.T) {
	pkg := filepath.Join(t.TempDir(), "zarf-package-x-amd64-2.tar.zst")
	if err := os.WriteFile(pkg, []byte("v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		st    journal.Strategy
		op    string
		slots journal.Slots
		steps func(j *journal.Journal) error
		want  string
		code  bool
	}{
		{"in-place fresh", journal.InPlace, Apply, journal.Slots{}, nil,
			"VERIFIED=next DEPLOYING=pending HEALTHY=pending COMMITTED=pending !RESTORING=pending", false},
		{"in-place deploy interrupted", journal.InPlace, Apply, journal.Slots{Active: "a"}, func(j *journal.Journal) error {
			return seq(j, journal.Verified, journal.Deploying+"~")
		}, "VERIFIED=done DEPLOYING=interrupted HEALTHY=pending COMMITTED=pending !RESTORING=pending", false},
		{"recreate teardown failed", journal.Recreate, Apply, journal.Slots{Active: "a"}, func(j *journal.Journal) error {
			return seq(j, journal.Verified, journal.Teardown+"!")
		}, "VERIFIED=done TEARDOWN=failed BUILDING=pending HEALTHY=pending COMMITTED=pending !BUILDING_FALLBACK=pending", false},
		{"blue-green revert after the switch back", journal.BlueGreen, Revert, journal.Slots{Active: "a", Candidate: "b"}, func(j *journal.Journal) error {
			return seq(j, journal.Verified, journal.Provisioning, journal.Provisioned, journal.Healthy, journal.Switched, journal.SwitchedBack)
		}, "=done SWITCHED_BACK=done =next DESTROYING=pending ROLLED_BACK=pending", false},
		{"blue-green accept while soaking", journal.BlueGreen, Accept, journal.Slots{Active: "a", Candidate: "b"}, func(j *journal.Journal) error {
			return seq(j, journal.Verified, journal.Provisioning, journal.Provisioned, journal.Healthy, journal.Switched, journal.Soaking+"~")
		}, "ACCEPTED=next RETIRED=pending", false},
		{"in-place while blue-green is open", journal.InPlace, Apply, journal.Slots{Active: "a", Candidate: "b"}, func(j *journal.Journal) error {
			return seq(j, journal.Verified)
		}, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, j := newSite(t)
			if c.steps != nil {
				st := c.st
				if c.code {
					st = journal.BlueGreen
				}
				if _, err := j.Begin(journal.BeginOptions{Strategy: st, Target: v2, Package: pkg, Fallback: v1, Slots: c.slots}); err != nil {
					t.Fatal(err)
				}
				if err := c.steps(j); err != nil {
					t.Fatal(err)
				}
			}
			p := plan(t, d, Input{Strategy: c.st, Op: c.op, Package: pkg, Slots: []string{"a", "b"}})
			if c.code {
				if p.Err() == nil || !strings.Contains(p.Refused, "(blue-green) is open") {
					t.Fatalf("want a refusal naming the open blue-green transaction, got %q", p.Refused)
				}
				return
			}
			if p.Err() != nil && c.st != journal.InPlace && c.st != journal.Recreate {
				t.Fatalf("refused: %v", p.Err())
			}
			if got := states(p); got != c.want {
				t.Fatalf("states\ngot  %s\nwant %s", got, c.want)
			}
		})
	}
}

// TestLosesWhatTheRecordHolds: a step that discards a slot names what its
// record says it holds, workload clusters included.
func TestLosesWhatTheRecordHolds(t *testing.T) {
	d, _ := newSite(t)
	pkg := filepath.Join(t.TempDir(), "p.tar.zst")
	if err := os.WriteFile(pkg, []byte("v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := plan(t, d, Input{Strategy: journal.Recreate, Op: Apply, Package: pkg})
	var teardown *Step
	for i := range p.Steps {
		if p.Steps[i].Phase == journal.Teardown {
			teardown = &p.Steps[i]
		}
	}
	if teardown == nil || teardown.Slot != "a" {
		t.Fatalf("no teardown of slot a: %+v", p.Steps)
	}
	got := strings.Join(teardown.Loses, "\n")
	for _, w := range []string{"kind cluster airgap-mgmt-a", "registry (127.0.0.1:5900)", "workload cluster airgap-wl"} {
		if !strings.Contains(got, w) {
			t.Errorf("loses does not name %q:\n%s", w, got)
		}
	}
}

// TestSamePackageUnderAnotherPath: a copy of the open transaction's
// package under another path is that update (the scripts resume it); a
// different package is refused.
func TestSamePackageUnderAnotherPath(t *testing.T) {
	dir := t.TempDir()
	pkg, cp, other := filepath.Join(dir, "p.tar.zst"), filepath.Join(dir, "copy.tar.zst"), filepath.Join(dir, "other.tar.zst")
	for f, b := range map[string]string{pkg: "v2", cp: "v2", other: "v3"} {
		if err := os.WriteFile(f, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ref, err := stage.Identify(pkg)
	if err != nil {
		t.Fatal(err)
	}
	d, j := newSite(t)
	if _, err := j.Begin(journal.BeginOptions{Strategy: journal.BlueGreen, Target: ref.Digest, Package: pkg, Fallback: v1, Slots: journal.Slots{Active: "a", Candidate: "b"}}); err != nil {
		t.Fatal(err)
	}
	if p := plan(t, d, Input{Strategy: journal.BlueGreen, Op: Apply, Package: cp, Slots: []string{"a", "b"}}); p.Err() != nil {
		t.Fatalf("a copy of the package was refused: %v", p.Err())
	}
	if p := plan(t, d, Input{Strategy: journal.BlueGreen, Op: Apply, Package: other, Slots: []string{"a", "b"}}); p.Err() == nil || !strings.Contains(p.Refused, "is open for") {
		t.Fatalf("another package was not refused: %q", p.Refused)
	}
}

// seq records the phases done in order; "~" marks one started only, "!"
// one failed.
func seq(j *journal.Journal, phases ...journal.Phase) error {
	for _, p := range phases {
		s := string(p)
		switch {
		case strings.HasSuffix(s, "~"):
			_, err := j.Start(journal.Phase(strings.TrimSuffix(s, "~")))
			return err
		case strings.HasSuffix(s, "!"):
			ph := journal.Phase(strings.TrimSuffix(s, "!"))
			if _, err := j.Start(ph); err != nil {
				return err
			}
			_, err := j.Fail(ph, "test")
			return err
		}
		if _, err := j.Start(p); err != nil {
			return err
		}
		if _, err := j.Done(p); err != nil {
			return err
		}
	}
	return nil
}
