package cli

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestProgress(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, "verifying x")
	// Half of 1 GiB in 2 s: 256 MiB/s, 2 s to go.
	p.start = time.Now().Add(-2 * time.Second)
	p.Update(512<<20, 1<<30)
	if !strings.Contains(b.String(), "256.0 MiB/s  ETA 2s") {
		t.Errorf("rate or ETA wrong: %q", b.String())
	}
	out := b.String()
	for _, want := range []string{"\rverifying x [", "512.0 MiB / 1.0 GiB", "/s", "ETA "} {
		if !strings.Contains(out, want) {
			t.Errorf("progress line %q lacks %q", out, want)
		}
	}
	b.Reset()
	p.Update(600<<20, 1<<30) // within 200ms: not redrawn
	if b.Len() != 0 {
		t.Errorf("redrawn too often: %q", b.String())
	}
	p.Update(1<<30, 1<<30) // the end is always drawn
	p.Done()
	if !strings.HasSuffix(b.String(), "\r\033[K") {
		t.Errorf("Done did not clear the line: %q", b.String())
	}
}

func TestExitCode(t *testing.T) {
	for err, want := range map[error]int{
		nil:                        ExitOK,
		errors.New("disk on fire"): ExitEnvironment,
		Usage("bad"):               ExitUsage,
		fmt.Errorf("wrapped: %w", Negative(errors.New("no"))): ExitNegative,
		Conflict(errors.New("locked")):                        ExitConflict,
		coder{}:                                               7,
	} {
		if got := ExitCode(err); got != want {
			t.Errorf("ExitCode(%v) = %d, want %d", err, got, want)
		}
	}
}

type coder struct{}

func (coder) Error() string { return "coded" }
func (coder) ExitCode() int { return 7 }

func TestJSONPathArg(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
		tmpl string
	}{
		{[]string{"x", "status", "-o", "jsonpath={.active}"}, "x status -o json", "{.active}"},
		{[]string{"x", "status", "-o=jsonpath={.a}"}, "x status -o=json", "{.a}"},
		{[]string{"x", "status", "--output=jsonpath={.a}"}, "x status -o=json", "{.a}"},
		{[]string{"x", "-ojsonpath={.a}", "status"}, "x -o=json status", "{.a}"},
		{[]string{"x", "run", "--", "-o", "jsonpath={.a}"}, "x run -- -o jsonpath={.a}", ""},
		{[]string{"x", "-o", "json"}, "x -o json", ""},
	} {
		got, tmpl, found := jsonpathArg(tc.in)
		if strings.Join(got, " ") != tc.want || tmpl != tc.tmpl || found != (tc.tmpl != "") {
			t.Errorf("%q: %q %q %v", tc.in, got, tmpl, found)
		}
	}
}
