package gate

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"
)

// A check that is still failing at its own timeout fails the gate then,
// long before the gate's timeout; checks without one wait for the gate's.
func TestCheckTimeout(t *testing.T) {
	s := newSite(t, mgmtServer)
	g := s.gate(
		Check{Name: "ks", Timeout: "1s", Resource: &ResourceCheck{ObjectRef: ObjectRef{APIVersion: "kustomize.toolkit.fluxcd.io/v1", Kind: "Kustomization", Name: "flux-system"}, Condition: "Ready"}},
		Check{Name: "wl", Resource: &ResourceCheck{ObjectRef: ObjectRef{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: "wl"}, Condition: "Available"}},
	)
	if _, err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	timeouts, err := g.CheckTimeouts(nil)
	if err != nil || !reflect.DeepEqual(timeouts, map[string]time.Duration{"ks": time.Second}) {
		t.Fatalf("CheckTimeouts = %v, %v", timeouts, err)
	}
	start := time.Now()
	rep, err := Run(context.Background(), g, s.cluster(), Options{Timeout: time.Minute, PollInterval: time.Hour, CheckTimeouts: timeouts})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < time.Second || el > 15*time.Second {
		t.Errorf("returned after %s, want soon after ks's 1s", el)
	}
	if !rep.TimedOut || rep.Passed || !reflect.DeepEqual(rep.ChecksTimedOut, []string{"ks"}) {
		t.Errorf("report: timedOut %v passed %v checksTimedOut %v", rep.TimedOut, rep.Passed, rep.ChecksTimedOut)
	}
	if r := expect(t, rep, "ks", Fail, "NotFound"); !strings.Contains(r.Message, "still failing at its timeout, 1s") {
		t.Errorf("ks message %q", r.Message)
	}
	if r := expect(t, rep, "wl", Fail, "NotFound"); strings.Contains(r.Message, "its timeout") {
		t.Errorf("wl has no timeout of its own: %q", r.Message)
	}

	// An override by name; one naming no check is refused.
	if got, err := g.CheckTimeouts(map[string]time.Duration{"wl": 2 * time.Second}); err != nil || got["wl"] != 2*time.Second || got["ks"] != time.Second {
		t.Errorf("override: %v, %v", got, err)
	}
	if _, err := g.CheckTimeouts(map[string]time.Duration{"nope": time.Second}); err == nil {
		t.Error("an override naming no check was accepted")
	}
}

// The built-in gate carries the site's timeouts: 10m for the Kustomization,
// 20m for the workload cluster, and its default timeout is the largest.
func TestDefaultGateTimeouts(t *testing.T) {
	got, err := Default().CheckTimeouts(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Duration{"flux-kustomization": 10 * time.Minute, "workload-cluster": 20 * time.Minute}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("built-in check timeouts %v, want %v", got, want)
	}
	if d := LongestTimeout(got); d != 20*time.Minute {
		t.Errorf("longest %s", d)
	}
	g := &Gate{APIVersion: APIVersion, Kind: Kind, Spec: Spec{Checks: []Check{{Name: "w", Workload: &WorkloadCheck{Cluster: "c",
		Checks: []Check{{Name: "n", Timeout: "1m", Nodes: &NodesCheck{}}}}}}}}
	if _, err := g.Validate(); err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Errorf("a nested check's timeout: %v", err)
	}
}
