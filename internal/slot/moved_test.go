package slot_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
)

// TestDestroyAfterPivotLeavesTheMovedWorkloadCluster: after an S3 pivot
// moved workload cluster airgap-wl-a (slot a's name) to slot b, the
// containers are managed by slot b's providers (docs/experiments.md,
// experiment (d): the same containers, the Machines on slot b). Before
// RecordMove, slot a's retire (destroy, after accept) removed every
// container of its workload-cluster names, the moved cluster's too, and
// listed it as slot a's loss; slot b's destroy left it running, owned by
// nothing. Now slot a's losses and destroy leave it, slot b's list and
// remove it, and a move back returns it to slot a.
func TestDestroyAfterPivotLeavesTheMovedWorkloadCluster(t *testing.T) {
	m, fm := newManager(t)
	ctx := context.Background()
	for _, s := range []string{"a", "b"} {
		if _, err := m.Create(ctx, s, slot.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	moved := []string{"airgap-wl-a-control-plane-x7k2p", "airgap-wl-a-lb"}
	for _, c := range moved {
		if _, err := m.Run.Run(ctx, "docker", "run", "-d", "--name", c, "kindest/node"); err != nil {
			t.Fatal(err)
		}
	}
	running := func() []string {
		st, err := fm.State()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for name := range st.Containers {
			if strings.HasPrefix(name, "airgap-wl-") {
				out = append(out, name)
			}
		}
		slices.Sort(out)
		return out
	}
	losses := func(s string) []string {
		l, err := m.Losses(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		return l.Workloads
	}

	// The move there and back leaves the records as they were.
	if err := slot.RecordMove(m.Dir, nil, "a", "b", []string{"airgap-wl-a"}); err != nil {
		t.Fatal(err)
	}
	if err := slot.RecordMove(m.Dir, nil, "b", "a", []string{"airgap-wl-a"}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"a", "b"} {
		if r, err := slot.Load(m.Dir, s); err != nil || len(r.MovedIn)+len(r.MovedOut) != 0 {
			t.Fatalf("slot %s after a move and its undo: %+v, %v", s, r, err)
		}
	}
	if got := losses("a"); !slices.Equal(got, []string{"airgap-wl-a"}) {
		t.Errorf("slot a's losses before the pivot: %v, want airgap-wl-a", got)
	}

	if err := slot.RecordMove(m.Dir, nil, "a", "b", []string{"airgap-wl-a"}); err != nil {
		t.Fatal(err)
	}
	if got := losses("a"); len(got) != 0 {
		t.Errorf("slot a's losses after the pivot to b: %v, want none (slot b manages airgap-wl-a)", got)
	}
	if got := losses("b"); !slices.Equal(got, []string{"airgap-wl-a"}) {
		t.Errorf("slot b's losses after the pivot: %v, want airgap-wl-a", got)
	}
	if err := m.Destroy(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got := running(); !slices.Equal(got, moved) {
		t.Errorf("after slot a's retire, workload containers %v, want %v: the retire removed the cluster the pivot moved to slot b", got, moved)
	}
	if err := m.Destroy(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if got := running(); len(got) != 0 {
		t.Errorf("after slot b's destroy, workload containers %v left running, owned by nothing", got)
	}
}
