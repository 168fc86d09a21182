package site_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// Attack (change 4, ActiveFix): an in-place update of slot a killed inside
// its deploy (slot a half-deployed, its gate no longer vouching for it),
// then `kubectl bundle-switch to b --force` (slot b, gated, serves: the
// switch record says SWITCHED to b from a), then the active pointer is
// damaged. The pointer's repair must not put the site back on the
// half-deployed, ungated slot a with a forced switch (which skips the
// gate) and take slot b, the known-good deployment that served, off
// service and out of protection. ActiveFix assumes an open update in place
// keeps the pointer on its slot "the whole time", which a forced switch
// away (change 1, MovedOff) makes false: the switch record names slot b.
func TestActiveFixAfterAForcedSwitchAway(t *testing.T) {
	d := build(t, fixture{pointer: "!", sw: "SWITCHED b a", txn: "in-place DEPLOYING", slots: "ab"})
	// Slot a: the in-place deploy of the update started and was killed.
	halfDeployA(t, d)
	s := site.Read(d)
	_, err := s.Active()
	var dmg *state.DamageError
	if !errors.As(err, &dmg) {
		t.Fatalf("pointer damaged: Active() = %v, want a damage error", err)
	}
	got := dmg.Fix.String()
	if strings.Contains(got, "switch to a --force") && !strings.Contains(got, "gate --slot a") {
		t.Errorf("the pointer's repair is %q: a forced switch (no gate) to slot a, half-deployed and ungated, "+
			"while the switch record says slot b (gated) was made active and serves; want the switch to b, or a gate of a first", got)
	}
}
