// Package plan is the planner: for a strategy's command (an apply, an
// accept, a revert) on the site as it is now, the steps that command would
// run, in order, each as a typed value: the journal phase it records, the
// plugin commands that do it, the slot it changes, what that changes and
// what it loses, and whether the open transaction has done it already.
// The strategies' steps are written here once; `kubectl bundle-journal
// plan` and the scripts' --dry-run print them, and nothing is changed.
package plan

import (
	"errors"
	"fmt"

	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
	"github.com/kubectl-bundle/kubectl-bundle/internal/session"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/stage"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// Ops of the strategies: in-place and recreate only apply.
const (
	Apply  = "apply"
	Accept = "accept"
	Revert = "revert"
)

// Input is the command being planned, as a script was given it.
type Input struct {
	Strategy journal.Strategy
	Op       string
	// Package is the package's path (apply); its sha256 is taken.
	Package string
	// Verify are the verification flags the script passes to verify
	// (--key ABS, or --certificate-identity ... ).
	Verify []string
	Gate   *journal.Gate
	// SwitchMode is blue-green's --switch-mode ("" : S2).
	SwitchMode string
	// Slots are config.yaml's slots: (blue-green builds next to the
	// active one in the first other).
	Slots []string
}

// Step states.
const (
	Done        = "done"        // the open transaction recorded it done: the run skips it
	Interrupted = "interrupted" // started and not finished: the run redoes it from a clean state
	Failed      = "failed"      // it failed: the run goes to the failure's steps
	Next        = "next"        // the first step the run would run
	Pending     = "pending"     // after the next
)

// Step is one step of a plan.
type Step struct {
	// Phase is the journal step it records ("" : a check that records
	// nothing, such as a revert's gate of the previous slot).
	Phase journal.Phase `json:"phase,omitempty"`
	// Run are the plugin commands the step runs, in order.
	Run []advice.Cmd `json:"run"`
	// Slot is the slot the step changes ("" : none).
	Slot    string `json:"slot,omitempty"`
	Changes string `json:"changes"`
	// Loses is what the step discards for good (listed live, and asked
	// for, before it runs).
	Loses []string `json:"loses,omitempty"`
	State string   `json:"state"`
}

// Plan is what a command would do on the site now.
type Plan struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Strategy   journal.Strategy `json:"strategy"`
	Op         string           `json:"op"`
	Package    string           `json:"package,omitempty"`
	Target     string           `json:"target,omitempty"`
	// Serving is the slot that serves now (the pointer's).
	Serving string `json:"serving,omitempty"`
	// Active is the slot the update starts from (blue-green: the previous
	// slot once it switched); Candidate is the slot blue-green builds.
	Active    string `json:"active,omitempty"`
	Candidate string `json:"candidate,omitempty"`
	Fallback  string `json:"fallback,omitempty"`
	// Transaction is the open transaction the command would resume.
	Transaction string `json:"transaction,omitempty"`
	Steps       []Step `json:"steps"`
	// OnFailure are the steps a failure of any step before the point of
	// no return runs instead of the rest.
	OnFailure []Step `json:"onFailure,omitempty"`
	// Refused says why the command would refuse now, changing nothing
	// (Steps are then what it would run once that is fixed, if known);
	// Instead is what to run first.
	Refused string `json:"refused,omitempty"`
	Instead string `json:"instead,omitempty"`
	// Code is the exit code the command would refuse with (0: it runs),
	// set where errors become exit codes (internal/cli).
	Code int `json:"code"`
	err  error
}

// Err is the refusal as the error the command itself would return (nil
// when it would run).
func (p *Plan) Err() error { return p.err }

func (p *Plan) refuse(err error, instead string) {
	if p.err != nil {
		return
	}
	p.err, p.Refused, p.Instead = err, err.Error(), instead
}

