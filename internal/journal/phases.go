package journal

import "fmt"

// Strategy names an update strategy (docs/strategies.md).
type Strategy string

// Strategies.
const (
	InPlace   Strategy = "in-place"
	BlueGreen Strategy = "blue-green"
	Recreate  Strategy = "recreate"
)

// Strategies lists every strategy, for help and validation.
var Strategies = []Strategy{InPlace, BlueGreen, Recreate}

// Phase is one step of a transaction.
type Phase string

// Phases. BEGUN is where every transaction starts; the rest are docs/strategies.md's.
const (
	Begun            Phase = "BEGUN"
	Verified         Phase = "VERIFIED"
	Provisioning     Phase = "PROVISIONING"
	Provisioned      Phase = "PROVISIONED"
	Healthy          Phase = "HEALTHY"
	Switched         Phase = "SWITCHED"
	Soaking          Phase = "SOAKING"
	Accepted         Phase = "ACCEPTED"
	Retired          Phase = "RETIRED"
	SwitchedBack     Phase = "SWITCHED_BACK"
	Destroying       Phase = "DESTROYING"
	RolledBack       Phase = "ROLLED_BACK"
	Deploying        Phase = "DEPLOYING"
	Committed        Phase = "COMMITTED"
	Restoring        Phase = "RESTORING"
	Restored         Phase = "RESTORED"
	Teardown         Phase = "TEARDOWN"
	Building         Phase = "BUILDING"
	BuildingFallback Phase = "BUILDING_FALLBACK"
	Aborted          Phase = "ABORTED"
)

// transitions is the one table of legal next phases, per strategy. A phase
// with no entry is final.
var transitions = map[Strategy]map[Phase][]Phase{
	BlueGreen: {
		Begun:        {Verified},
		Verified:     {Provisioning},
		Provisioning: {Provisioned, Destroying},
		Provisioned:  {Healthy, Destroying},
		Healthy:      {Switched, Destroying},
		Switched:     {Soaking, SwitchedBack},
		Soaking:      {Accepted, SwitchedBack},
		Accepted:     {Retired},
		SwitchedBack: {Destroying},
		Destroying:   {RolledBack},
	},
	InPlace: {
		Begun:     {Verified},
		Verified:  {Deploying},
		Deploying: {Healthy, Restoring},
		Healthy:   {Committed, Restoring},
		Restoring: {Restored},
	},
	Recreate: {
		Begun:            {Verified},
		Verified:         {Teardown},
		Teardown:         {Building, BuildingFallback},
		Building:         {Healthy, BuildingFallback},
		Healthy:          {Committed, BuildingFallback},
		BuildingFallback: {Restored},
	},
}

// recovery phases undo a failed step: they may start while the step before
// them is still marked in progress or failed.
var recovery = map[Phase]bool{Destroying: true, SwitchedBack: true, Restoring: true, BuildingFallback: true}

// finals are the phases a transaction can be ended in.
var finals = map[Phase]bool{Retired: true, RolledBack: true, Committed: true, Restored: true, Aborted: true}

// IsFinal reports whether a transaction in phase p may be ended.
func IsFinal(p Phase) bool { return finals[p] }

// ParseStrategy validates a strategy name.
func ParseStrategy(s string) (Strategy, error) {
	for _, st := range Strategies {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("unknown strategy %q: use in-place, blue-green or recreate", s)
}

// ParsePhase validates a phase name for a strategy.
func ParsePhase(st Strategy, s string) (Phase, error) {
	p := Phase(s)
	if p == Begun || p == Aborted {
		return p, nil
	}
	for from, tos := range transitions[st] {
		if from == p {
			return p, nil
		}
		for _, to := range tos {
			if to == p {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("%q is not a phase of the %s strategy", s, st)
}

// abortable says, per strategy, in which phases abort is safe, and why not elsewhere.
func abortable(st Strategy, p Phase) (bool, string) {
	switch st {
	case BlueGreen:
		switch p {
		case Begun, Verified, Provisioning, Provisioned, Healthy:
			return true, ""
		}
		return false, "traffic already moved to the candidate (or is moving back): a blue-green transaction can be aborted only before SWITCHED; finish it, or switch back and roll back"
	case InPlace:
		switch p {
		case Begun, Verified:
			return true, ""
		}
		return false, "the deployment may be half-updated: an in-place transaction can be aborted only before DEPLOYING; restore the fallback package instead"
	case Recreate:
		switch p {
		case Begun, Verified:
			return true, ""
		}
		return false, "the old environment may already be torn down: a recreate transaction can be aborted only before TEARDOWN; rebuild the fallback instead"
	}
	return false, "unknown strategy"
}

// Abortable says whether journal abort closes t as it stands: before its
// first change (or with nothing to restore), and why not otherwise.
func Abortable(t *Transaction) (bool, string) {
	if t.Strategy != BlueGreen && t.Fallback == "" {
		return true, ""
	}
	return abortable(t.Strategy, t.Phase)
}
