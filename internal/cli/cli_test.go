package cli

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
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

// TestExitCode is the table of docs/exit-codes.md: each kind, bare or
// wrapped, and an error that says nothing of itself.
func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errkind.New(errkind.Negative, "verification failed"), 1},
		{errkind.New(errkind.Usage, "unknown flag"), 2},
		{errkind.New(errkind.Environment, "disk full"), 3},
		{errkind.New(errkind.Conflict, "locked"), 4},
		{errkind.New(errkind.Unknown, "says nothing"), 3},
		{errors.New("disk on fire"), 3},
		{fmt.Errorf("wrapped: %w", Negative(errors.New("no"))), 1},
		{Usage("bad %s", "flag"), 2},
		{Environment(errors.New("docker")), 3},
		{Conflict(errors.New("locked")), 4},
		{Reported(errkind.Negative), 1},
		{kinded{errkind.Conflict}, 4},
		// The outermost kind decides: a command may reclassify a library error.
		{errkind.Wrap(errkind.Usage, kinded{errkind.Environment}), 2},
	} {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
	for code := 0; code <= 5; code++ {
		k := KindOfExit(code)
		if code >= 1 && code <= 4 && ExitCode(errkind.Wrap(k, errors.New("x"))) != code {
			t.Errorf("KindOfExit(%d) = %v does not map back", code, k)
		}
		if (code == 0 || code == 5) && k != errkind.Environment {
			t.Errorf("KindOfExit(%d) = %v, want environment", code, k)
		}
	}
}

type kinded struct{ k errkind.Kind }

func (e kinded) Error() string           { return "kinded " + e.k.String() }
func (e kinded) ErrorKind() errkind.Kind { return e.k }

func TestOutputArg(t *testing.T) {
	for _, tc := range []struct {
		in     []string
		want   string
		format string
		tmpl   string
	}{
		{[]string{"x", "status", "-o", "jsonpath={.active}"}, "x status -o json", "jsonpath", "{.active}"},
		{[]string{"x", "status", "-o=jsonpath={.a}"}, "x status -o=json", "jsonpath", "{.a}"},
		{[]string{"x", "status", "--output=jsonpath={.a}"}, "x status -o=json", "jsonpath", "{.a}"},
		{[]string{"x", "-ojsonpath={.a}", "status"}, "x -o=json status", "jsonpath", "{.a}"},
		{[]string{"x", "run", "--", "-o", "jsonpath={.a}"}, "x run -- -o jsonpath={.a}", "", ""},
		{[]string{"x", "-o", "json"}, "x -o json", "", ""},
		{[]string{"x", "status", "-o", "yaml"}, "x status -o json", "yaml", ""},
		{[]string{"x", "status", "--output=yaml"}, "x status -o=json", "yaml", ""},
		{[]string{"x", "-oyaml", "status"}, "x -o=json status", "yaml", ""},
		{[]string{"x", "--state-dir", "-o", "status"}, "x --state-dir -o status", "", ""},
	} {
		got, format, tmpl := outputArg(tc.in)
		if strings.Join(got, " ") != tc.want || format != tc.format || tmpl != tc.tmpl {
			t.Errorf("%q: %q %q %q", tc.in, got, format, tmpl)
		}
	}
}

func TestComplete(t *testing.T) {
	root := &cli.Command{Name: "kubectl-bundle-x", Flags: CommonFlags(), Commands: []*cli.Command{
		{Name: "create", Usage: "build a slot", Flags: []cli.Flag{&cli.StringFlag{Name: "package", Usage: "the package"}, &cli.BoolFlag{Name: "force"}}},
		{Name: "status", Usage: "say where it stands"},
	}}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{""}, "create\tbuild a slot\nstatus\tsay where it stands\n:4\n"},
		{[]string{"st"}, "status\tsay where it stands\n:4\n"},
		{[]string{"create", "--p"}, "--package\tthe package\n:4\n"},
		{[]string{"create", "--o"}, "--output\toutput format: text, json, yaml or jsonpath=TEMPLATE\n:4\n"},
		{[]string{"create", "--package", ""}, ":0\n"},
		{[]string{"create", "--force", ""}, ":0\n"},
		{[]string{"-q", "cre"}, "create\tbuild a slot\n:4\n"},
	} {
		var b strings.Builder
		Complete(&b, root, tc.args)
		if b.String() != tc.want {
			t.Errorf("%q:\n%q\nwant\n%q", tc.args, b.String(), tc.want)
		}
	}
	if !IsCompletion("/usr/local/bin/kubectl_complete-bundle-verify") || IsCompletion("kubectl-bundle-verify") {
		t.Error("IsCompletion")
	}
}

// TestExitCodesHelp: every row of the table, in order, with the binary's
// examples under the row of their kind.
func TestExitCodesHelp(t *testing.T) {
	got := ExitCodesHelp("verified", map[errkind.Kind]string{errkind.Usage: "a --key that is not a PEM public key"})
	want := []string{
		"  0  done (for a check: it passed)\n     here: verified\n  1  the thing checked",
		"  2  what you typed is wrong: ",
		"not what the flag wants\n     here: a --key that is not a PEM public key\n  3  the machine",
		"  4  conflict: ",
	}
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("help lacks %q:\n%s", w, got)
		}
	}
	if strings.Count(got, "here:") != 2 {
		t.Errorf("examples not where given:\n%s", got)
	}
}
