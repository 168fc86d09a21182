package kubectlbundle_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestLayering keeps the libraries libraries: they never import the CLI
// layer, and nothing outside main exits the process or writes to the
// process's own streams (docs/architecture.md, "The shape").
func TestLayering(t *testing.T) {
	forbidden := map[string][]string{
		"internal/verify":     {"github.com/urfave/cli/v3", "github.com/kubectl-bundle/kubectl-bundle/internal/cli", "os/exec"},
		"internal/journal":    {"github.com/urfave/cli/v3", "github.com/kubectl-bundle/kubectl-bundle/internal/cli", "os/exec"},
		"internal/state":      {"github.com/urfave/cli/v3", "github.com/kubectl-bundle/kubectl-bundle/internal/cli", "os/exec"},
		"internal/stage":      {"github.com/urfave/cli/v3", "github.com/kubectl-bundle/kubectl-bundle/internal/cli", "os/exec"},
		"internal/gate":       {"github.com/urfave/cli/v3", "github.com/kubectl-bundle/kubectl-bundle/internal/cli", "os/exec"},
		"internal/slot":       {"github.com/urfave/cli/v3", "github.com/kubectl-bundle/kubectl-bundle/internal/cli", "os/exec"},
		"internal/sitesim":    {"github.com/urfave/cli/v3", "github.com/kubectl-bundle/kubectl-bundle/internal/cli", "os/exec"},
		"internal/releasefmt": {"github.com/urfave/cli/v3", "github.com/kubectl-bundle/kubectl-bundle/internal/cli", "os/exec"},
		"internal/release":    {"github.com/urfave/cli/v3", "github.com/kubectl-bundle/kubectl-bundle/internal/cli", "os/exec"},
		"internal/switchover": {"github.com/urfave/cli/v3", "github.com/kubectl-bundle/kubectl-bundle/internal/cli", "os/exec"},
		"internal/pivot":      {"github.com/urfave/cli/v3", "github.com/kubectl-bundle/kubectl-bundle/internal/cli", "os/exec"},
		"internal/session":    {"github.com/urfave/cli/v3", "github.com/kubectl-bundle/kubectl-bundle/internal/cli", "os/exec"},
		"internal/errkind":    {"github.com/urfave/cli/v3", "github.com/kubectl-bundle/kubectl-bundle/internal/cli", "os/exec"},
		"internal/offline":    {"github.com/urfave/cli/v3", "github.com/kubectl-bundle/kubectl-bundle/internal/cli", "os/exec"},
		"internal/runner":     {"github.com/urfave/cli/v3", "github.com/kubectl-bundle/kubectl-bundle/internal/cli"},
		"internal/evidence":   {"github.com/urfave/cli/v3", "github.com/kubectl-bundle/kubectl-bundle/internal/cli", "os/exec"},
		"internal/capture":    {"github.com/urfave/cli/v3", "github.com/kubectl-bundle/kubectl-bundle/internal/cli", "os/exec"},
		"internal/seed":       {"github.com/urfave/cli/v3", "github.com/kubectl-bundle/kubectl-bundle/internal/cli", "os/exec"},
		// An artifact's build reaches nothing outside it: no process, no network.
		"internal/fluxart": {"github.com/urfave/cli/v3", "github.com/kubectl-bundle/kubectl-bundle/internal/cli", "os/exec", "net/http"},
		// The one reading of the site sits below the libraries that ask it
		// (slot, switchover, session, the commands), and the record types
		// and parsers below it: no cycle, no second reader.
		"internal/site": {"github.com/urfave/cli/v3", "github.com/kubectl-bundle/kubectl-bundle/internal/cli", "os/exec",
			"github.com/kubectl-bundle/kubectl-bundle/internal/slot", "github.com/kubectl-bundle/kubectl-bundle/internal/switchover",
			"github.com/kubectl-bundle/kubectl-bundle/internal/session", "github.com/kubectl-bundle/kubectl-bundle/internal/gate"},
		"internal/record": {"github.com/urfave/cli/v3", "github.com/kubectl-bundle/kubectl-bundle/internal/cli", "os/exec",
			"github.com/kubectl-bundle/kubectl-bundle/internal/site", "github.com/kubectl-bundle/kubectl-bundle/internal/journal",
			"github.com/kubectl-bundle/kubectl-bundle/internal/slot", "github.com/kubectl-bundle/kubectl-bundle/internal/switchover",
			"github.com/kubectl-bundle/kubectl-bundle/internal/session"},
	}
	// Test-support packages: production code never imports them (they
	// imitate tools, start servers, write what controllers would, or
	// check the invariant over a site: invariant, which the model and
	// TestInvariant share).
	testSupport := map[string]bool{"testenv": true, "sitesim": true, "testpkg": true, "fakes": true, "demo": true, "invariant": true}
	files, err := filepath.Glob("internal/*/*.go")
	if err != nil {
		t.Fatal(err)
	}
	// The plugins' own code (cmd/) is production code too.
	mains, err := filepath.Glob("cmd/*/*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(files, mains...) {
		if strings.HasSuffix(f, "_test.go") || strings.HasPrefix(f, "internal/testpkg/") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		pkg := strings.Split(filepath.ToSlash(f), "/")[1]
		if strings.HasPrefix(f, "cmd") {
			pkg = "cmd/" + pkg
		}
		for _, imp := range parsed.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if name, ok := strings.CutPrefix(path, "github.com/kubectl-bundle/kubectl-bundle/internal/"); ok && testSupport[name] && !testSupport[pkg] {
				t.Errorf("%s imports the test-support package %s", f, path)
			}
			// External programs run through the one injected runner (docs/architecture.md).
			if path == "os/exec" && filepath.Dir(f) != "internal/runner" {
				t.Errorf("%s imports os/exec: run programs through internal/runner", f)
			}
			for _, bad := range forbidden[filepath.Dir(f)] {
				if path == bad {
					t.Errorf("%s imports %s", f, path)
				}
			}
		}
		body := string(src)
		if strings.HasPrefix(pkg, "cmd/") {
			continue // a plugin's main exits and writes: only its imports are checked
		}
		if testSupport[pkg] && pkg == "fakes" {
			continue // the fakes are programs (fake docker, fake zarf): they exit and write like one
		}
		if strings.Contains(body, "os.Exit(") {
			t.Errorf("%s calls os.Exit: only main may", f)
		}
		if (strings.Contains(body, "os.Stdout") || strings.Contains(body, "os.Stderr")) && f != "internal/cli/cli.go" {
			t.Errorf("%s uses the process's streams: take IOStreams instead", f)
		}
	}
}

