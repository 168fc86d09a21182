// Package plugins lists the suite's binaries, for what treats them alike:
// generated docs and man pages, and the tests of shared behaviour.
package plugins

import (
	"github.com/urfave/cli/v3"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/gatecmd"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journalcmd"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slotcmd"
	"github.com/kubectl-bundle/kubectl-bundle/internal/switchcmd"
	"github.com/kubectl-bundle/kubectl-bundle/internal/verifycmd"
)

// Plugin is one binary of the suite.
type Plugin struct {
	// Name is the binary's name (kubectl-bundle-verify).
	Name  string
	Build func(kcli.IOStreams) *cli.Command
}

// All lists every plugin, in the order docs/architecture.md names them.
func All() []Plugin {
	return []Plugin{
		{"kubectl-bundle-verify", verifycmd.Command},
		{"kubectl-bundle-slot", func(s kcli.IOStreams) *cli.Command { return slotcmd.Command(s, slotcmd.Deps{}) }},
		{"kubectl-bundle-gate", gatecmd.Command},
		{"kubectl-bundle-switch", switchcmd.Command},
		{"kubectl-bundle-journal", journalcmd.Command},
	}
}
