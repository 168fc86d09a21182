// Package kubeflags gives the suite's cluster-facing binaries kubectl's
// --kubeconfig, --context and -n flags, resolved by cli-runtime's
// ConfigFlags exactly as kubectl resolves them (KUBECONFIG lists included).
package kubeflags

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/urfave/cli/v3"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
)

// Kubeconfig is the suite's one --kubeconfig flag; what names the file's
// role in this binary.
func Kubeconfig(what string) cli.Flag {
	return &cli.StringFlag{Name: "kubeconfig", Usage: what + " (default $KUBECONFIG, else ~/.kube/config)", TakesFile: true}
}

// Flags returns --kubeconfig, --context and -n/--namespace.
func Flags() []cli.Flag {
	return []cli.Flag{
		Kubeconfig("kubeconfig file"),
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
	kc, ctxName, ns := cmd.String("kubeconfig"), cmd.String("context"), cmd.String("namespace")
	if kubeconfig != "" {
		kc = kubeconfig
	}
	if kubeContext != "" {
		ctxName = kubeContext
	}
	return ResolveNamed(kc, ctxName, ns, kubeconfig != "" || kubeContext != "")
}

// ResolveNamed builds the connection from a kubeconfig file, a context and
// a namespace ("" for kubectl's defaults); fromRecord says a slot's record
// named them (then what is gone is damaged state, exit 3, not usage).
func ResolveNamed(kc, ctxName, ns string, fromRecord bool) (*Target, error) {
	cf := genericclioptions.NewConfigFlags(false)
	cf.KubeConfig, cf.Context, cf.Namespace = &kc, &ctxName, &ns
	loader := cf.ToRawKubeConfigLoader()
	cfg, err := loader.ClientConfig()
	if err != nil {
		err = fmt.Errorf("loading the kubeconfig: %w (check --kubeconfig, --context and $KUBECONFIG)", err)
		// A slot's record naming what is gone is damaged state; the
		// operator naming it is a usage error.
		if !fromRecord && namesNothing(loader, kc, ctxName) {
			return nil, errkind.Wrap(errkind.Usage, err)
		}
		return nil, errkind.Wrap(errkind.Environment, err)
	}
	namespace, _, err := loader.Namespace()
	if err != nil {
		return nil, errkind.Wrap(errkind.Environment, fmt.Errorf("resolving the namespace: %w", err))
	}
	if ctxName == "" {
		raw, err := loader.RawConfig()
		if err == nil {
			ctxName = raw.CurrentContext
		}
	}
	return &Target{Config: cfg, Namespace: namespace, Context: ctxName}, nil
}

// namesNothing reports whether the kubeconfig file or the context named is
// not there.
func namesNothing(loader clientcmd.ClientConfig, kubeconfig, kubeContext string) bool {
	if kubeconfig != "" {
		if _, err := os.Stat(kubeconfig); errors.Is(err, fs.ErrNotExist) {
			return true
		}
	}
	if kubeContext == "" {
		return false
	}
	raw, err := loader.RawConfig()
	if err != nil {
		return false
	}
	_, ok := raw.Contexts[kubeContext]
	return !ok
}
