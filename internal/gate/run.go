package gate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/runner"
)

// Options tune a gate run.
type Options struct {
	// Timeout bounds the wait (0: evaluate once).
	Timeout time.Duration
	// Once evaluates every check once and returns.
	Once bool
	// PollInterval overrides the gate's fallback interval when positive.
	PollInterval time.Duration
	// Runner runs docker for workload checks with useDockerPort.
	Runner runner.Runner
	// CheckTimeouts bounds top-level checks by name (Gate.CheckTimeouts):
	// one still failing at its timeout fails the gate then.
	CheckTimeouts map[string]time.Duration
	// OnEvaluate, when set, is called after every evaluation (progress).
	OnEvaluate func(results []Result)
	// SlotRegistries are what an images check's SlotRegistry entry
	// stands for besides zarf's in-cluster registry: the registry of the
	// slot under gate (127.0.0.1:PORT), when the gate runs with --slot.
	SlotRegistries []string
	// Slot is the slot under gate (--slot): SlotToken in names stands for
	// it; without it "-@slot" is dropped.
	Slot string
}

// Report is the outcome of a gate run.
type Report struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Gate       string    `json:"gate"`
	Server     string    `json:"server"`
	Passed     bool      `json:"passed"`
	TimedOut   bool      `json:"timedOut"`
	Started    time.Time `json:"started"`
	Finished   time.Time `json:"finished"`
	Elapsed    float64   `json:"elapsedSeconds"`
	// Evaluations counts how many times the checks were evaluated.
	Evaluations int      `json:"evaluations"`
	Checks      []Result `json:"checks"`
	// ChecksTimedOut names the checks that were still failing at their own
	// timeout.
	ChecksTimedOut []string `json:"checksTimedOut,omitempty"`
}

// expired returns the top-level checks still failing whose deadline is
// past, and the earliest deadline still ahead of a failing check.
func expired(results []Result, deadlines map[string]time.Time, now time.Time) ([]string, time.Time) {
	var out []string
	var next time.Time
	seen := map[string]bool{}
	for _, r := range results {
		if r.Status == Pass {
			continue
		}
		top, _, _ := strings.Cut(r.Name, "/")
		dl, ok := deadlines[top]
		switch {
		case !ok || seen[top]:
		case !now.Before(dl):
			out = append(out, top)
			seen[top] = true
		case next.IsZero() || dl.Before(next):
			next = dl
		}
	}
	return out, next
}

// Failed returns the results that did not pass.
func (r *Report) Failed() []Result {
	var out []Result
	for _, c := range r.Checks {
		if c.Status != Pass {
			out = append(out, c)
		}
	}
	return out
}

type evaluator struct {
	w            *watcher
	run          runner.Runner
	workloads    map[string]*Cluster
	staleMappers bool
	// slotRegistries: see Options.SlotRegistries.
	slotRegistries []string
}

func (e *evaluator) evalChecks(ctx context.Context, c *Cluster, checks []Check) []Result {
	var out []Result
	for i := range checks {
		ch := &checks[i]
		var rows []Result
		switch {
		case ch.Resource != nil:
			rows = []Result{e.resource(ctx, c, ch.Resource)}
		case ch.Field != nil:
			rows = []Result{e.field(ctx, c, ch.Field)}
		case ch.Images != nil:
			rows = []Result{e.images(ctx, c, ch.Images)}
		case ch.Pods != nil:
			rows = []Result{e.podsCheck(ctx, c, ch.Pods)}
		case ch.Nodes != nil:
			rows = []Result{e.nodesCheck(ctx, c, ch.Nodes)}
		case ch.Workload != nil:
			rows = e.workload(ctx, c, ch)
		case ch.Zarf != nil:
			rows = e.zarf(ctx, c, ch.Zarf)
		}
		rows[0].Name = ch.Name
		for j := 1; j < len(rows); j++ {
			rows[j].Name = ch.Name + "/" + rows[j].Name
		}
		out = append(out, rows...)
	}
	return out
}

// Reader answers a gate's checks for the cluster at host in place of its
// API server: the cluster reads of an in-process test (WithReader).
type Reader func(ctx context.Context, g *Gate, host string) ([]Result, error)

type readerKey struct{}

// WithReader returns ctx with read standing for every cluster a gate run
// under it reads: Run evaluates once through it (an error is an
// unreachable cluster) and does not contact a server.
func WithReader(ctx context.Context, read Reader) context.Context {
	return context.WithValue(ctx, readerKey{}, read)
}

