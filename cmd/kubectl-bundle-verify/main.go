// Command kubectl-bundle-verify verifies a Zarf package offline and optionally stages it.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/verifycmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := verifycmd.Main(ctx, cli.OSStreams(), os.Args)
	stop()
	os.Exit(code)
}
