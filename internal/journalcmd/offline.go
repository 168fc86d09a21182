package journalcmd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/offline"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// EventOffline is the history event of an offline check: its Detail says
// which mode ran and what it found.
const EventOffline = "offline"

const offlineDescription = `Confirms, before an update deploys, that the site is cut off from the public
registries, as the site's offline-run.sh does: every endpoint is probed at
once, each within --probe-timeout, every --interval, until none answers or
--wait is over. An http(s) URL is reachable when anything answers it (any
HTTP status, or a certificate we do not trust); HOST:PORT when a TCP
connection opens.

On by default, as in offline-run.sh: the wait is --wait, else config.yaml's
offline.waitSeconds, else 900 seconds (OFFLINE_WAIT_SECONDS' default):
  offline:
    waitSeconds: 900                                          # the default
    endpoints: [https://ghcr.io, https://registry.k8s.io]   # the default
    probeTimeout: 3s                                          # the default
--skip records that the caller enforces isolation and monitors egress
(SKIP_OFFLINE_CHECK=1 in the strategy scripts) and probes nothing.

The mode that ran, the wait and what it found are recorded in the history
(event "offline"), under the open transaction when there is one. The
strategy scripts run this before their first step (SKIP_OFFLINE_CHECK=1
skips it; the wait is --offline-wait SECONDS, else $OFFLINE_WAIT_SECONDS,
else config.yaml, else 900).

Exit 0: offline confirmed, or skipped; 3: an endpoint still answered when
the wait was over (the message names it); 2: a bad flag or endpoint.

Examples:
  kubectl bundle-journal offline-check
  kubectl bundle-journal offline-check --wait 0 --endpoint https://registry.example.com --endpoint 10.0.0.1:443
  kubectl bundle-journal offline-check --skip`

func offlineCommand(streams kcli.IOStreams) *cli.Command {
	return &cli.Command{
		Name:        "offline-check",
		Usage:       "refuse (exit 3) until the public registries are unreachable, and record which offline mode ran",
		Description: offlineDescription,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "wait", Usage: "how long to wait for every endpoint to stop answering: seconds or a duration (0 probes once; default: config.yaml's offline.waitSeconds, else 900)"},
			&cli.StringSliceFlag{Name: "endpoint", Usage: "an endpoint to probe: an http(s) URL or HOST:PORT, repeatable (default: config.yaml's offline.endpoints, else " + strings.Join(offline.DefaultEndpoints, " and ") + ")"},
			&cli.DurationFlag{Name: "probe-timeout", Usage: "how long one probe may take (default: config.yaml's offline.probeTimeout, else 3s)"},
			&cli.DurationFlag{Name: "interval", Value: offline.DefaultInterval, Usage: "how long to sleep between rounds of probes"},
			&cli.BoolFlag{Name: "skip", Usage: "probe nothing: the caller enforces isolation and monitors egress (recorded as caller-monitored)"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error { return offlineCheck(ctx, streams, cmd) },
	}
}

// offlineSettings merges the flags over config.yaml's offline: section
// over the defaults (offlineWait says which wait).
func offlineSettings(cmd *cli.Command, cfg slot.OfflinePolicy) (o offline.Options, err error) {
	o.Endpoints, o.Interval = cfg.Endpoints, cmd.Duration("interval")
	var flag *string
	if cmd.IsSet("wait") {
		w := cmd.String("wait")
		flag = &w
	}
	if o.Wait, err = offlineWait(flag, cfg.WaitSeconds); err != nil {
		return o, kcli.Usage("--wait: %v", err)
	}
	if cfg.ProbeTimeout != "" {
		o.ProbeTimeout, _ = time.ParseDuration(cfg.ProbeTimeout) // validated with the config
	}
	if cmd.IsSet("probe-timeout") {
		if o.ProbeTimeout = cmd.Duration("probe-timeout"); o.ProbeTimeout <= 0 {
			return o, kcli.Usage("--probe-timeout must be more than 0")
		}
	}
	if eps := cmd.StringSlice("endpoint"); len(eps) > 0 {
		o.Endpoints = eps
	}
	for _, e := range o.Endpoints {
		if err := offline.ParseEndpoint(e); err != nil {
			return o, kcli.Usage("--endpoint: %v", err)
		}
	}
	if o.Interval <= 0 {
		return o, kcli.Usage("--interval must be more than 0")
	}
	return o, nil
}

