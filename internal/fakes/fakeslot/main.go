// Command fakeslot is the slot plugin as the e2e suite runs it: the real
// plugin (slotcmd) with the fake kind in-process, the probe of the fakes'
// ports and no sleeps between retries. docker and zarf are the fake
// programs (fakeprog), found on PATH as the real ones would be. The suite
// builds it once, with the other plugins, so that a plugin call starts a
// plugin binary, not a copy of the whole test binary.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/fakes"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slotcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := slotcmd.MainWith(ctx, cli.OSStreams(), os.Args,
		slotcmd.Deps{Kind: fakes.Kind{}, Probe: fakes.Probe, Sleep: func(time.Duration) {}})
	stop()
	os.Exit(code)
}