// Make plans in on the site s reads (read only: s need not hold the lock).
func Make(s *session.Session, in Input) *Plan {
	p := &Plan{APIVersion: journal.APIVersion, Kind: "Plan", Strategy: in.Strategy, Op: in.Op, Package: in.Package}
	here := site.Read(s.Dir)
	if _, err := s.Protection(); err != nil {
		var dmg *state.DamageError
		fix := ""
		if errors.As(err, &dmg) {
			fix = dmg.Fix.String()
		}
		p.refuse(errkind.Wrap(errkind.Environment, err), fix)
	}
	t, terr := here.Txn()
	if terr != nil {
		p.refuse(errkind.Wrap(errkind.Environment, terr), s.Dir.Repair().String())
	}
	p.Serving, _ = here.Active()
	if t != nil {
		if in.Gate == nil {
			// A run given no --gate gates as the transaction was begun.
			in.Gate = t.Gate
		}
		p.Transaction, p.Target, p.Fallback = t.ID, t.Target, t.Fallback
		p.Active, p.Candidate = t.Slots.Active, t.Slots.Candidate
		if t.Package != "" && p.Package == "" {
			p.Package = t.Package
		}
		if t.Strategy != in.Strategy {
			n := journal.Next(t)
			instead := n.Command
			if !n.Run.IsZero() {
				instead = n.Run.WithEnv(s.Dir.CommandEnv()).String()
			}
			p.refuse(errkind.New(errkind.Conflict, "transaction %s (%s) is open in %s: a %s run refuses until it is finished; the next step is the %s run's",
				t.ID, t.Strategy, t.Phase, in.Strategy, t.Strategy), instead)
		} else if in.Op == Apply && in.Package != "" && !SamePackage(t, in.Package) {
			p.refuse(errkind.New(errkind.Conflict, "transaction %s is open for %s, not %s: the run resumes that update first", t.ID, t.Package, in.Package), "")
		}
	} else {
		p.fresh(s, here, in)
	}
	if p.Target == "" && in.Package != "" {
		if ref, err := stage.Identify(in.Package); err == nil {
			p.Target = ref.Digest
		} else {
			p.refuse(errkind.New(errkind.Usage, "package %s: %v", in.Package, err), "")
		}
	}
	if p.Fallback == "" && p.Active != "" && in.Strategy != journal.BlueGreen {
		if rec, err := here.Slot(p.Active); err == nil && rec.Package != nil {
			p.Fallback = rec.Package.Digest
		}
	}
	p.Steps, p.OnFailure = steps(here, in, p)
	mark(p, t)
	// Every command printed runs as printed from any directory: the
	// state dir goes with it when it was given relative.
	for _, list := range [][]Step{p.Steps, p.OnFailure} {
		for i := range list {
			for j := range list[i].Run {
				list[i].Run[j] = list[i].Run[j].WithEnv(s.Dir.CommandEnv())
			}
		}
	}
	if t == nil && p.err == nil && p.Fallback != "" && in.Strategy != journal.BlueGreen {
		// The fallback is checked as a run checks it before it changes
		// the active slot: staged, and still the bytes verified.
		first := journal.Deploying
		if in.Strategy == journal.Recreate {
			first = journal.Teardown
		}
		planned := &journal.Transaction{ID: "(planned)", Strategy: in.Strategy, Fallback: p.Fallback, Slots: journal.Slots{Active: p.Active}}
		if err := s.FallbackUsable(planned, first, "change slot "+p.Active); err != nil {
			p.refuse(err, "")
		}
	}
	return p
}

// fresh fills p for a command with no transaction open.
func (p *Plan) fresh(s *session.Session, here *site.Site, in Input) {
	active, err := here.Active()
	if err != nil {
		return // refused above (Protection reads the same pointer)
	}
	p.Active = active
	switch {
	case in.Strategy == journal.BlueGreen && in.Op != Apply:
		p.refuse(errkind.New(errkind.Conflict, "no blue-green transaction is open: nothing to %s (%s)", in.Op, s.Dir.Plugin("switch", "status")), "")
		return
	case in.Strategy == journal.BlueGreen:
		for _, o := range in.Slots {
			if o != active {
				p.Candidate = o
				break
			}
		}
		if p.Candidate == "" && active != "" {
			p.refuse(errkind.New(errkind.Usage, "blue/green needs two slots, config.yaml's slots: lists %v", in.Slots), "")
			return
		}
	}
	if err := s.GuardBegin(in.Strategy, active, p.Candidate); err != nil {
		p.refuse(err, "")
	}
}