// TestExitCodesInOnePlace keeps the exit-code table in internal/cli:
// libraries report an errkind.Kind, so no package but internal/errkind and
// internal/cli declares an ExitCode method, and only internal/cli and the
// mains use the cli.Exit* numbers or pass a number to os.Exit.
func TestExitCodesInOnePlace(t *testing.T) {
	exitConsts := map[string]bool{"ExitOK": true, "ExitNegative": true, "ExitUsage": true, "ExitEnvironment": true, "ExitConflict": true}
	checked := 0
	for _, root := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(root, func(f string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(f, ".go") {
				return err
			}
			dir := filepath.ToSlash(filepath.Dir(f))
			inCLI := dir == "internal/cli"
			parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
			if err != nil {
				return err
			}
			// A program's main exits: the plugins' (cmd/) with cli's code,
			// a test double's (internal/fakes/fakeprog) with the code of the
			// tool it stands in for.
			isMain := filepath.Base(f) == "main.go" && parsed.Name.Name == "main"
			checked++
			cliName := ""
			for _, imp := range parsed.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); p == "github.com/kubectl-bundle/kubectl-bundle/internal/cli" {
					cliName = "cli"
					if imp.Name != nil {
						cliName = imp.Name.Name
					}
				}
			}
			ast.Inspect(parsed, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.FuncDecl:
					if n.Recv != nil && n.Name.Name == "ExitCode" && !inCLI && dir != "internal/errkind" {
						t.Errorf("%s declares an ExitCode method: report an errkind.Kind (ErrorKind) instead; internal/cli maps kinds to numbers", f)
					}
				case *ast.SelectorExpr:
					x, ok := n.X.(*ast.Ident)
					if !ok || inCLI || isMain {
						return true
					}
					if x.Name == cliName && exitConsts[n.Sel.Name] && !strings.HasSuffix(f, "_test.go") {
						t.Errorf("%s uses %s.%s: return an error of the right errkind.Kind instead", f, cliName, n.Sel.Name)
					}
				case *ast.CallExpr:
					sel, ok := n.Fun.(*ast.SelectorExpr)
					if !ok || inCLI || isMain || sel.Sel.Name != "Exit" || len(n.Args) != 1 {
						return true
					}
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "os" {
						if _, lit := n.Args[0].(*ast.BasicLit); lit {
							t.Errorf("%s calls os.Exit with a number: only main exits, with cli's code", f)
						}
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 50 {
		t.Fatalf("only %d files checked: run from the repository root", checked)
	}
}

// TestPluginsStartLean keeps Cluster API's clusterctl client (and through
// it flect, whose package initialisation alone allocates 4.7 MB) out of
// every plugin but switch, the one that pivots (internal/pivot/mover):
// linked in, it doubles the start-up of each plugin process (measured:
// 4,200 page faults and about 240 ms of CPU per `journal --help` under
// load, against 2,050 and 100-125 ms without it), and the scripts start
// one for every step.
func TestPluginsStartLean(t *testing.T) {
	heavy := []string{"sigs.k8s.io/cluster-api/cmd/clusterctl/client/cluster", "github.com/gobuffalo/flect",
		"github.com/kubectl-bundle/kubectl-bundle/internal/pivot/mover"}
	for _, plugin := range []string{"verify", "journal", "gate", "slot", "switch"} {
		out, err := exec.Command("go", "list", "-deps", "./cmd/kubectl-bundle-"+plugin).Output()
		if err != nil {
			t.Fatalf("go list -deps ./cmd/kubectl-bundle-%s: %v", plugin, err)
		}
		deps := map[string]bool{}
		for _, d := range strings.Fields(string(out)) {
			deps[d] = true
		}
		for _, h := range heavy {
			if plugin == "switch" && !deps[h] {
				t.Errorf("the switch plugin does not link %s: does it still pivot?", h)
			}
			if plugin != "switch" && deps[h] {
				t.Errorf("kubectl-bundle-%s links %s: only the switch plugin may (Switcher.Pivot)", plugin, h)
			}
		}
	}
}

// TestSiteIsTheOneReader keeps the reading of the site in one place
// (docs/architecture.md): outside internal/site, internal/record (the
// parsers), internal/journal and internal/state (their own writers), no
// production code names the files active, switch.json or transaction.json,
// calls the record parsers, loads the transaction itself, or lists a set
// of two or more blue-green phases (a copy of a rule of which slot serves
// or what runs next). Each finding names the file and what to use.
func TestSiteIsTheOneReader(t *testing.T) {
	owners := map[string]bool{"internal/site": true, "internal/record": true, "internal/journal": true, "internal/state": true}
	bgPhases := map[string]bool{"Provisioning": true, "Provisioned": true, "Switched": true, "Soaking": true, "Accepted": true, "Retired": true, "SwitchedBack": true}
	eachLibraryFile(t, owners, func(f, dir string, parsed *ast.File) {
		phaseList := func(exprs []ast.Expr) int {
			n := 0
			for _, e := range exprs {
				if sel, ok := e.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "journal" && bgPhases[sel.Sel.Name] {
						n++
					}
				}
			}
			return n
		}
		ast.Inspect(parsed, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "record" && (sel.Sel.Name == "ReadActive" || sel.Sel.Name == "ReadSwitch") {
					t.Errorf("%s calls record.%s: read the site through site.Read", f, sel.Sel.Name)
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "journal" && sel.Sel.Name == "ParseTransaction" {
					t.Errorf("%s parses the transaction: read it through site.Read(d).Txn()", f)
				}
				if sel.Sel.Name == "Load" && len(n.Args) == 0 {
					if inner, ok := sel.X.(*ast.CallExpr); ok {
						if s2, ok := inner.Fun.(*ast.SelectorExpr); ok && s2.Sel.Name == "New" {
							if x, ok := s2.X.(*ast.Ident); ok && x.Name == "journal" {
								t.Errorf("%s loads the transaction with journal.New(...).Load(): use site.Read(d).Txn()", f)
							}
						}
					}
					if s2, ok := sel.X.(*ast.SelectorExpr); ok && (s2.Sel.Name == "Journal" || s2.Sel.Name == "j") {
						t.Errorf("%s loads the transaction through its journal: use site.Read(d).Txn()", f)
					}
				}
				if len(n.Args) > 0 && n.Args[0] != nil {
					if lit, ok := n.Args[len(n.Args)-1].(*ast.BasicLit); ok && sel.Sel.Name == "Join" {
						if v, _ := strconv.Unquote(lit.Value); v == "active" || v == "switch.json" || v == "transaction.json" {
							t.Errorf("%s joins the path of %s: read it through internal/site (site.Read), write it through internal/record", f, v)
						}
					}
				}
				if phaseList(n.Args) >= 2 {
					t.Errorf("%s lists blue-green phases in a call: name the set in internal/site", f)
				}
			case *ast.CaseClause:
				if phaseList(n.List) >= 2 {
					t.Errorf("%s decides on a set of blue-green phases: that rule belongs in internal/site", f)
				}
			case *ast.CompositeLit:
				if phaseList(n.Elts) >= 2 {
					t.Errorf("%s lists blue-green phases: name the set in internal/site", f)
				}
			}
			return true
		})
	})
}

