package journalcmd

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"testing"
)

// The run's steps are written once, in internal/plan: the run (the
// advance*.go files) runs the plan's commands (runCmd, callCmd, end) and
// writes none of its own, so that a --dry-run shows what runs. A run that
// spelled a step's command itself (x.call("slot", "destroy", …), or
// x.runStep(PHASE, "gate", …)) fails this test, naming the line.
func TestRunStepsComeFromThePlan(t *testing.T) {
	// The plugin commands that are a strategy's steps (plan.Commands and
	// its functions), by plugin and first argument ("*": any).
	steps := map[[2]string]bool{
		{"verify", "*"}: true, {"gate", "*"}: true,
		{"slot", "create"}: true, {"slot", "deploy"}: true, {"slot", "destroy"}: true, {"slot", "preflight"}: true,
		{"switch", "to"}: true, {"switch", "back"}: true, {"switch", "accept"}: true,
		{"journal", "end"}: true,
	}
	// Reads that are not steps: verify's policy check, the gate file's parse.
	reads := map[[2]string]bool{{"verify", "--policy"}: true, {"gate", "-f"}: true}
	files, err := filepath.Glob("advance*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no advance*.go: %v", err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			lit := func(i int) string {
				if i >= len(call.Args) {
					return ""
				}
				b, ok := call.Args[i].(*ast.BasicLit)
				if !ok || b.Kind != token.STRING {
					return "?"
				}
				s, _ := strconv.Unquote(b.Value)
				return s
			}
			var plugin, first string
			switch sel.Sel.Name {
			case "call", "output":
				plugin, first = lit(0), lit(1)
			case "quiet":
				plugin, first = lit(1), lit(2)
			case "runStep":
				checked++
				// Only runCmd names a command; a step that records only
				// passes "".
				if name := lit(1); name != "" && name != "?" || name == "?" && !inFunc(file, call, "runCmd") {
					t.Errorf("%s: runStep names its own command (run the plan's: x.runCmd)", fset.Position(call.Pos()))
				}
				return true
			default:
				return true
			}
			checked++
			if (steps[[2]string{plugin, first}] || steps[[2]string{plugin, "*"}]) && !reads[[2]string{plugin, first}] {
				t.Errorf("%s: the run spells the step command %s %s itself (take it from internal/plan)", fset.Position(call.Pos()), plugin, first)
			}
			return true
		})
	}
	if checked < 20 {
		t.Fatalf("only %d calls checked: the test no longer sees the run's calls", checked)
	}
}

// inFunc says call is inside the function named name in file.
func inFunc(file *ast.File, call *ast.CallExpr, name string) bool {
	for _, d := range file.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == name && fd.Pos() <= call.Pos() && call.End() <= fd.End() {
			return true
		}
	}
	return false
}
