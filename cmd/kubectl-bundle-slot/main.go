// Command kubectl-bundle-slot builds, deploys and destroys side-by-side environments.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slotcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := slotcmd.Main(ctx, cli.OSStreams(), os.Args)
	stop()
	os.Exit(code)
}
