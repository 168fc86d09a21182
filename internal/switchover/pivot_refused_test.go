package switchover

import (
	"context"
	"errors"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/pivot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/pivot/pivottest"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
)

// TestSwitchPivotRefusedMidMove: switch to b --mode pivot while slot b
// refuses the Machines' creates (the mover fails in COPYING, not killed).
// The switch fails (exit 3) with the pivot undone: the pointer and the
// objects stay on slot a, its Cluster unpaused, slot b without a partial
// copy; and back, as the failure advises, returns to slot a for good.
func TestSwitchPivotRefusedMidMove(t *testing.T) {
	a, b, s, log := pivotSite(t)
	ctx := context.Background()

	lift := b.Refuse(t, "machines", admissionv1.Create)
	defer lift()
	s.Mode = journal.SwitchPivot
	_, err := s.To(ctx, "b", false)
	var ue *pivot.UndoneError
	if !errors.As(err, &ue) || errkind.Of(err) != errkind.Environment || !strings.Contains(err.Error(), "the switch to slot b did not happen and slot a stays active") || !strings.Contains(err.Error(), "kubectl bundle-switch back") {
		t.Fatalf("switch to b --mode pivot with b refusing Machines: %v, want the pivot undone (exit 3) naming switch back\n%s", err, log.String())
	}
	if act, _ := site.Read(s.Dir).Active(); act != "a" {
		t.Errorf("active = %q after the failed pivot, want a", act)
	}
	pivottest.RequireWhole(t, a, b, pivotNS)
	if t.Failed() {
		t.FailNow()
	}

	// What the failure advises to stay on slot a: back, run while slot b
	// still refuses.
	if _, err := s.Back(ctx, false); err != nil {
		t.Fatalf("back after the undone pivot: %v\n%s", err, log.String())
	}
	pivottest.RequireWhole(t, a, b, pivotNS)
	st, err := s.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Active != "a" || !st.Consistent || st.Phase != record.PhaseSwitchedBack || st.Next != "" {
		t.Errorf("status after back: %+v, want slot a active, consistent, switched back, nothing to run", st)
	}
	if r, err := pivot.LoadRecord(s.Dir.Join(pivot.File)); err != nil || r.Interrupted() {
		t.Errorf("pivot record after back: %+v, %v; want none interrupted", r, err)
	}
}
