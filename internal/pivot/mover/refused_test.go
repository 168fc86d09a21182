package mover

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/pivot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/pivot/pivottest"
)

// TestPivotRefusedMidMove makes the mover fail partway, not killed: the
// target refuses a create in COPYING, then (on the way back) the source
// refuses a delete in DELETING. A failure in COPYING is undone at once:
// no object left the source, whose clusters are unpaused again, and the
// target keeps no partial copy, so the failure leaves the source managing
// the workload clusters whatever the operator does next. A failure in
// DELETING can only go forward (the target holds every object): the
// re-run says what must change and, once the source takes the deletes,
// finishes the move. Every object then is on exactly one side, unpaused.
func TestPivotRefusedMidMove(t *testing.T) {
	a, b := pivottest.StartSite(t, "a", nil), pivottest.StartSite(t, "b", nil)
	a.Graph(t, ns, "airgap-wl")
	rec := filepath.Join(t.TempDir(), pivot.File)
	var log bytes.Buffer
	opts := pivot.Options{From: ep(a), To: ep(b), RecordPath: rec, Log: &log}
	ctx := context.Background()

	lift := b.Refuse(t, "machines", admissionv1.Create)
	_, err := Run(ctx, opts)
	var ue *pivot.UndoneError
	if !errors.As(err, &ue) || errkind.Of(err) != errkind.Environment {
		t.Fatalf("pivot a -> b with b refusing Machines: %v, want an pivot.UndoneError (exit 3)\n%s", err, log.String())
	}
	for _, want := range []string{"failed in COPYING", "slot b refuses CREATE of machines", "The pivot was undone: no object left slot a, which still manages the workload clusters (1 unpaused)",
		"once slot b takes the objects, re-run the same command"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the failure does not say %q:\n%v", want, err)
		}
	}
	if r, err := pivot.LoadRecord(rec); err != nil || r.Interrupted() {
		t.Errorf("record after the undone pivot: %+v, %v; want it finished (DONE)", r, err)
	}
	pivottest.RequireWhole(t, a, b, ns) // a unpaused, b without a partial copy
	if t.Failed() {
		t.FailNow()
	}
	lift()
	log.Reset()
	if _, err := Run(ctx, opts); err != nil {
		t.Fatalf("the re-run once b takes Machines: %v\n%s", err, log.String())
	}
	if strings.Contains(log.String(), "interrupted") {
		t.Errorf("the re-run found an interrupted pivot to recover:\n%s", log.String())
	}
	pivottest.RequireWhole(t, b, a, ns)

	// The way back, with b (now the source) refusing deletes of
	// DockerMachines: the move fails in DELETING, a holds every object.
	b.Provisioned(t, ns)
	opts.From, opts.To = ep(b), ep(a)
	lift = b.Refuse(t, "dockermachines", admissionv1.Delete)
	_, err = Run(ctx, opts)
	if err == nil || errors.As(err, &ue) || !strings.Contains(err.Error(), "(phase DELETING)") ||
		!strings.Contains(err.Error(), "slot a holds every object: re-run the same command, once slot b takes the deletes") {
		t.Fatalf("pivot b -> a with b refusing deletes: %v, want a failure in DELETING naming the re-run", err)
	}
	if r, err := pivot.LoadRecord(rec); err != nil || r.Phase != pivot.PhaseDeleting {
		t.Fatalf("record after the failure in DELETING: %+v, %v; want DELETING", r, err)
	}
	_, err = Run(ctx, opts)
	if err == nil || !strings.Contains(err.Error(), "slot a holds every object (its clusters paused until the move finishes): once slot b takes the deletes, re-run the same command") {
		t.Fatalf("the re-run while b still refuses: %v, want what must change and the re-run", err)
	}
	lift()
	log.Reset()
	if _, err := Run(ctx, opts); err != nil {
		t.Fatalf("the re-run once b takes the deletes: %v\n%s", err, log.String())
	}
	if !strings.Contains(log.String(), "resumed the pivot from slot b to slot a interrupted in DELETING") {
		t.Errorf("the re-run does not say it resumed the move:\n%s", log.String())
	}
	pivottest.RequireWhole(t, a, b, ns)
}
