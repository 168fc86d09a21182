package offline

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// closedPort is a local address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestProbeOne(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusUnauthorized) // a registry's answer is still an answer
	}))
	defer srv.Close()
	tlsSrv := httptest.NewTLSServer(http.NotFoundHandler())
	defer tlsSrv.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// silent accepts TCP connections and never answers HTTP.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	closed := closedPort(t)

	for _, tc := range []struct {
		endpoint  string
		reachable bool
		detail    string
	}{
		{srv.URL, true, "HTTP 401 Unauthorized"},
		{tlsSrv.URL, true, "untrusted certificate"},
		{l.Addr().String(), true, "TCP connection to " + l.Addr().String()},
		{closed, false, "connection refused"},
		{"http://" + closed, false, "connection refused"},
		{"http://" + silent.Addr().String(), false, "deadline exceeded"},
	} {
		start := time.Now()
		// Generous for what answers (a loaded machine is slow to shake
		// hands), short for the silent server: the timeout is what ends it.
		timeout := 5 * time.Second
		if !tc.reachable {
			timeout = 500 * time.Millisecond
		}
		p := ProbeOne(context.Background(), tc.endpoint, timeout)
		if p.Reachable != tc.reachable || !strings.Contains(p.Detail, tc.detail) {
			t.Errorf("ProbeOne(%s) = %+v, want reachable %v with %q", tc.endpoint, p, tc.reachable, tc.detail)
		}
		if took := time.Since(start); took > timeout+2*time.Second {
			t.Errorf("ProbeOne(%s) took %s: the probe timeout is %s", tc.endpoint, took, timeout)
		}
	}
}

func TestParseEndpoint(t *testing.T) {
	for _, ok := range []string{"https://ghcr.io", "http://127.0.0.1:5000/v2/", "registry.k8s.io:443", "[::1]:80"} {
		if err := ParseEndpoint(ok); err != nil {
			t.Errorf("ParseEndpoint(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"ghcr.io", "ftp://x", "https://", ":80", "host:"} {
		if err := ParseEndpoint(bad); err == nil {
			t.Errorf("ParseEndpoint(%q) accepted it", bad)
		}
	}
}

// fakeClock advances by each sleep, so a wait of minutes takes none.
type fakeClock struct {
	now    time.Time
	slept  []time.Duration
	onNext func(round int)
}

func (c *fakeClock) Now() time.Time { return c.now }
func (c *fakeClock) Sleep(_ context.Context, d time.Duration) error {
	c.slept = append(c.slept, d)
	c.now = c.now.Add(d)
	if c.onNext != nil {
		c.onNext(len(c.slept))
	}
	return nil
}

func TestCheckStillOnline(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	closed := closedPort(t)
	clk := &fakeClock{now: time.Unix(0, 0)}
	var told int
	r, err := Check(context.Background(), Options{
		Endpoints: []string{srv.URL, closed}, Wait: 12 * time.Second, Interval: 5 * time.Second,
		ProbeTimeout: time.Second, Now: clk.Now, Sleep: clk.Sleep,
		Progress: func([]Probe, time.Duration) { told++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Offline || len(r.Reachable) != 1 || r.Reachable[0].Endpoint != srv.URL {
		t.Fatalf("Check = %+v, want online with %s reachable", r, srv.URL)
	}
	// 0s, 5s, 10s, then the last 2s: four rounds, the wait used up.
	if r.Rounds != 4 || len(clk.slept) != 3 || clk.slept[2] != 2*time.Second || told != 3 {
		t.Errorf("rounds %d, sleeps %v, progress %d: want 4 rounds, sleeps [5s 5s 2s], 3 progress reports", r.Rounds, clk.slept, told)
	}
	if s := r.Summary(); !strings.Contains(s, "still online after waiting 12s: reachable: "+srv.URL+" (HTTP 404") {
		t.Errorf("summary %q does not name what answered", s)
	}
}

func TestCheckGoesOffline(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	// The operator pulls the cable during the second sleep.
	clk := &fakeClock{now: time.Unix(0, 0), onNext: func(n int) {
		if n == 2 {
			l.Close()
		}
	}}
	r, err := Check(context.Background(), Options{Endpoints: []string{addr}, Wait: time.Minute,
		Now: clk.Now, Sleep: clk.Sleep})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Offline || r.Rounds != 3 || r.Waited != "10s" {
		t.Fatalf("Check = %+v, want offline in round 3 after 10s", r)
	}
	if s := r.Summary(); s != "self-checked: offline confirmed after 10s (wait up to 1m0s), no answer from "+addr {
		t.Errorf("summary %q", s)
	}
}

func TestCheckZeroWaitProbesOnce(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	clk := &fakeClock{now: time.Unix(0, 0)}
	r, err := Check(context.Background(), Options{Endpoints: []string{l.Addr().String()}, Now: clk.Now, Sleep: clk.Sleep})
	if err != nil {
		t.Fatal(err)
	}
	if r.Offline || r.Rounds != 1 || len(clk.slept) != 0 {
		t.Fatalf("Check = %+v after sleeps %v, want one round, online", r, clk.slept)
	}
	if _, err := Check(context.Background(), Options{Endpoints: []string{"ghcr.io"}}); err == nil {
		t.Error("Check accepted an endpoint with neither scheme nor port")
	}
}
