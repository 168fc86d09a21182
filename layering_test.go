package kubectlbundle_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLayering keeps the libraries libraries: they never import the CLI
// layer, and nothing outside main exits the process or writes to the
// process's own streams (STYLE.md habits 1, 2 and 5).
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
	}
	files, err := filepath.Glob("internal/*/*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
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
		for _, imp := range parsed.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			// External programs run through the one injected runner (DESIGN.md).
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
		if strings.Contains(body, "os.Exit(") {
			t.Errorf("%s calls os.Exit: only main may", f)
		}
		if (strings.Contains(body, "os.Stdout") || strings.Contains(body, "os.Stderr")) && f != "internal/cli/cli.go" {
			t.Errorf("%s uses the process's streams: take IOStreams instead", f)
		}
	}
}
