// Command kubectl-bundle-switch moves the active slot and the aliases that follow it.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/switchcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := switchcmd.Main(ctx, cli.OSStreams(), os.Args)
	stop()
	os.Exit(code)
}