// TestArchitectureNamesEveryPackage keeps docs/architecture.md true of the
// tree: every package under internal/ is named there (as `name`).
func TestArchitectureNamesEveryPackage(t *testing.T) {
	doc, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := os.ReadDir("internal")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if d.IsDir() && !strings.Contains(string(doc), "`"+d.Name()+"`") && !strings.Contains(string(doc), "internal/"+d.Name()) {
			t.Errorf("docs/architecture.md does not name the package internal/%s: say what it owns", d.Name())
		}
	}
}

// TestNoLibraryBuildsCommandLines: what an operator is told to run is an
// advice value (internal/advice), rendered in one place, with the state
// dir it acts on; no library writes a `kubectl bundle-…` line into a
// string. The command packages keep their help text (Usage, Description,
// the package-level help strings); everything else they print is checked
// too. internal/invariant is exempt: its lines are what the test drives
// through sh, not advice.
func TestNoLibraryBuildsCommandLines(t *testing.T) {
	exempt := map[string]bool{"internal/advice": true, "internal/cli": true, "internal/invariant": true}
	line := regexp.MustCompile(`kubectl bundle-(slot|journal|switch|verify|gate)\b`)
	eachLibraryFile(t, exempt, func(f, dir string, parsed *ast.File) {
		bad := func(lit ast.Node) {
			if b, ok := lit.(*ast.BasicLit); ok && b.Kind == token.STRING {
				if v, _ := strconv.Unquote(b.Value); line.MatchString(v) {
					t.Errorf("%s builds a command line in a string: %.90q; make it an advice value (advice.Plugin, state.Dir.Plugin)", f, v)
				}
			}
		}
		help := map[string]bool{"Usage": true, "UsageText": true, "Description": true, "ArgsUsage": true}
		for _, decl := range parsed.Decls {
			if gd, ok := decl.(*ast.GenDecl); ok && strings.HasSuffix(dir, "cmd") && (gd.Tok == token.CONST || gd.Tok == token.VAR) {
				continue // a command package's help text
			}
			ast.Inspect(decl, func(n ast.Node) bool {
				if kv, ok := n.(*ast.KeyValueExpr); ok && strings.HasSuffix(dir, "cmd") {
					if k, ok := kv.Key.(*ast.Ident); ok && help[k.Name] {
						return false
					}
				}
				bad(n)
				return true
			})
		}
	})
}

// eachLibraryFile calls fn with every non-test Go file under internal/
// (two levels) whose package dir skip does not hold, parsed.
func eachLibraryFile(t *testing.T, skip map[string]bool, fn func(f, dir string, parsed *ast.File)) {
	t.Helper()
	files, err := filepath.Glob("internal/*/*.go")
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob("internal/*/*/*.go")
	checked := 0
	for _, f := range append(files, more...) {
		dir := filepath.ToSlash(filepath.Dir(f))
		if strings.HasSuffix(f, "_test.go") || skip[dir] {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		fn(f, dir, parsed)
	}
	if checked < 50 {
		t.Fatalf("only %d files checked: run from the repository root", checked)
	}
}
