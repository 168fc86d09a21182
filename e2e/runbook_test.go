package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// runbookDoc is the rollback runbook whose commands runbook.txtar runs.
const runbookDoc = "docs/airgap-rollback.md"

// runbookBlock is one fenced ```sh block: its commands and the exit codes
// the runbook allows (```sh exit=N or exit=N,M; 0 when not said).
type runbookBlock struct {
	codes string
	text  string
}

var fenceRE = regexp.MustCompile("^```sh(?: exit=(\\d+(?:,\\d+)*))?$")

// runbookSections reads the ## sections of the runbook and their sh blocks.
func runbookSections(doc string) (map[string][]runbookBlock, []string, error) {
	sections := map[string][]runbookBlock{}
	var order []string
	var cur string
	var block *runbookBlock
	for i, line := range strings.Split(doc, "\n") {
		switch {
		case block != nil && line == "```":
			sections[cur] = append(sections[cur], *block)
			block = nil
		case block != nil:
			block.text += line + "\n"
		case strings.HasPrefix(line, "## "):
			cur = strings.TrimPrefix(line, "## ")
			order = append(order, cur)
		case strings.HasPrefix(line, "```sh"):
			m := fenceRE.FindStringSubmatch(line)
			if m == nil || cur == "" {
				return nil, nil, fmt.Errorf("%s:%d: a sh block is ```sh or ```sh exit=N, inside a ## section", runbookDoc, i+1)
			}
			block = &runbookBlock{codes: "0"}
			if m[1] != "" {
				block.codes = m[1]
			}
		}
	}
	return sections, order, nil
}

// runbook SECTION: run, verbatim, the sh blocks of "Before you start" and
// then of SECTION of docs/airgap-rollback.md, in one bash (so a variable a
// block sets is there for the next), each block required to exit with the
// code its fence names.
func cmdRunbook(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: runbook SECTION")
	}
	doc, err := os.ReadFile(filepath.Join(ts.Getenv("ROOT"), runbookDoc))
	ts.Check(err)
	sections, _, err := runbookSections(string(doc))
	ts.Check(err)
	blocks := sections[args[0]]
	if len(blocks) == 0 {
		ts.Fatalf("%s has no section %q with sh blocks", runbookDoc, args[0])
	}
	var sh strings.Builder
	sh.WriteString("set -o pipefail\n")
	for i, b := range append(append([]runbookBlock{}, sections["Before you start"]...), blocks...) {
		fmt.Fprintf(&sh, "echo '+++ block %d'\n( exit 0 )\n%s", i+1, b.text)
		fmt.Fprintf(&sh, "rc=$?; case \",%s,\" in *,$rc,*) ;; *) echo \"runbook: block %d exited $rc, the runbook says %s\" >&2; exit 99 ;; esac\n", b.codes, i+1, b.codes)
	}
	script := ts.MkAbs("runbook-" + strings.ReplaceAll(strings.ToLower(args[0]), " ", "-") + ".sh")
	ts.Check(os.WriteFile(script, []byte(sh.String()), 0o600))
	if err := ts.Exec("bash", script); err != nil {
		ts.Fatalf("runbook section %q: %v", args[0], err)
	}
}

// TestRunbookCovered: every section of the runbook with commands is run by
// runbook.txtar, so none can drift.
func TestRunbookCovered(t *testing.T) {
	doc, err := os.ReadFile(repo(runbookDoc))
	if err != nil {
		t.Fatal(err)
	}
	sections, order, err := runbookSections(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join("testdata", "script", "runbook.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range order {
		if len(sections[s]) == 0 || s == "Before you start" {
			continue
		}
		if !strings.Contains(string(script), "\nrunbook '"+s+"'\n") {
			t.Errorf("runbook.txtar does not run the section %q of %s", s, runbookDoc)
		}
	}
	if len(sections) < 6 {
		t.Errorf("%s has %d sections with commands, want the five cases and the first steps", runbookDoc, len(sections))
	}
}