// steps are the strategy's steps for in, with p's slots and packages.
func steps(here *site.Site, in Input, p *Plan) (run, onFailure []Step) {
	target := p.Target
	if target == "" {
		target = "TARGET"
	}
	cmds := Commands{Package: p.Package, Verify: in.Verify, Gate: GateFlags(in.Gate)}
	verify := Step{Phase: journal.Verified, Run: []advice.Cmd{cmds.VerifyStage()},
		Changes: "verifies the package offline and stages it; changes no slot"}
	gate := func(slot string, phase journal.Phase, extra ...string) Step {
		return Step{Phase: phase, Run: []advice.Cmd{cmds.GateOf(slot, extra...)},
			Changes: "gates slot " + slot + " and records the result; changes nothing in it"}
	}
	end := func(phase journal.Phase, why string) Step {
		return Step{Phase: phase, Run: []advice.Cmd{End()}, Changes: why}
	}
	deploy := cmds.Deploy
	a, c, fb := p.Active, p.Candidate, p.Fallback
	switch {
	case in.Strategy == journal.InPlace:
		run = []Step{verify,
			{Phase: journal.Deploying, Run: []advice.Cmd{deploy(a, target)}, Slot: a,
				Changes: "deploys the package into the active slot " + a + " in place: until its gate passes, no slot holds a known-good deployment"},
			gate(a, journal.Healthy),
			end(journal.Committed, "records COMMITTED and closes the transaction")}
		onFailure = []Step{{Phase: journal.Restoring, Run: []advice.Cmd{deploy(a, orNone(fb))}, Slot: a,
			Changes: "redeploys the previous package into slot " + a + ", best effort (in place cannot guarantee it comes back as it was)"}}
	case in.Strategy == journal.Recreate:
		run = []Step{verify,
			{Phase: journal.Teardown, Run: []advice.Cmd{Destroy(a, true)}, Slot: a,
				Changes: "destroys the active slot " + a + ": from here until its rebuild passes its gate, nothing serves", Loses: holds(here, a)},
			{Phase: journal.Building, Run: cmds.Rebuild(a, target), Slot: a,
				Changes: "creates slot " + a + " again (after what a killed build left of it) and deploys the package into it"},
			gate(a, journal.Healthy),
			end(journal.Committed, "records COMMITTED and closes the transaction")}
		onFailure = []Step{{Phase: journal.BuildingFallback, Run: cmds.Rebuild(a, orNone(fb)), Slot: a,
			Changes: "builds slot " + a + " again with the previous package"}}
	case in.Op == Apply:
		var scope []string
		if in.SwitchMode == journal.SwitchRepoint {
			scope = []string{"--management-only"}
		}
		run = []Step{verify,
			{Phase: journal.Provisioning, Run: []advice.Cmd{Preflight(c, target), Create(c, target)}, Slot: c,
				Changes: "checks the machine can hold candidate slot " + c + " beside " + a + ", then creates it; slot " + a + " is not touched"},
			{Phase: journal.Provisioned, Run: []advice.Cmd{deploy(c, target)}, Slot: c, Changes: "deploys the package into candidate slot " + c},
			gate(c, journal.Healthy, scope...),
			{Phase: journal.Switched, Run: []advice.Cmd{SwitchTo(c)}, Slot: c,
				Changes: "moves the active pointer and the kubeconfig and registry aliases to slot " + c + switchHow(in.SwitchMode) + "; slot " + a + " is kept as the revert target while " + c + " soaks (then: accept or revert)"}}
		onFailure = []Step{{Phase: journal.Destroying, Run: []advice.Cmd{Destroy(c, false)}, Slot: c,
			Changes: "destroys candidate slot " + c + " (before the switch only); slot " + a + " was not touched and is gated again"}}
	case in.Op == Accept:
		retire := Step{Phase: journal.Retired, Run: []advice.Cmd{Destroy(a, false)}, Slot: a,
			Changes: "retires the previous slot " + a + ": it is no revert target any more", Loses: holds(here, a)}
		if t, _ := here.Txn(); t != nil && t.SwitchMode == journal.SwitchRepoint {
			retire.Run, retire.Loses = nil, nil
			retire.Changes = "keeps slot " + a + " when it owns workload clusters (S1: they stay with it), else retires it"
		}
		retire.Run = append(retire.Run, End())
		retire.Changes += "; closes the transaction"
		run = []Step{{Phase: journal.Accepted, Run: []advice.Cmd{SwitchAccept()}, Changes: "ends the soak: slot " + c + " stays active"},
			retire}
	default: // revert
		pre := gate(a, "")
		pre.Changes = "gates the previous slot " + a + " first: when it fails, nothing is switched and slot " + c + " keeps serving"
		run = []Step{pre,
			{Phase: journal.SwitchedBack, Run: []advice.Cmd{SwitchBack(in.Gate, false)}, Slot: a,
				Changes: "moves the active pointer and aliases back to slot " + a},
			gate(a, ""),
			{Phase: journal.Destroying, Run: []advice.Cmd{Destroy(c, false)}, Slot: c,
				Changes: "destroys candidate slot " + c + " once slot " + a + " passed its gate again", Loses: holds(here, c)},
			end(journal.RolledBack, "records ROLLED_BACK and closes the transaction")}
	}
	return run, onFailure
}

