package slotcmd

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v3"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
)

// workloadCommand is kubectl bundle-slot workload-kubeconfig: a workload
// cluster's kubeconfig, as offline-run.sh wrote it for the operator
// (/tmp/airgap-wl.kubeconfig), from the slot that runs it.
func workloadCommand(action cli.ActionFunc) *cli.Command {
	return &cli.Command{
		Name: "workload-kubeconfig",
		Description: "Examples:\n" +
			"  kubectl bundle-slot workload-kubeconfig > airgap-wl.kubeconfig\n" +
			"  kubectl bundle-slot workload-kubeconfig airgap-wl-b --slot b --file /tmp/airgap-wl.kubeconfig\n" +
			"  kubectl bundle-slot workload-kubeconfig --merge   # then: kubectl --context kind-airgap-wl get nodes\n\n" +
			"The kubeconfig is the one Cluster API keeps in the slot's management cluster (secret\n" +
			"default/CLUSTER-kubeconfig), its server moved to the host port Docker published for the\n" +
			"cluster's load balancer (CLUSTER-lb), since a macOS host has no route to container\n" +
			"addresses. Its contexts are kind-CLUSTER and kind-ALIAS, the cluster's name without the\n" +
			"slot's suffix (kind-airgap-wl for airgap-wl-b): once --merge wrote it into the kubeconfig,\n" +
			"kubectl bundle-switch moves kind-ALIAS to the slot it makes active, as it moves the\n" +
			"management cluster's context. Only the active slot's clusters get kind-ALIAS: with --slot\n" +
			"naming another slot, they come under kind-CLUSTER alone.",
		Usage:     "print, write or merge the kubeconfig of a workload cluster the active slot (or --slot) runs",
		ArgsUsage: "[CLUSTER]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "slot", Usage: "the slot whose workload cluster (default: the active slot)"},
			&cli.StringFlag{Name: "file", Usage: "write the kubeconfig to this file (mode 0600) instead of standard output", TakesFile: true},
			&cli.BoolFlag{Name: "merge", Usage: "merge the contexts into the kubeconfig (--kubeconfig, else $KUBECONFIG's first file, else ~/.kube/config), keeping every other entry"},
		},
		Action: action,
	}
}

func workloadKubeconfig(ctx context.Context, cmd *cli.Command, s *session) error {
	if cmd.Args().Len() > 1 {
		return kcli.Usage("at most one CLUSTER (see --help)")
	}
	if cmd.String("file") != "" && cmd.Bool("merge") {
		return kcli.Usage("--file and --merge exclude each other")
	}
	// The pointer read strictly: a damaged or lost one is said with its
	// repair (never "no slot is active"), and with --slot it gives no
	// slot the alias.
	active, aerr := site.Read(s.dir).Active()
	name := cmd.String("slot")
	if name == "" {
		if aerr != nil {
			return aerr
		}
		if name = active; name == "" {
			return errkind.New(errkind.Usage, "no slot is active: name the slot with --slot")
		}
	}
	ws, err := s.m.Workloads(ctx, name, cmd.Args().First())
	if err != nil {
		return err
	}
	if len(ws) == 0 {
		return errkind.New(errkind.Environment, "slot %s runs no workload cluster (config.yaml's workloadClusters names none)", name)
	}
	if aerr != nil || name != active {
		// The stable alias context follows the slot that serves (the
		// switch moves it): another slot's clusters come under their own
		// names only, or kind-airgap-wl would name a cluster that does not
		// serve.
		ws = withoutAlias(ws)
	}
	switch {
	case cmd.Bool("merge"):
		file := cmd.String("kubeconfig")
		if file == "" {
			file = clientcmd.NewDefaultClientConfigLoadingRules().GetDefaultFilename()
		}
		if err := slot.MergeWorkloads(file, ws); err != nil {
			return err
		}
		if s.common.Output == kcli.OutputJSON {
			return kcli.WriteJSON(s.streams.Out, ws)
		}
		for _, w := range ws {
			if !s.common.Quiet {
				fmt.Fprintf(s.streams.Out, "%s, merged into %s\n", w, file)
			}
		}
		return nil
	case cmd.String("file") != "":
		if err := slot.WriteKubeconfig(cmd.String("file"), combined(ws)); err != nil {
			return err
		}
		if s.common.Output == kcli.OutputJSON {
			return kcli.WriteJSON(s.streams.Out, ws)
		}
		for _, w := range ws {
			if !s.common.Quiet {
				fmt.Fprintf(s.streams.Out, "%s, written to %s\n", w, cmd.String("file"))
			}
		}
		return nil
	case s.common.Output == kcli.OutputJSON:
		return kcli.WriteJSON(s.streams.Out, ws)
	}
	b, err := clientcmd.Write(*combined(ws))
	if err != nil {
		return err
	}
	_, err = s.streams.Out.Write(b)
	return err
}

// withoutAlias is ws with each alias context left out (a slot that does
// not serve): AliasContext is then the cluster's own context.
func withoutAlias(ws []*slot.Workload) []*slot.Workload {
	out := make([]*slot.Workload, len(ws))
	for i, w := range ws {
		c := *w
		if c.AliasContext != c.Context {
			cfg := c.Config.DeepCopy()
			delete(cfg.Contexts, c.AliasContext)
			c.Config, c.AliasContext = cfg, c.Context
		}
		out[i] = &c
	}
	return out
}

// combined is the kubeconfig of every workload of ws, the first one's
// alias context current.
func combined(ws []*slot.Workload) *clientcmdapi.Config {
	out := clientcmdapi.NewConfig()
	slot.AddWorkloads(out, ws)
	out.CurrentContext = ws[0].AliasContext
	return out
}
