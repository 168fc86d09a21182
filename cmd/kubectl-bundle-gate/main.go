// Command kubectl-bundle-gate evaluates health gates against a slot or kube context.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/gatecmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := gatecmd.Main(ctx, cli.OSStreams(), os.Args)
	stop()
	os.Exit(code)
}
