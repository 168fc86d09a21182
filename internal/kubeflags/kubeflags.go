// Package kubeflags gives the suite's cluster-facing binaries kubectl's
// --kubeconfig, --context and -n flags, resolved by cli-runtime's
// ConfigFlags exactly as kubectl resolves them (KUBECONFIG lists included).
package kubeflags

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v3"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
)

// Flags returns --kubeconfig, --context and -n/--namespace.
func Flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "kubeconfig", Usage: "kubeconfig file (default $KUBECONFIG, else ~/.kube/config)", TakesFile: true},
		&cli.StringFlag{Name: "context", Usage: "kube context to use (default the current context)"},
		&cli.StringFlag{Name: "namespace", Aliases: []string{"n"}, Usage: "namespace for checks that name none (default the context's)"},
	}
}

// Target is a resolved cluster connection.
type Target struct {
	Config    *rest.Config
	Namespace string
	Context   string
}

// Set reports whether any of the kube flags was given.
func Set(cmd *cli.Command) bool {
	return cmd.IsSet("kubeconfig") || cmd.IsSet("context")
}

// Resolve builds the connection from the flags, with kubeconfig and
// context overriding the flags when non-empty (a slot's record).
func Resolve(_ context.Context, cmd *cli.Command, kubeconfig, kubeContext string) (*Target, error) {
	cf := genericclioptions.NewConfigFlags(false)
	kc, ctxName, ns := cmd.String("kubeconfig"), cmd.String("context"), cmd.String("namespace")
	if kubeconfig != "" {
		kc = kubeconfig
	}
	if kubeContext != "" {
		ctxName = kubeContext
	}
	cf.KubeConfig, cf.Context, cf.Namespace = &kc, &ctxName, &ns
	loader := cf.ToRawKubeConfigLoader()
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w (check --kubeconfig, --context and $KUBECONFIG)", err)
	}
	namespace, _, err := loader.Namespace()
	if err != nil {
		return nil, fmt.Errorf("resolving the namespace: %w", err)
	}
	if ctxName == "" {
		raw, err := loader.RawConfig()
		if err == nil {
			ctxName = raw.CurrentContext
		}
	}
	return &Target{Config: cfg, Namespace: namespace, Context: ctxName}, nil
}