// mark sets each step's state from the open transaction t (nil: none).
func mark(p *Plan, t *journal.Transaction) {
	next := false
	// A check (no phase) before a step the transaction recorded is behind it.
	reached := -1
	for i, st := range p.Steps {
		if t != nil && st.Phase != "" && t.Step(st.Phase) != nil {
			reached = i
		}
	}
	for i := range p.Steps {
		st := &p.Steps[i]
		var rec *journal.Step
		if t != nil && st.Phase != "" {
			rec = t.Step(st.Phase)
		}
		switch {
		case st.Phase == "" && i < reached:
			st.State = Done
		case rec != nil && rec.Status == journal.StatusDone:
			st.State = Done
		case rec != nil && rec.Status == journal.StatusFailed:
			st.State, next = Failed, true
		case rec != nil:
			st.State, next = Interrupted, true
		case !next:
			st.State, next = Next, true
		default:
			st.State = Pending
		}
	}
	for i := range p.OnFailure {
		st := &p.OnFailure[i]
		st.State = Pending
		if t == nil {
			continue
		}
		if rec := t.Step(st.Phase); rec != nil && rec.Status == journal.StatusDone {
			st.State = Done
		} else if rec != nil {
			st.State = Interrupted
		}
	}
}

// holds is what discarding slot name loses, from its record: what the
// step lists live (kubectl bundle-slot losses) and asks for before it runs.
func holds(here *site.Site, name string) []string {
	rec, err := here.Slot(name)
	if err != nil {
		var nf *record.NotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return []string{"slot " + name + "'s record cannot be read (" + err.Error() + "): what it holds is listed live before the step runs"}
	}
	var out []string
	if rec.Provider == slot.ProviderExisting {
		return []string{"nothing of the cluster (an existing cluster is left as it is): only slot " + name + "'s record"}
	}
	out = append(out, fmt.Sprintf("kind cluster %s of slot %s, with what runs in it", orNone(rec.Cluster), name))
	if rec.RegistryPort > 0 {
		out = append(out, fmt.Sprintf("its registry (127.0.0.1:%d): %d image(s) seeded at create, and anything pushed since", rec.RegistryPort, len(rec.Seeded)))
	}
	for _, w := range rec.OwnsWorkloads {
		out = append(out, "workload cluster "+w+" (its containers are deleted with the slot)")
	}
	return out
}

func switchHow(mode string) string {
	switch mode {
	case journal.SwitchRepoint:
		return " (S1: the workload clusters stay with the previous slot)"
	case journal.SwitchPivot:
		return " (S3: the workload clusters' Cluster API objects move with it)"
	}
	return ""
}

func orNone(s string) string {
	if s == "" {
		return "NONE"
	}
	return s
}

// SamePackage says whether path is t's package: its path, or the same
// bytes under another name (the scripts resume either).
func SamePackage(t *journal.Transaction, path string) bool {
	if t.Package == path {
		return true
	}
	ref, err := stage.Identify(path)
	return err == nil && ref.Digest == t.Target
}