// offlineWait is how long the check waits: flag (--wait, nil when not
// given), else config.yaml's offline.waitSeconds, else offline-run.sh's
// default of 900 seconds. The check is never off: SKIP_OFFLINE_CHECK=1
// (--skip) is the way not to probe.
func offlineWait(flag *string, cfgSeconds *int) (time.Duration, error) {
	switch {
	case flag != nil:
		return parseWait(*flag)
	case cfgSeconds != nil:
		if *cfgSeconds < 0 || *cfgSeconds > maxWaitSeconds {
			return 0, fmt.Errorf("config.yaml's offline.waitSeconds %d: use 0 to %d seconds", *cfgSeconds, maxWaitSeconds)
		}
		return time.Duration(*cfgSeconds) * time.Second, nil
	}
	return offline.DefaultWait, nil
}

// maxWaitSeconds caps the wait (offline.MaxWaitSeconds).
const maxWaitSeconds = offline.MaxWaitSeconds

// parseWait reads seconds, as $OFFLINE_WAIT_SECONDS spells them, or a
// duration, from 0 to a day.
func parseWait(s string) (time.Duration, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 || n > maxWaitSeconds {
			return 0, fmt.Errorf("%q: use 0 to %d seconds", s, maxWaitSeconds)
		}
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > maxWaitSeconds*time.Second {
		return 0, fmt.Errorf("%q is neither seconds nor a duration from 0 to 24h (e.g. 900 or 15m)", s)
	}
	return d, nil
}

func offlineCheck(ctx context.Context, streams kcli.IOStreams, cmd *cli.Command) error {
	if cmd.NArg() != 0 {
		return kcli.Usage("offline-check takes no arguments (see --help)")
	}
	common, err := kcli.ParseCommon(cmd)
	if err != nil {
		return err
	}
	cfg, err := offlineConfig(common.StateDir)
	if err != nil {
		return err
	}
	o, err := offlineSettings(cmd, cfg)
	if err != nil {
		return err
	}
	var r *offline.Result
	switch {
	case cmd.Bool("skip"):
		r = &offline.Result{Mode: offline.ModeCallerMonitored}
	default:
		if !common.Quiet {
			fmt.Fprintf(streams.ErrOut, "isolation mode: self-checked (waiting up to %s for %s to become unreachable)\n", o.Wait, strings.Join(orDefault(o.Endpoints), ", "))
			o.Progress = func(up []offline.Probe, left time.Duration) {
				var names []string
				for _, p := range up {
					names = append(names, p.Endpoint)
				}
				fmt.Fprintf(streams.ErrOut, "still reachable: %s (%s left)\n", strings.Join(names, ", "), left.Round(time.Second))
			}
		}
		if r, err = offline.Check(ctx, o); err != nil {
			return kcli.Environment(fmt.Errorf("checking isolation: %w", err))
		}
	}
	if err := recordOffline(streams, cmd, r); err != nil {
		return err
	}
	if common.Output == kcli.OutputJSON {
		if err := kcli.WriteJSON(streams.Out, r); err != nil {
			return kcli.Environment(err)
		}
	} else if !common.Quiet {
		fmt.Fprintf(streams.Out, "offline: %s\n", r.Summary())
	}
	if r.Mode == offline.ModeSelfChecked && !r.Offline {
		return errkind.New(errkind.Environment, "the site is not offline: %s; cut the uplink (or set SKIP_OFFLINE_CHECK=1 when the caller enforces isolation) and run again", strings.TrimPrefix(r.Summary(), "self-checked: "))
	}
	return nil
}

func orDefault(eps []string) []string {
	if len(eps) == 0 {
		return offline.DefaultEndpoints
	}
	return eps
}

// offlineConfig reads config.yaml's offline: section without creating the
// state dir (none yet: no section).
func offlineConfig(stateDir string) (slot.OfflinePolicy, error) {
	dir, err := state.Resolve(stateDir)
	if err != nil {
		return slot.OfflinePolicy{}, kcli.Environment(err)
	}
	file := dir + string(os.PathSeparator) + "config.yaml"
	if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
		return slot.OfflinePolicy{}, nil
	}
	cfg, err := slot.LoadConfig(file, os.Getenv, nil)
	if err != nil {
		return slot.OfflinePolicy{}, err
	}
	return cfg.Offline, nil
}

// recordOffline writes the check's mode and finding to the history, under
// the open transaction if there is one; the state lock is taken only now,
// not while waiting.
func recordOffline(streams kcli.IOStreams, cmd *cli.Command, r *offline.Result) error {
	s, err := openSession(streams, cmd, true)
	if err != nil {
		return err
	}
	defer s.close()
	status := journal.StatusDone
	if r.Mode == offline.ModeSelfChecked && !r.Offline {
		status = journal.StatusFailed
	}
	if err := s.j.Record(journal.Event{Type: EventOffline, Status: status, Detail: r.Summary()}); err != nil {
		return kcli.Environment(fmt.Errorf("recording the offline check in the history: %w", err))
	}
	return nil
}
