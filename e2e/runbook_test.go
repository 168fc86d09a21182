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
	return docSections(runbookDoc, doc)
}

// docSections reads the ## sections of the markdown doc (named name) and
// their sh blocks (those before the first ## under "", except in the
// runbook, where every block belongs to a case).
func docSections(name, doc string) (map[string][]runbookBlock, []string, error) {
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
			if m == nil || (cur == "" && name == runbookDoc) {
				return nil, nil, fmt.Errorf("%s:%d: a sh block is ```sh or ```sh exit=N, inside a ## section", name, i+1)
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
	runBlocks(ts, "runbook-"+args[0], append(append([]runbookBlock{}, sections["Before you start"]...), blocks...))
}

// runBlocks runs blocks verbatim in one bash (so a variable a block sets is
// there for the next), each required to exit with a code its fence names;
// in a block that must exit 0, every command must.
func runBlocks(ts *testscript.TestScript, name string, blocks []runbookBlock) {
	var sh strings.Builder
	sh.WriteString("set -o pipefail\n")
	for i, b := range blocks {
		if b.codes == "0" {
			// Every command of a block that must succeed: a failure in its
			// middle stops the run with that command's code.
			fmt.Fprintf(&sh, "echo '+++ block %d'\nset -e\n%sset +e\n", i+1, b.text)
		} else {
			fmt.Fprintf(&sh, "echo '+++ block %d'\n( exit 0 )\n%s", i+1, b.text)
		}
		fmt.Fprintf(&sh, "rc=$?; case \",%s,\" in *,$rc,*) ;; *) echo \"%s: block %d exited $rc, the document says %s\" >&2; exit 99 ;; esac\n", b.codes, name, i+1, b.codes)
	}
	script := ts.MkAbs(strings.ReplaceAll(strings.ToLower(name), " ", "-") + ".sh")
	ts.Check(os.WriteFile(script, []byte(sh.String()), 0o600))
	if err := ts.Exec("bash", script); err != nil {
		ts.Fatalf("%s: %v", name, err)
	}
}

// docsh FILE SECTION: run, verbatim, the sh blocks of the ## SECTION of
// FILE (relative to the repository), as runbook does.
func cmdDocsh(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: docsh FILE SECTION")
	}
	doc, err := os.ReadFile(filepath.Join(ts.Getenv("ROOT"), args[0]))
	ts.Check(err)
	sections, _, err := docSections(args[0], string(doc))
	ts.Check(err)
	if len(sections[args[1]]) == 0 {
		ts.Fatalf("%s has no section %q with sh blocks", args[0], args[1])
	}
	runBlocks(ts, args[1], sections[args[1]])
}

// docblock FILE SECTION LANG DEST: write the one ```LANG block of the ##
// SECTION of FILE to DEST (a file the document tells the operator to write).
func cmdDocblock(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 4 {
		ts.Fatalf("usage: docblock FILE SECTION LANG DEST")
	}
	doc, err := os.ReadFile(filepath.Join(ts.Getenv("ROOT"), args[0]))
	ts.Check(err)
	var cur, found string
	n, in := 0, false
	for _, line := range strings.Split(string(doc), "\n") {
		switch {
		case in && line == "```":
			in = false
		case in:
			found += line + "\n"
		case strings.HasPrefix(line, "## "):
			cur = strings.TrimPrefix(line, "## ")
		case cur == args[1] && line == "```"+args[2]:
			in, n = true, n+1
		}
	}
	if n != 1 {
		ts.Fatalf("%s: section %q has %d ```%s blocks, want 1", args[0], args[1], n, args[2])
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[3]), []byte(found), 0o600))
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

// TestMigrationInFiveCommands: README's migration is the five commands
// issue 17 promises (verify, adopt, apply, accept, evidence), and
// migrate.txtar runs them.
func TestMigrationInFiveCommands(t *testing.T) {
	t.Parallel()
	const section = "Migrating a site from offline-run.sh"
	doc, err := os.ReadFile(repo("README.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections, _, err := docSections("README.md", string(doc))
	if err != nil {
		t.Fatal(err)
	}
	blocks := sections[section]
	if len(blocks) != 1 {
		t.Fatalf("README's %q has %d sh blocks, want 1", section, len(blocks))
	}
	var cmds []string
	for _, l := range strings.Split(blocks[0].text, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			cmds = append(cmds, l)
		}
	}
	want := []string{"kubectl bundle-verify ", "kubectl bundle-slot adopt ", "scripts/blue-green.sh apply ", "scripts/blue-green.sh accept", "kubectl bundle-journal evidence "}
	if len(cmds) != len(want) {
		t.Fatalf("README's migration has %d commands, want %d: %q", len(cmds), len(want), cmds)
	}
	for i, w := range want {
		if !strings.HasPrefix(cmds[i], w) {
			t.Errorf("command %d is %q, want %q...", i+1, cmds[i], w)
		}
	}
	script, err := os.ReadFile(filepath.Join("testdata", "script", "migrate.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), "\ndocsh README.md '"+section+"'\n") {
		t.Errorf("migrate.txtar does not run README's %q", section)
	}
}
