package site_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

const digestV1 = "1111111111111111111111111111111111111111111111111111111111111111"

// fixture is one state dir: a pointer, a switch record, an open
// transaction and two slot records, each as the table names it.
type fixture struct {
	pointer string // "": missing; "!": damaged; else the slot it names
	sw      string // "": missing; "!": damaged; else "PHASE target previous"
	txn     string // "": none; "!": damaged; else "strategy PHASE"
	slots   string // which slots have a readable record: "ab", "a", "b"
	history []string
}

func (f fixture) String() string {
	return fmt.Sprintf("pointer=%q switch=%q txn=%q slots=%q history=%v", f.pointer, f.sw, f.txn, f.slots, f.history)
}

func build(t *testing.T, f fixture) *state.Dir {
	t.Helper()
	d, err := state.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	for _, n := range []string{"a", "b"} {
		if !strings.Contains(f.slots, n) {
			continue
		}
		r := &record.Slot{Name: n, Provider: "existing", Context: n, State: "ready",
			Package: &record.PackageRef{Digest: digestV1, Deployed: now},
			Gate:    &record.GateResult{Gate: "default", Passed: true, Time: now, Package: digestV1}}
		if err := record.SaveSlot(d, r); err != nil {
			t.Fatal(err)
		}
	}
	switch f.pointer {
	case "":
	case "!":
		if err := os.WriteFile(d.Join(record.ActiveFile), []byte("a\nb\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	default:
		if err := record.WriteActive(d, f.pointer); err != nil {
			t.Fatal(err)
		}
	}
	switch f.sw {
	case "":
	case "!":
		if err := os.WriteFile(d.Join(record.SwitchFile), []byte("{not json"), 0o600); err != nil {
			t.Fatal(err)
		}
	default:
		w := strings.Fields(f.sw)
		sw := &record.Switch{Phase: w[0], Target: w[1]}
		if len(w) > 2 {
			sw.Previous = w[2]
		}
		if err := record.WriteSwitch(d, sw, now); err != nil {
			t.Fatal(err)
		}
	}
	j := journal.New(d)
	for _, h := range f.history {
		w := strings.Fields(h)
		if err := j.Record(journal.Event{Type: w[0], Slot: w[1], Detail: strings.Join(w[2:], " "), Status: journal.StatusDone}); err != nil {
			t.Fatal(err)
		}
	}
	switch f.txn {
	case "":
	case "!":
		if _, err := d.MkdirAll(journal.Dir); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(d.Join(journal.Dir, journal.TransactionFile), []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
	default:
		w := strings.Fields(f.txn)
		st := journal.Strategy(w[0])
		slots := journal.Slots{Active: "a", Candidate: "b"}
		if st != journal.BlueGreen {
			slots = journal.Slots{Active: "a"}
		}
		fallback := ""
		if st != journal.BlueGreen {
			fallback = digestV1 // the package slot a holds: an update in place restores it
		}
		if _, err := j.Begin(journal.BeginOptions{Strategy: st, Target: digestV1, Fallback: fallback, Slots: slots}); err != nil {
			t.Fatal(err)
		}
		path := map[journal.Strategy][]journal.Phase{
			journal.BlueGreen: {journal.Verified, journal.Provisioning, journal.Provisioned, journal.Healthy, journal.Switched, journal.Soaking, journal.Accepted},
			journal.InPlace:   {journal.Verified, journal.Deploying},
		}[st]
		for _, p := range path {
			if w[1] == string(journal.Begun) {
				break
			}
			if _, err := j.Start(p); err != nil {
				t.Fatal(err)
			}
			if string(p) == w[1] {
				break
			}
			if _, err := j.Done(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	return d
}

// TestAnswers asserts site's answers, case by case, for the rules that
// used to be copied across slot, switchover, session and journal.
func TestAnswers(t *testing.T) {
	for _, c := range []struct {
		name   string
		f      fixture
		active string // "!" : damage; "?X": lost pointer naming X
		kept   string
		protA  string // "y", "n", or "!" (an error)
		protB  string
	}{
		{"fresh site", fixture{}, "", "", "n", "n"},
		{"first install gated, never switched", fixture{slots: "a"}, "", "", "n", "n"},
		{"active a, accepted", fixture{pointer: "a", sw: "ACCEPTED a", slots: "ab"}, "a", "", "y", "n"},
		{"soak on b keeps a", fixture{pointer: "b", sw: "SWITCHED b a", slots: "ab"}, "b", "a", "y", "y"},
		{"unfinished switch keeps both ends", fixture{pointer: "a", sw: "SWITCHING b a", slots: "ab"}, "a", "b", "y", "y"},
		{"unfinished switch back keeps a", fixture{pointer: "b", sw: "SWITCHING_BACK a b", slots: "ab"}, "b", "a", "y", "y"},
		{"switched back: a serves, b free", fixture{pointer: "a", sw: "SWITCHED_BACK a b", slots: "ab"}, "a", "", "y", "n"},
		{"pointer restored from an old backup", fixture{pointer: "a", sw: "ACCEPTED b a", slots: "ab"}, "a", "b", "y", "y"},
		{"pointer lost after a switch", fixture{sw: "SWITCHED b a", slots: "ab"}, "?b", "a", "y", "y"},
		{"pointer damaged", fixture{pointer: "!", sw: "SWITCHED b a", slots: "ab"}, "!", "", "!", "!"},
		{"switch record damaged: active still answers", fixture{pointer: "b", sw: "!", slots: "ab"}, "b", "", "!", "y"},
		{"blue-green before its switch keeps a", fixture{pointer: "a", sw: "ACCEPTED a", txn: "blue-green HEALTHY", slots: "ab"}, "a", "", "y", "n"},
		{"blue-green soak without switch.json keeps a", fixture{pointer: "b", txn: "blue-green SOAKING", slots: "ab"}, "b", "a", "y", "y"},
		{"lost pointer during a blue-green soak", fixture{txn: "blue-green SOAKING", slots: "ab"}, "?b", "a", "y", "y"},
		{"candidate gone during the soak", fixture{pointer: "b", sw: "SWITCHED b a", txn: "blue-green SOAKING", slots: "a"}, "b", "a", "y", "y"},
		// Issue 32, class 5: both records gone, the history keeps the soak.
		{"records gone, history keeps the soak", fixture{pointer: "b", slots: "ab", history: []string{"switch a to a from none", "switch a accept a", "switch b to b from a"}}, "b", "a", "y", "y"},
		{"records gone, soak accepted in the history", fixture{pointer: "b", slots: "ab", history: []string{"switch b to b from a", "switch b accept b"}}, "b", "", "n", "y"},
		{"records gone, switched back in the history", fixture{pointer: "a", slots: "ab", history: []string{"switch b to b from a", "switch a back a from b"}}, "a", "", "y", "n"},
		{"transaction damaged: guard stops", fixture{pointer: "a", sw: "ACCEPTED a", txn: "!", slots: "ab"}, "a", "", "y", "n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := site.Read(build(t, c.f))
			active, err := s.Active()
			var lp *site.LostPointerError
			switch {
			case strings.HasPrefix(c.active, "?"):
				if !errors.As(err, &lp) || lp.Slot != c.active[1:] {
					t.Fatalf("%v: Active() = %q, %v; want a lost pointer naming %s", c.f, active, err, c.active[1:])
				}
				if lp.Fix.IsZero() {
					t.Errorf("%v: the lost pointer names no repair", c.f)
				}
				active = lp.Slot
			case c.active == "!":
				var dmg *state.DamageError
				if !errors.As(err, &dmg) || dmg.Fix.IsZero() {
					t.Fatalf("%v: Active() = %q, %v; want damage with a repair", c.f, active, err)
				}
			default:
				if err != nil || active != c.active {
					t.Fatalf("%v: Active() = %q, %v; want %q", c.f, active, err, c.active)
				}
			}
			if c.name == "pointer restored from an old backup" {
				// Neither slot is given up, and the guard refuses until
				// the operator says which serves.
				if _, err := s.Protection(); err == nil || !strings.Contains(err.Error(), "the switch record says slot b was made active") {
					t.Errorf("%v: Protection() = %v; want the disagreement", c.f, err)
				}
			}
			if c.active != "!" {
				if got := s.Kept(active); got != c.kept {
					t.Errorf("%v: Kept(%q) = %q, want %q", c.f, active, got, c.kept)
				}
			}
			for name, want := range map[string]string{"a": c.protA, "b": c.protB} {
				p, err := s.Protects(name)
				got := map[bool]string{true: "y", false: "n"}[p]
				if err != nil {
					got = "!"
				}
				// The pointer alone decides for the active slot, even
				// with switch.json damaged (its record's repair needs it).
				if want == "!" && name == active && err == nil && p {
					got = "!"
				}
				if got != want {
					t.Errorf("%v: Protects(%s) = %v, %v; want %s", c.f, name, p, err, want)
				}
			}
		})
	}
}

// TestDamageNeverHidesAnotherPart reads every combination of the
// pointer, the switch record, the transaction and the slot records, with
// each part whole, missing or damaged: reading never panics, each damaged
// part is reported by its own reader with a repair, a part that is whole
// reads whole whatever the others are, and the guard's Protection fails
// closed whenever a part it needs is damaged.
func TestDamageNeverHidesAnotherPart(t *testing.T) {
	pointers := []string{"", "!", "a", "b"}
	switches := []string{"", "!", "SWITCHED b a", "SWITCHING b a", "SWITCHING_BACK a b", "ACCEPTED a"}
	txns := []string{"", "!", "blue-green HEALTHY", "blue-green SOAKING", "blue-green ACCEPTED", "in-place DEPLOYING"}
	slotSets := []string{"ab", "a"}
	n := 0
	for _, p := range pointers {
		for _, sw := range switches {
			for _, tx := range txns {
				for _, sl := range slotSets {
					f := fixture{pointer: p, sw: sw, txn: tx, slots: sl}
					n++
					s := site.Read(build(t, f))
					_, aerr := s.Active()
					_, serr := s.Switch()
					_, terr := s.Txn()
					if (p == "!") != (aerr != nil && !errors.As(aerr, new(*site.LostPointerError))) {
						t.Errorf("%v: Active() error %v", f, aerr)
					}
					if (sw == "!") != (serr != nil) {
						t.Errorf("%v: Switch() error %v", f, serr)
					}
					if (tx == "!") != (terr != nil) {
						t.Errorf("%v: Txn() error %v", f, terr)
					}
					for _, err := range []error{aerr, serr} {
						var dmg *state.DamageError
						if errors.As(err, &dmg) && dmg.Fix.IsZero() {
							t.Errorf("%v: damage without a repair: %v", f, err)
						}
					}
					prot, perr := s.Protection()
					if (p == "!" || sw == "!" || tx == "!") && perr == nil {
						t.Errorf("%v: Protection() = %+v with a damaged part; want it to fail closed", f, prot)
					}
					if perr == nil && prot.Active != "" && prot.Why(prot.Active) == "" {
						t.Errorf("%v: the active slot %s is not protected", f, prot.Active)
					}
					if perr == nil && prot.Soaking != "" && prot.Why(prot.Soaking) == "" {
						t.Errorf("%v: the kept slot %s has no reason", f, prot.Soaking)
					}
				}
			}
		}
	}
	if n != len(pointers)*len(switches)*len(txns)*len(slotSets) {
		t.Fatalf("%d combinations", n)
	}
	t.Logf("%d combinations read", n)
}

// The transaction of the table's "blue-green SOAKING" is what the
// journal's own writer leaves (a check that build makes what it says).
func TestFixtureTransaction(t *testing.T) {
	d := build(t, fixture{txn: "blue-green SOAKING"})
	b, err := os.ReadFile(d.Join(journal.Dir, journal.TransactionFile))
	if err != nil {
		t.Fatal(err)
	}
	var tx struct{ Phase string }
	if err := json.Unmarshal(b, &tx); err != nil || tx.Phase != "SOAKING" {
		t.Fatalf("transaction %s: phase %q, %v", b, tx.Phase, err)
	}
}

// TestMovedOff: an update in place whose slot a forced switch took the
// pointer from is stopped, with its abort before its first change and the
// switch back after it; every other state is no business of MovedOff.
func TestMovedOff(t *testing.T) {
	for _, c := range []struct {
		name string
		f    fixture
		want string // "": nil; else the first word of the command after the plugin
	}{
		{"in-place begun, pointer moved to b", fixture{pointer: "b", txn: "in-place BEGUN", slots: "ab"}, "kubectl bundle-journal abort"},
		{"in-place verified, pointer moved to b", fixture{pointer: "b", txn: "in-place VERIFIED", slots: "ab"}, "kubectl bundle-journal abort"},
		{"in-place deploying, pointer moved to b", fixture{pointer: "b", txn: "in-place DEPLOYING", slots: "ab"}, "kubectl bundle-switch to a --force"},
		{"in-place deploying, pointer moved to b, slot a gone", fixture{pointer: "b", txn: "in-place DEPLOYING", slots: "b"}, "kubectl bundle-journal abort"},
		{"in-place deploying, pointer on a", fixture{pointer: "a", txn: "in-place DEPLOYING", slots: "ab"}, ""},
		{"in-place, pointer names a slot with no record", fixture{pointer: "b", txn: "in-place DEPLOYING", slots: "a"}, ""},
		{"in-place, pointer damaged", fixture{pointer: "!", txn: "in-place DEPLOYING", slots: "ab"}, ""},
		{"in-place, pointer missing", fixture{txn: "in-place DEPLOYING", slots: "ab"}, ""},
		{"blue-green soaking on b", fixture{pointer: "b", sw: "SWITCHED b a", txn: "blue-green SOAKING", slots: "ab"}, ""},
		{"no transaction", fixture{pointer: "b", slots: "ab"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkStep(t, "MovedOff", c.f, site.Read(build(t, c.f)).MovedOff(), c.want, "updates slot a, but the active pointer names slot b")
		})
	}
}

// TestMovedOffTornDown: an update in place whose slot a destroy outside
// it tore down (pointer still on it) is closed by abort, not gated again;
// recreate tears its slot down itself and keeps its own step.
func TestMovedOffTornDown(t *testing.T) {
	for _, c := range []struct {
		name string
		f    fixture
		want string
	}{
		{"in-place restoring, slot a destroying", fixture{pointer: "a", txn: "in-place RESTORING", slots: "ab"}, "kubectl bundle-journal abort"},
		{"recreate tearing down, slot a destroying", fixture{pointer: "a", txn: "recreate TEARDOWN", slots: "ab"}, ""},
		{"in-place, slot a destroying, pointer on b", fixture{pointer: "b", txn: "in-place RESTORING", slots: "ab"}, "kubectl bundle-journal abort"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := build(t, c.f)
			r, err := record.LoadSlot(d, "a")
			if err != nil {
				t.Fatal(err)
			}
			r.State = record.StateDestroying
			if err := record.SaveSlot(d, r); err != nil {
				t.Fatal(err)
			}
			why := "slot a is being destroyed"
			if c.f.pointer == "b" {
				why = "updates slot a, but the active pointer names slot b"
			}
			checkStep(t, "MovedOff", c.f, site.Read(d).MovedOff(), c.want, why)
		})
	}
}

// TestSoakLost: a blue-green soak whose switch record is missing names the
// forced switch that writes it again, and nothing else does.
func TestSoakLost(t *testing.T) {
	for _, c := range []struct {
		name string
		f    fixture
		want string
	}{
		{"soaking on b, switch record missing", fixture{pointer: "b", txn: "blue-green SOAKING", slots: "ab"}, "kubectl bundle-switch to b --force"},
		{"switched on b, switch record missing", fixture{pointer: "b", txn: "blue-green SWITCHED", slots: "ab"}, "kubectl bundle-switch to b --force"},
		{"soaking on b, switch record there", fixture{pointer: "b", sw: "SWITCHED b a", txn: "blue-green SOAKING", slots: "ab"}, ""},
		{"soaking, switch record damaged", fixture{pointer: "b", sw: "!", txn: "blue-green SOAKING", slots: "ab"}, ""},
		{"soaking, pointer back on a", fixture{pointer: "a", txn: "blue-green SOAKING", slots: "ab"}, ""},
		{"soaking, pointer damaged", fixture{pointer: "!", txn: "blue-green SOAKING", slots: "ab"}, ""},
		{"provisioning, no switch yet", fixture{pointer: "a", txn: "blue-green PROVISIONING", slots: "ab"}, ""},
		{"in-place on a", fixture{pointer: "a", txn: "in-place DEPLOYING", slots: "ab"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkStep(t, "SoakLost", c.f, site.Read(build(t, c.f)).SoakLost(), c.want, "slot a as the revert target")
		})
	}
}

// checkStep checks a rule's next step n (nil: the rule does not apply):
// want is the command it runs ("": none), why a part of its reason.
func checkStep(t *testing.T, rule string, f fixture, n *journal.NextStep, want, why string) {
	t.Helper()
	switch {
	case want == "" && n != nil:
		t.Fatalf("%v: %s() = %q (%s); want nil", f, rule, n.Command, n.Why)
	case want == "":
	case n == nil:
		t.Fatalf("%v: %s() = nil; want %q", f, rule, want)
	case n.Command != want:
		t.Errorf("%v: %s() runs %q; want %q", f, rule, n.Command, want)
	case !strings.Contains(n.Why, why):
		t.Errorf("%v: %s() says %q; want %q in it", f, rule, n.Why, why)
	}
}
