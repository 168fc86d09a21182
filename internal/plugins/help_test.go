package plugins_test

import (
	"io"
	"strings"
	"testing"

	"github.com/urfave/cli/v3"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/plugins"
)

// TestEveryHelpHasExamples keeps kubectl's convention: the --help of every
// command and subcommand shows how it is run (an "Examples:" block in its
// description, each example a kubectl line an operator can paste).
func TestEveryHelpHasExamples(t *testing.T) {
	var walk func(path string, c *cli.Command)
	walk = func(path string, c *cli.Command) {
		if c.Hidden {
			return
		}
		_, ex, ok := strings.Cut("\n"+c.Description, "\nExamples:\n")
		if !ok {
			t.Errorf("%s --help has no Examples: block", path)
		} else if !strings.HasPrefix(strings.TrimSpace(ex), "kubectl bundle") {
			t.Errorf("%s --help: its examples start with %.40q, not a kubectl bundle-... command", path, strings.TrimSpace(ex))
		}
		for _, sub := range c.Commands {
			walk(path+" "+sub.Name, sub)
		}
	}
	for _, p := range plugins.All() {
		walk(p.Name, p.Build(kcli.IOStreams{Out: io.Discard, ErrOut: io.Discard}))
	}
}
