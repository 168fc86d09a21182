package journalcmd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v3"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/plan"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
)

// planCommand is the planner an operator asks before a run: what a
// strategy's command would do on this site now (the scripts' --dry-run).
func planCommand(streams kcli.IOStreams) *cli.Command {
	return &cli.Command{
		Name:      "plan",
		Usage:     "the steps a strategy's apply, accept or revert would run on this site now, which slot each changes and what it loses; nothing changes",
		ArgsUsage: " ",
		Description: `The planner, as the strategy scripts' --dry-run prints it: each step
the command would run (the journal phase it records and the plugin
commands that do it), its state (done, interrupted, next, pending: an
open transaction resumes where it stands), the slot it changes, and what
it discards for good; then what a failure runs instead. When the command
would refuse now (damaged state, another transaction open, a fallback
that is not usable, no active slot for blue-green), the plan says why and
exits with the code the command would (3 or 4). Nothing is changed and no
lock is taken.

Examples:
  kubectl bundle-journal plan --strategy in-place --package ./zarf-package-krops-arm64-1.2.0.tar.zst --key ./cosign.pub
  kubectl bundle-journal plan --strategy blue-green --op revert
  in-place.sh --dry-run ./zarf-package-krops-arm64-1.2.0.tar.zst --key ./cosign.pub     # the same, from the script
  blue-green.sh apply --dry-run ./zarf-package-krops-arm64-1.2.0.tar.zst -o json`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "strategy", Usage: "in-place, blue-green or recreate", Required: true},
			&cli.StringFlag{Name: "op", Usage: "blue-green: apply, accept or revert (in-place and recreate: apply)", Value: plan.Apply},
			&cli.StringFlag{Name: "package", Usage: "the package to apply (a path; its sha256 is taken)", TakesFile: true},
			&cli.StringFlag{Name: "gate", Usage: "the gate file the run would gate with", TakesFile: true},
			&cli.StringFlag{Name: "gate-timeout", Usage: "the run's --gate-timeout"},
			&cli.StringFlag{Name: "switch-mode", Usage: "blue-green: " + journal.SwitchModes},
			&cli.StringFlag{Name: "key", Usage: "the public key the run verifies the package with", TakesFile: true},
			&cli.StringFlag{Name: "certificate-identity", Usage: "the keyless signer the run verifies the package with"},
			&cli.StringFlag{Name: "certificate-oidc-issuer", Usage: "the keyless signer's OIDC issuer"},
			&cli.StringFlag{Name: "trusted-root", Usage: "the trusted root of a keyless signer", TakesFile: true},
		},
		Action: func(_ context.Context, cmd *cli.Command) error { return planCmd(streams, cmd) },
	}
}

func planCmd(streams kcli.IOStreams, cmd *cli.Command) error {
	st, err := journal.ParseStrategy(cmd.String("strategy"))
	if err != nil {
		return kcli.Usage("%v", err)
	}
	op := cmd.String("op")
	switch {
	case op == plan.Apply:
	case st == journal.BlueGreen && (op == plan.Accept || op == plan.Revert):
	default:
		return kcli.Usage("--op %s: %s takes %s", op, st, map[bool]string{true: "apply, accept or revert", false: "apply only"}[st == journal.BlueGreen])
	}
	mode, err := journal.ParseSwitchMode(cmd.String("switch-mode"))
	if err != nil {
		return kcli.Usage("--switch-mode: %v", err)
	}
	in := plan.Input{Strategy: st, Op: op, Package: absPath(cmd.String("package")), SwitchMode: mode}
	if op == plan.Apply && in.Package == "" {
		return kcli.Usage("--package is required to plan an apply")
	}
	for _, f := range []string{"key", "certificate-identity", "certificate-oidc-issuer", "trusted-root"} {
		if v := cmd.String(f); v != "" {
			if f == "key" || f == "trusted-root" {
				v = absPath(v)
			}
			in.Verify = append(in.Verify, "--"+f, v)
		}
	}
	if g, gt := cmd.String("gate"), cmd.String("gate-timeout"); g != "" || gt != "" {
		in.Gate = &journal.Gate{File: absPath(g), Timeout: gt}
	}
	s, err := openSession(streams, cmd, false)
	if err != nil {
		return err
	}
	if cfg, err := slot.LoadConfig(s.dir.Join("config.yaml"), os.Getenv, nil); err == nil {
		in.Slots = cfg.Slots
	} else if st == journal.BlueGreen {
		return err
	}
	p := plan.Make(s.Session, in)
	p.Code = 0
	if p.Err() != nil {
		p.Code = kcli.ExitCode(p.Err())
	}
	if s.common.Output == kcli.OutputJSON {
		if err := kcli.WriteJSON(streams.Out, p); err != nil {
			return err
		}
		return p.Err()
	}
	if _, err := fmt.Fprint(streams.Out, renderPlan(p)); err != nil {
		return err
	}
	return p.Err()
}

// renderPlan is a plan as an operator reads it.
func renderPlan(p *plan.Plan) string {
	var b strings.Builder
	what := string(p.Strategy) + " " + p.Op
	if p.Package != "" && p.Op == plan.Apply {
		what += " of " + p.Package
	}
	fmt.Fprintf(&b, "plan: %s (nothing is changed)\n", what)
	var facts []string
	if p.Transaction != "" {
		facts = append(facts, "resumes transaction "+p.Transaction)
	}
	if p.Target != "" {
		facts = append(facts, "package "+short(p.Target))
	}
	if p.Serving != "" {
		facts = append(facts, "slot "+p.Serving+" serves")
	}
	if p.Active != "" && p.Active != p.Serving {
		if p.Candidate != "" {
			facts = append(facts, "previous slot "+p.Active)
		} else {
			facts = append(facts, "updates slot "+p.Active)
		}
	}
	if p.Candidate != "" {
		facts = append(facts, "candidate slot "+p.Candidate)
	}
	if p.Fallback != "" {
		facts = append(facts, "fallback "+short(p.Fallback))
	}
	if len(facts) > 0 {
		fmt.Fprintf(&b, "  %s\n", strings.Join(facts, ", "))
	}
	if p.Refused != "" {
		fmt.Fprintf(&b, "REFUSED now: %s\n", p.Refused)
		if p.Instead != "" {
			fmt.Fprintf(&b, "  first: %s\n", p.Instead)
		}
		fmt.Fprintln(&b, "once that is fixed, the run would:")
	}
	steps := func(list []plan.Step, n int) int {
		for _, s := range list {
			n++
			name := string(s.Phase)
			if name == "" {
				name = "(check)"
			}
			fmt.Fprintf(&b, "  %d. %-17s %-11s %s\n", n, name, s.State, s.Changes)
			for _, c := range s.Run {
				fmt.Fprintf(&b, "       runs: %s\n", c)
			}
			for _, l := range s.Loses {
				fmt.Fprintf(&b, "       loses: %s\n", l)
			}
		}
		return n
	}
	n := steps(p.Steps, 0)
	if len(p.OnFailure) > 0 {
		fmt.Fprintln(&b, "if a step fails before the point of no return, instead:")
		steps(p.OnFailure, n)
	}
	return b.String()
}

func short(digest string) string { return digest[:min(12, len(digest))] }

func absPath(p string) string {
	if p == "" {
		return ""
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