// Run evaluates g against c until every check passes, the timeout passes,
// or ctx ends. It re-evaluates whenever a watched object changes, and every
// poll interval as a fallback. An unreachable cluster is an
// *UnreachableError; a failing gate is a report with Passed false.
func Run(ctx context.Context, g *Gate, c *Cluster, opts Options) (*Report, error) {
	g = g.ForSlot(opts.Slot)
	start := time.Now()
	rep := &Report{APIVersion: APIVersion, Kind: "GateReport", Gate: g.Metadata.Name, Server: c.Host(), Started: start}
	finish := func() (*Report, error) {
		rep.Finished = time.Now()
		rep.Elapsed = rep.Finished.Sub(start).Seconds()
		return rep, nil
	}
	if read, ok := ctx.Value(readerKey{}).(Reader); ok {
		// A test's stand-in for the cluster: one evaluation, no watch.
		results, err := read(ctx, g, c.Host())
		if err != nil {
			return nil, &UnreachableError{Host: c.Host(), Err: err}
		}
		rep.Checks, rep.Evaluations, rep.Passed = results, 1, true
		for _, r := range results {
			rep.Passed = rep.Passed && r.Status == Pass
		}
		return finish()
	}
	if err := c.Ping(ctx, 10*time.Second); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	if opts.Timeout > 0 && !opts.Once {
		runCtx, cancel = context.WithTimeout(ctx, opts.Timeout)
	}
	w := newWatcher(runCtx)
	defer func() { cancel(); w.wait() }()
	e := &evaluator{w: w, run: opts.Runner, workloads: map[string]*Cluster{}, slotRegistries: opts.SlotRegistries}
	poll := g.Poll()
	if opts.PollInterval > 0 {
		poll = opts.PollInterval
	}
	ticker := time.NewTicker(poll)
	defer ticker.Stop()
	deadlines := map[string]time.Time{}
	for name, d := range opts.CheckTimeouts {
		if d < opts.Timeout {
			deadlines[name] = start.Add(d)
		}
	}
	for {
		e.staleMappers = false
		results := e.evalChecks(runCtx, c, g.Spec.Checks)
		if rep.Checks != nil && (runCtx.Err() != nil || cutByDeadline(results)) {
			// Cut off mid-evaluation: the previous complete result stands.
			rep.TimedOut = errors.Is(runCtx.Err(), context.DeadlineExceeded)
			return finish()
		}
		rep.Evaluations++
		rep.Checks = results
		rep.Passed = len(rep.Failed()) == 0
		if opts.OnEvaluate != nil {
			opts.OnEvaluate(results)
		}
		if rep.Passed || opts.Once || opts.Timeout <= 0 {
			return finish()
		}
		late, next := expired(results, deadlines, time.Now())
		if len(late) > 0 {
			rep.TimedOut, rep.ChecksTimedOut = true, late
			for i := range rep.Checks {
				top, _, _ := strings.Cut(rep.Checks[i].Name, "/")
				if slices.Contains(late, top) && rep.Checks[i].Status != Pass {
					rep.Checks[i].Message += fmt.Sprintf(" (still failing at its timeout, %s)", opts.CheckTimeouts[top])
				}
			}
			return finish()
		}
		var checkDeadline <-chan time.Time
		var timer *time.Timer
		if !next.IsZero() {
			timer = time.NewTimer(time.Until(next))
			checkDeadline = timer.C
		}
		select {
		case <-checkDeadline:
		case <-w.wake:
		case <-ticker.C:
			e.staleMappers = true
		case <-runCtx.Done():
			rep.TimedOut = errors.Is(runCtx.Err(), context.DeadlineExceeded)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return finish()
		}
		if timer != nil {
			timer.Stop()
		}
		if e.staleMappers {
			c.mapper.Reset()
			for _, wl := range e.workloads {
				wl.mapper.Reset()
			}
		}
	}
}

// cutByDeadline reports whether an evaluation was cut off by the run's
// deadline before the context says so: client-go's rate limiter refuses a
// request whose wait would pass the deadline ("would exceed context
// deadline") while the context is still live. Such a result says nothing
// about the cluster; the previous complete one stands.
func cutByDeadline(results []Result) bool {
	for _, r := range results {
		if r.Status != Pass && strings.Contains(r.Message, "would exceed context deadline") {
			return true
		}
	}
	return false
}
