// Command kubectl-bundle-journal records update transactions crash-safely.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journalcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := journalcmd.Main(ctx, cli.OSStreams(), os.Args)
	stop()
	os.Exit(code)
}
