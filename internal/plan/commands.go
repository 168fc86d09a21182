package plan

import (
	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
)

// Commands are the plugin commands of a strategy's steps, written once:
// the plan lists them (journal plan, the scripts' --dry-run) and the run
// runs them (journal advance), so that what a dry run shows is what runs.
// The run adds only -q where it keeps a step's own output short.
type Commands struct {
	// Package is the package's path (apply).
	Package string
	// Verify are verify's flags (--key ABS, or the keyless signer's).
	Verify []string
	// Gate are the gate's flags (-f FILE, --timeout D).
	Gate []string
}

// GateFlags are the gate plugin's flags for g (nil: none).
func GateFlags(g *journal.Gate) []string {
	var out []string
	if g != nil && g.File != "" {
		out = append(out, "-f", g.File)
	}
	if g != nil && g.Timeout != "" {
		out = append(out, "--timeout", g.Timeout)
	}
	return out
}

// VerifyStage verifies the package offline and stages it (VERIFIED).
func (c Commands) VerifyStage() advice.Cmd {
	return advice.Plugin("verify", append([]string{c.Package, "--stage"}, c.Verify...)...)
}

// Deploy deploys the staged package digest into slot (with the key
// verify was given, which deploy checks again).
func (c Commands) Deploy(slot, digest string) advice.Cmd {
	return advice.Plugin("slot", append([]string{"deploy", slot, digest}, c.key()...)...)
}

// GateOf gates slot and records the result, with extra flags first
// (--management-only).
func (c Commands) GateOf(slot string, extra ...string) advice.Cmd {
	args := append(append([]string{"--slot", slot, "--record"}, extra...), c.Gate...)
	return advice.Plugin("gate", args...)
}

// GateBy gates slot without recording, as an operator looks at what fails.
func (c Commands) GateBy(slot string) advice.Cmd {
	return advice.Plugin("gate", append([]string{"--slot", slot}, c.Gate...)...)
}

func (c Commands) key() []string {
	for i, a := range c.Verify {
		if a == "--key" && i+1 < len(c.Verify) {
			return []string{"--key", c.Verify[i+1]}
		}
	}
	return nil
}

// Preflight checks the machine can hold slot beside the active one with
// the package digest (blue-green, read only).
func Preflight(slot, digest string) advice.Cmd {
	return advice.Plugin("slot", "preflight", slot, "--package", digest, "--blue-green")
}

// Create creates slot for the package digest.
func Create(slot, digest string) advice.Cmd {
	return advice.Plugin("slot", "create", slot, "--package", digest)
}

// Destroy destroys slot; what it holds was listed and confirmed before
// (--yes); force: the active slot (recreate's teardown).
func Destroy(slot string, force bool) advice.Cmd {
	if force {
		return advice.Plugin("slot", "destroy", slot, "--force", "--yes")
	}
	return advice.Plugin("slot", "destroy", slot, "--yes")
}

// SwitchTo switches to slot (blue-green's SWITCHED).
func SwitchTo(slot string) advice.Cmd { return advice.Plugin("switch", "to", slot) }

// SwitchAccept ends the soak (ACCEPTED).
func SwitchAccept() advice.Cmd { return advice.Plugin("switch", "accept") }

// SwitchBack switches back to the previous slot (SWITCHED_BACK), gating
// as the run does.
func SwitchBack(g *journal.Gate, force bool) advice.Cmd {
	args := []string{"back"}
	if g != nil && g.File != "" {
		args = append(args, "--gate", g.File)
	}
	if g != nil && g.Timeout != "" {
		args = append(args, "--gate-timeout", g.Timeout)
	}
	if force {
		args = append(args, "--force")
	}
	return advice.Plugin("switch", args...)
}

// End closes the transaction.
func End() advice.Cmd { return advice.Plugin("journal", "end") }

// Rebuild are recreate's BUILDING (and BUILDING_FALLBACK) commands, run
// as one journal step (kubectl bundle-journal rebuild runs them in order):
// what a killed build left of slot is destroyed (the teardown before it
// was confirmed), then slot is created and digest deployed into it.
func (c Commands) Rebuild(slot, digest string) []advice.Cmd {
	return []advice.Cmd{Destroy(slot, true), Create(slot, digest), c.Deploy(slot, digest)}
}

// RebuildStep is the one command that runs Rebuild as a journal step.
func (c Commands) RebuildStep(slot, digest string) advice.Cmd {
	return advice.Plugin("journal", append([]string{"rebuild", slot, digest}, c.key()...)...)
}
