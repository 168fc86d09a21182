package slotcmd

import (
	"context"
	"fmt"
	"slices"

	"github.com/urfave/cli/v3"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
)

// otherCommand is what blue-green.sh asks for the slot it builds next to
// the active one: the first slot of config.yaml's slots: that is not SLOT
// (as the blue/green preflight pairs them), whatever the slots are named.
// Hidden: operators never call it.
func otherCommand(action cli.ActionFunc) *cli.Command {
	return &cli.Command{Name: "other", Hidden: true, ArgsUsage: "SLOT",
		Usage: "print the configured slot blue/green builds next to SLOT (config.yaml's slots:)", Action: action}
}

func other(_ context.Context, cmd *cli.Command, s *session) error {
	name, err := oneSlot(cmd)
	if err != nil {
		return err
	}
	slots := s.m.Config.Slots
	if name != "" && !slices.Contains(slots, name) {
		return errkind.New(errkind.Environment, "slot %q is not one of the configured slots %v: blue/green builds next to a configured slot (the state dir's config.yaml, slots:)", name, slots)
	}
	for _, o := range slots {
		if o != name && (name != "" || o != slots[0]) {
			_, err := fmt.Fprintln(s.streams.Out, o)
			return err
		}
	}
	return kcli.Usage("blue/green needs two slots, config.yaml's slots: lists %v", slots)
}
