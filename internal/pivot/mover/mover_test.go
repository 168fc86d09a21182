package mover

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/pivot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/pivot/pivottest"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// envHelper makes the test binary run one pivot (pivot.Options as JSON) and
// exit: the kill tests' process, which a crash point kills.
const envHelper = "KUBECTL_BUNDLE_TEST_PIVOT"

func TestMain(m *testing.M) {
	pivot.RequestTimeout = 2 * time.Minute // envtest on a loaded machine, not a site
	if spec := os.Getenv(envHelper); spec != "" {
		var o pivot.Options
		if err := json.Unmarshal([]byte(spec), &o); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(cli.ExitUsage)
		}
		o.Log = os.Stdout
		o.Event = func(phase, status, detail string) { fmt.Printf("event %s %s %s\n", phase, status, detail) }
		if _, err := Run(context.Background(), o); err != nil {
			fmt.Println("error:", err)
			os.Exit(cli.ExitNegative)
		}
		os.Exit(cli.ExitOK)
	}
	os.Exit(m.Run())
}

const ns = "airgap-workloads"

func ep(s *pivottest.Site) pivot.Endpoint {
	return pivot.Endpoint{Slot: s.Slot, Kubeconfig: s.Kubeconfig, Context: s.Context}
}

func TestPivotMovesAndReverts(t *testing.T) {
	a, b := pivottest.StartSite(t, "a", nil), pivottest.StartSite(t, "b", nil)
	a.Graph(t, ns, "airgap-wl")
	rec := filepath.Join(t.TempDir(), pivot.File)
	var log bytes.Buffer
	var events []string
	opts := pivot.Options{From: ep(a), To: ep(b), RecordPath: rec, Log: &log,
		Event: func(p, s, _ string) { events = append(events, p+" "+s) }}
	res, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatalf("pivot a -> b: %v\n%s", err, log.String())
	}
	pivottest.RequireWhole(t, b, a, ns)
	if !res.Plan.Revertible || res.Moved < 18 {
		t.Errorf("result %+v, want revertible and at least 18 objects moved", res)
	}
	if !strings.Contains(log.String(), "1 Cluster") || !strings.Contains(log.String(), "revertible: slot a serves") {
		t.Errorf("the plan is not said before the move:\n%s", log.String())
	}
	r, err := pivot.LoadRecord(rec)
	if err != nil || r.Phase != pivot.PhaseDone || len(r.Clusters) != 1 {
		t.Fatalf("record after the pivot: %+v, %v; want DONE with the one paused Cluster", r, err)
	}
	want := []string{"PAUSING started", "PAUSING done", "COPYING started", "COPYING done", "DELETING started", "DELETING done", "UNPAUSING started", "UNPAUSING done"}
	if strings.Join(events, ",") != strings.Join(want, ",") {
		t.Errorf("events %v, want %v", events, want)
	}

	// The revert during the soak: the same pivot the other way, once
	// slot b's providers rebuilt the status.
	b.Provisioned(t, ns)
	opts.From, opts.To = ep(b), ep(a)
	if _, err := Run(context.Background(), opts); err != nil {
		t.Fatalf("pivot b -> a: %v\n%s", err, log.String())
	}
	pivottest.RequireWhole(t, a, b, ns)
}

// dropVersion makes a CRD of kind serve only v1beta1 (stored there): a
// provider of an older release.
func dropVersion(kind string) func(*apiextensionsv1.CustomResourceDefinition) {
	return func(crd *apiextensionsv1.CustomResourceDefinition) {
		if crd.Spec.Names.Kind != kind {
			return
		}
		var keep []apiextensionsv1.CustomResourceDefinitionVersion
		for _, v := range crd.Spec.Versions {
			if v.Name == "v1beta1" {
				v.Storage = true
				keep = append(keep, v)
			}
		}
		crd.Spec.Versions = keep
	}
}

func TestPivotRefusesUnservedVersionBeforeAnythingMoves(t *testing.T) {
	a, b := pivottest.StartSite(t, "a", nil), pivottest.StartSite(t, "b", dropVersion("DockerMachine"))
	a.Graph(t, ns, "airgap-wl")
	rec := filepath.Join(t.TempDir(), pivot.File)
	_, err := Run(context.Background(), pivot.Options{From: ep(a), To: ep(b), RecordPath: rec, Yes: true})
	var ue *pivot.UnservedError
	if !errors.As(err, &ue) || errkind.Of(err) != errkind.Environment {
		t.Fatalf("err = %v, want an UnservedError (exit 3)", err)
	}
	missing := schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2", Kind: "DockerMachine"}
	if len(ue.Plan.MissingOnTarget) != 1 || ue.Plan.MissingOnTarget[0] != missing {
		t.Errorf("missing on target %v, want only %v", ue.Plan.MissingOnTarget, missing)
	}
	if !strings.Contains(err.Error(), "infrastructure.cluster.x-k8s.io/v1beta2, Kind=DockerMachine") || !strings.Contains(err.Error(), "nothing was moved") {
		t.Errorf("the refusal does not name the group/version/kind: %v", err)
	}
	// b does not serve DockerMachine at all: count what it does serve.
	for kind, want := range pivottest.GraphKinds {
		if n := len(a.Objects(t, ns, kind)); n != want {
			t.Errorf("slot a has %d %s after the refusal, want %d", n, kind, want)
		}
	}
	if n := len(b.Objects(t, ns, "Cluster")) + len(b.Objects(t, ns, "Machine")); n != 0 {
		t.Errorf("slot b has %d Clusters and Machines after the refusal, want none", n)
	}
	if _, err := os.Stat(rec); !os.IsNotExist(err) {
		t.Errorf("a refused pivot wrote its record: %v", err)
	}
}

