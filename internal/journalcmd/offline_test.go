package journalcmd

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// The strategy run's offline check reads offline-run.sh's variables:
// SKIP_OFFLINE_CHECK=1 beats --offline-wait, which beats
// $OFFLINE_WAIT_SECONDS; with none of them the check still runs, with
// its own wait (config.yaml's, else 900 seconds).
func TestOfflineCheckArgsPrecedence(t *testing.T) {
	for _, c := range []struct {
		name string
		flag string
		env  map[string]string
		want []string
	}{
		{"nothing set: on, the check's own wait", "", nil, []string{"offline-check"}},
		{"empty variables are unset", "", map[string]string{"SKIP_OFFLINE_CHECK": "", "OFFLINE_WAIT_SECONDS": ""}, []string{"offline-check"}},
		{"SKIP_OFFLINE_CHECK=0 does not skip", "", map[string]string{"SKIP_OFFLINE_CHECK": "0"}, []string{"offline-check"}},
		{"OFFLINE_WAIT_SECONDS", "", map[string]string{"OFFLINE_WAIT_SECONDS": "60"}, []string{"offline-check", "--wait", "60"}},
		{"--offline-wait beats OFFLINE_WAIT_SECONDS", "5", map[string]string{"OFFLINE_WAIT_SECONDS": "60"}, []string{"offline-check", "--wait", "5"}},
		{"SKIP_OFFLINE_CHECK=1 beats all", "5", map[string]string{"SKIP_OFFLINE_CHECK": "1", "OFFLINE_WAIT_SECONDS": "60"}, []string{"offline-check", "--skip"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := offlineCheckArgs(c.flag, func(k string) string { return c.env[k] })
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("offlineCheckArgs(%q, %v) = %q, want %q", c.flag, c.env, got, c.want)
			}
		})
	}
}

// The check's wait: --wait, else config.yaml's offline.waitSeconds, else
// offline-run.sh's default of 900 seconds (never off).
func TestOfflineWaitPrecedence(t *testing.T) {
	str := func(s string) *string { return &s }
	num := func(n int) *int { return &n }
	for _, c := range []struct {
		name string
		flag *string
		cfg  *int
		want time.Duration
	}{
		{"nothing set: offline-run.sh's 900 seconds", nil, nil, 900 * time.Second},
		{"config.yaml", nil, num(60), time.Minute},
		{"config.yaml 0: one round", nil, num(0), 0},
		{"--wait beats config.yaml", str("5"), num(60), 5 * time.Second},
		{"--wait as a duration", str("2m"), nil, 2 * time.Minute},
		{"--wait 0: one round", str("0"), num(60), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := offlineWait(c.flag, c.cfg)
			if err != nil || got != c.want {
				t.Errorf("offlineWait = %v, %v; want %v", got, err, c.want)
			}
		})
	}
	for _, bad := range []string{"", "soon", "-1"} {
		if _, err := offlineWait(&bad, nil); err == nil {
			t.Errorf("--wait %q: no error", bad)
		}
	}
}

// TestParseWaitBounds: a wait from 0 to a day, in seconds or a duration;
// a value time.Duration cannot hold no longer wraps to a short wait.
func TestParseWaitBounds(t *testing.T) {
	for in, want := range map[string]time.Duration{"0": 0, "900": 900 * time.Second, "15m": 15 * time.Minute, "86400": 24 * time.Hour, "24h": 24 * time.Hour} {
		if got, err := parseWait(in); err != nil || got != want {
			t.Errorf("parseWait(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"-5", "86401", "18446744074", "10000000000", "25h", "15min", "-1s", ""} {
		if got, err := parseWait(in); err == nil {
			t.Errorf("parseWait(%q) = %v; want an error", in, got)
		}
	}
	n := -1
	if _, err := offlineWait(nil, &n); err == nil || !strings.Contains(err.Error(), "offline.waitSeconds") {
		t.Errorf("offlineWait with waitSeconds -1: %v; want an error naming offline.waitSeconds", err)
	}
}
