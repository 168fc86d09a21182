// Package offline confirms that a site is cut off from the public
// registries before an update deploys, as the site's offline-run.sh does:
// it probes each endpoint, with a timeout per probe, until none answers or
// the wait is over.
package offline

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// DefaultEndpoints are the registries offline-run.sh probes.
var DefaultEndpoints = []string{"https://ghcr.io", "https://registry.k8s.io"}

// Defaults of a check: offline-run.sh's OFFLINE_WAIT_SECONDS (900), its
// curl --max-time 3 and its sleep 5.
const (
	DefaultWait = 900 * time.Second
	// MaxWaitSeconds caps a wait (a day), wherever it is set: more is a
	// typo, and more than time.Duration holds would wrap to a short or
	// negative wait.
	MaxWaitSeconds      = 86400
	DefaultProbeTimeout = 3 * time.Second
	DefaultInterval     = 5 * time.Second
)

// Modes of a check, as recorded in the history.
const (
	// ModeSelfChecked: the endpoints were probed until none answered.
	ModeSelfChecked = "self-checked"
	// ModeCallerMonitored: the caller enforces isolation and monitors
	// egress (SKIP_OFFLINE_CHECK=1); nothing was probed.
	ModeCallerMonitored = "caller-monitored"
)

// ParseEndpoint checks an endpoint: an http:// or https:// URL (probed
// with a request: any answer means reachable) or HOST:PORT (probed with a
// TCP connection).
func ParseEndpoint(s string) error {
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil {
			return fmt.Errorf("endpoint %q: %w", s, err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("endpoint %q: want an http:// or https:// URL with a host, or HOST:PORT", s)
		}
		return nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" || port == "" {
		return fmt.Errorf("endpoint %q: want an http:// or https:// URL, or HOST:PORT", s)
	}
	return nil
}

// Probe is the outcome of one probe of one endpoint.
type Probe struct {
	Endpoint  string `json:"endpoint"`
	Reachable bool   `json:"reachable"`
	// Detail is what answered (an HTTP status, a connection) or why
	// nothing did.
	Detail string `json:"detail"`
}

// ProbeOne probes endpoint once, within timeout.
func ProbeOne(ctx context.Context, endpoint string, timeout time.Duration) Probe {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p := Probe{Endpoint: endpoint}
	if !strings.Contains(endpoint, "://") {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", endpoint)
		if err != nil {
			p.Detail = err.Error()
			return p
		}
		p.Reachable, p.Detail = true, "TCP connection to "+c.RemoteAddr().String()
		c.Close()
		return p
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, endpoint, nil)
	if err != nil {
		p.Detail = err.Error()
		return p
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}).Do(req)
	if err != nil {
		// A certificate we do not trust still came from something that
		// answered: a proxy or an interceptor is egress too.
		var unknown x509.UnknownAuthorityError
		var invalid x509.CertificateInvalidError
		var hostname x509.HostnameError
		var verr *tls.CertificateVerificationError
		if errors.As(err, &unknown) || errors.As(err, &invalid) || errors.As(err, &hostname) || errors.As(err, &verr) {
			p.Reachable, p.Detail = true, "answered with an untrusted certificate: "+err.Error()
			return p
		}
		p.Detail = err.Error()
		return p
	}
	resp.Body.Close()
	p.Reachable, p.Detail = true, "HTTP "+resp.Status
	return p
}

// Options of a check.
type Options struct {
	Endpoints    []string
	Wait         time.Duration
	ProbeTimeout time.Duration
	Interval     time.Duration
	// Progress, when set, is told of each round that found an endpoint
	// reachable, with the time left.
	Progress func(reachable []Probe, left time.Duration)
	// Now and Sleep default to the clock.
	Now   func() time.Time
	Sleep func(context.Context, time.Duration) error
}

// Result is what a check found.
type Result struct {
	Mode      string   `json:"mode"`
	Offline   bool     `json:"offline"`
	Endpoints []string `json:"endpoints,omitempty"`
	// Wait is how long the check was allowed to wait; Waited how long it did.
	Wait   string `json:"wait,omitempty"`
	Waited string `json:"waited,omitempty"`
	Rounds int    `json:"rounds,omitempty"`
	// Reachable are the endpoints that answered in the last round.
	Reachable []Probe `json:"reachable,omitempty"`
}

// Summary is the result in one line, as the history records it.
func (r *Result) Summary() string {
	switch {
	case r.Mode == ModeCallerMonitored:
		return "caller-monitored: connectivity check skipped (SKIP_OFFLINE_CHECK=1); the caller enforces isolation"
	case r.Offline:
		return fmt.Sprintf("self-checked: offline confirmed after %s (wait up to %s), no answer from %s", r.Waited, r.Wait, strings.Join(r.Endpoints, ", "))
	}
	var names []string
	for _, p := range r.Reachable {
		names = append(names, p.Endpoint+" ("+p.Detail+")")
	}
	return fmt.Sprintf("self-checked: still online after waiting %s: reachable: %s", r.Wait, strings.Join(names, ", "))
}

// Check probes every endpoint, all at once, each within ProbeTimeout,
// every Interval until none answers (offline) or Wait is over (the last
// round's answers are in Reachable). A Wait of 0 probes once.
func Check(ctx context.Context, o Options) (*Result, error) {
	if len(o.Endpoints) == 0 {
		o.Endpoints = DefaultEndpoints
	}
	for _, e := range o.Endpoints {
		if err := ParseEndpoint(e); err != nil {
			return nil, err
		}
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = DefaultProbeTimeout
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	start := o.Now()
	deadline := start.Add(o.Wait)
	r := &Result{Mode: ModeSelfChecked, Endpoints: o.Endpoints, Wait: o.Wait.String()}
	for {
		r.Rounds++
		r.Reachable = reachable(ctx, o.Endpoints, o.ProbeTimeout)
		r.Waited = o.Now().Sub(start).Round(time.Second).String()
		if len(r.Reachable) == 0 {
			r.Offline = true
			return r, nil
		}
		left := deadline.Sub(o.Now())
		if left <= 0 {
			return r, nil
		}
		if o.Progress != nil {
			o.Progress(r.Reachable, left)
		}
		if err := o.Sleep(ctx, min(o.Interval, left)); err != nil {
			return nil, err
		}
	}
}

func reachable(ctx context.Context, endpoints []string, timeout time.Duration) []Probe {
	probes := make([]Probe, len(endpoints))
	var wg sync.WaitGroup
	for i, e := range endpoints {
		wg.Add(1)
		go func() {
			defer wg.Done()
			probes[i] = ProbeOne(ctx, e, timeout)
		}()
	}
	wg.Wait()
	var up []Probe
	for _, p := range probes {
		if p.Reachable {
			up = append(up, p)
		}
	}
	return up
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
