package e2e_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/plugins"
)

// TestDocsUpToDate fails when docs/cli or docs/man no longer match the
// commands (UPDATE=1 or make docs rewrites them).
func TestDocsUpToDate(t *testing.T) {
	pages, err := plugins.Docs()
	if err != nil {
		t.Fatal(err)
	}
	for rel, want := range pages {
		path := repo(rel)
		if os.Getenv("UPDATE") != "" {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Errorf("%s is out of date: run make docs (%v)", path, err)
		}
	}
}

// TestSuiteBehaviour: every binary takes the suite's flags, prints its
// version, documents its exit codes, and fails the same way on a bad flag
// or output format.
func TestSuiteBehaviour(t *testing.T) {
	t.Setenv("KUBECTL_BUNDLE_STATE_DIR", t.TempDir())
	run := func(p plugins.Plugin, args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := kcli.Main(context.Background(), kcli.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, append([]string{p.Name}, args...), p.Build)
		return code, out.String(), errOut.String()
	}
	// A read-only invocation of each, to try -o xml and -o yaml on.
	readOnly := map[string][]string{
		"kubectl-bundle-verify": {"package.tar.zst"}, "kubectl-bundle-slot": {"list"},
		"kubectl-bundle-gate": nil, "kubectl-bundle-switch": {"status"}, "kubectl-bundle-journal": {"status"},
	}
	for _, p := range plugins.All() {
		t.Run(p.Name, func(t *testing.T) {
			code, out, _ := run(p, "--help")
			if code != 0 {
				t.Fatalf("--help exited %d", code)
			}
			for _, want := range []string{"--state-dir", "--output", "-o", "--quiet", "-q", "--version", "Exit codes"} {
				if !strings.Contains(out, want) {
					t.Errorf("--help lacks %q", want)
				}
			}
			code, out, _ = run(p, "--version")
			if code != 0 || !strings.HasPrefix(out, p.Name+" version ") {
				t.Errorf("--version: %d %q", code, out)
			}
			code, _, errOut := run(p, "--no-such-flag")
			if code != kcli.ExitUsage || !strings.HasPrefix(errOut, "error: ") {
				t.Errorf("unknown flag: exit %d, %q", code, errOut)
			}
			// -v is kubectl's verbosity: never the version.
			code, out, errOut = run(p, "-v")
			if code != kcli.ExitUsage || !strings.Contains(errOut, "flag provided but not defined: -v") || out != "" {
				t.Errorf("-v: exit %d, %q %q", code, out, errOut)
			}
			code, _, errOut = run(p, append([]string{"-o", "xml"}, readOnly[p.Name]...)...)
			if code != kcli.ExitUsage || !strings.Contains(errOut, `unknown output format "xml"`) {
				t.Errorf("-o xml: exit %d, %q", code, errOut)
			}
			// -o yaml is kubectl's, as -o json and -o jsonpath are.
			_, _, errOut = run(p, append([]string{"-o", "yaml"}, readOnly[p.Name]...)...)
			if strings.Contains(errOut, "unknown output format") {
				t.Errorf("-o yaml refused: %q", errOut)
			}
		})
	}
}

// TestEveryCommandHasAHelpGolden: help.txtar holds the --help of every
// binary and every visible subcommand, each with examples, so that a new command's usage,
// flags and exit codes are reviewed as a golden file (a subcommand added
// without one failed CI once, through the binary's own list changing).
func TestEveryCommandHasAHelpGolden(t *testing.T) {
	script, err := os.ReadFile(repo("e2e/testdata/script/help.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plugins.All() {
		cmd := p.Build(kcli.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard})
		lines := []string{"exec " + p.Name + " --help\n"}
		helps := [][]string{{p.Name, "--help"}}
		for _, sub := range cmd.Commands {
			if !sub.Hidden && sub.Name != "help" {
				lines = append(lines, "exec "+p.Name+" "+sub.Name+" --help\ncmp stdout help/")
				helps = append(helps, []string{p.Name, sub.Name, "--help"})
			}
		}
		// Every --help shows examples (kubectl's convention).
		for _, args := range helps {
			var out, errOut bytes.Buffer
			code := kcli.Main(context.Background(), kcli.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, args, p.Build)
			if code != 0 || !strings.Contains(out.String(), "Examples:") {
				t.Errorf("%s: exit %d, examples %v", strings.Join(args, " "), code, strings.Contains(out.String(), "Examples:"))
			}
		}
		for _, l := range lines {
			if !bytes.Contains(script, []byte(l)) {
				t.Errorf("help.txtar has no %q: add it with its golden file (help/NAME.txt, written by UPDATE=1 once the section exists)", strings.TrimSpace(strings.SplitN(l, "\n", 2)[0]))
			}
		}
	}
}