// addStorageVersion gives kind's CRD a newer storage version v1beta3 (a
// copy of v1beta2): a provider of a later release, whose objects an older
// one cannot read back.
func addStorageVersion(kind string) func(*apiextensionsv1.CustomResourceDefinition) {
	return func(crd *apiextensionsv1.CustomResourceDefinition) {
		if crd.Spec.Names.Kind != kind {
			return
		}
		for i := range crd.Spec.Versions {
			if crd.Spec.Versions[i].Name == "v1beta2" {
				v := *crd.Spec.Versions[i].DeepCopy()
				crd.Spec.Versions[i].Storage = false
				v.Name = "v1beta3"
				crd.Spec.Versions = append(crd.Spec.Versions, v)
				return
			}
		}
	}
}

func TestPivotNotRevertibleNeedsYes(t *testing.T) {
	a, b := pivottest.StartSite(t, "a", nil), pivottest.StartSite(t, "b", addStorageVersion("DockerCluster"))
	a.Graph(t, ns, "airgap-wl")
	rec := filepath.Join(t.TempDir(), pivot.File)
	opts := pivot.Options{From: ep(a), To: ep(b), RecordPath: rec}
	_, err := Run(context.Background(), opts)
	var nr *pivot.NotRevertibleError
	if !errors.As(err, &nr) || errkind.Of(err) != errkind.Usage || !strings.Contains(err.Error(), "--yes") ||
		!strings.Contains(err.Error(), "infrastructure.cluster.x-k8s.io/v1beta3, Kind=DockerCluster") {
		t.Fatalf("err = %v, want a NotRevertibleError (exit 2) naming v1beta3 DockerCluster and --yes", err)
	}
	pivottest.RequireWhole(t, a, b, ns)
	opts.Yes = true
	res, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Plan.Revertible {
		t.Errorf("plan says revertible: %+v", res.Plan)
	}
	pivottest.RequireWhole(t, b, a, ns)
}

// TestPivotKilled kills the pivot's process at each phase boundary and
// inside each phase, then re-runs it until it converges: every object is
// then on exactly one side, unpaused, and the re-run said whether it
// resumed or undid the move.
func TestPivotKilled(t *testing.T) {
	a, b := pivottest.StartSite(t, "a", nil), pivottest.StartSite(t, "b", nil)
	a.Graph(t, ns, "airgap-wl")
	rec := filepath.Join(t.TempDir(), pivot.File)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	run := func(from, to *pivottest.Site, crashAt string) (string, int) {
		spec, _ := json.Marshal(pivot.Options{From: ep(from), To: ep(to), RecordPath: rec})
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), envHelper+"="+string(spec), state.EnvCrashAt+"="+crashAt)
		out, _ := cmd.CombinedOutput()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return string(out), -int(ws.Signal())
		}
		return string(out), cmd.ProcessState.ExitCode()
	}
	const undone, resumed = "before any object left slot", "resumed the pivot"
	from, to := a, b
	for _, c := range []struct{ at, recovered string }{
		{"pivot:pause:1", undone},
		{"pivot:copy:1", undone},
		{"pivot:copy:9", undone},
		{"pivot:copy:18", undone},
		{"pivot:delete:1", resumed},
		{"pivot:delete:10", resumed},
		{"pivot:unpause", resumed},
		{"pivot:before-done", resumed},
	} {
		out, code := run(from, to, c.at)
		if code != -int(syscall.SIGKILL) {
			t.Fatalf("%s: the pivot %s -> %s was not killed there (exit %d):\n%s", c.at, from.Slot, to.Slot, code, out)
		}
		out, code = run(from, to, "")
		if code != 0 {
			t.Fatalf("%s: the re-run failed (exit %d):\n%s", c.at, code, out)
		}
		if !strings.Contains(out, c.recovered) {
			t.Errorf("%s: the re-run does not say %q:\n%s", c.at, c.recovered, out)
		}
		pivottest.RequireWhole(t, to, from, ns)
		to.Provisioned(t, ns)
		if t.Failed() {
			t.Fatalf("after the kill at %s and the re-run:\n%s", c.at, out)
		}
		from, to = to, from // the next kill interrupts the way back
	}
}
