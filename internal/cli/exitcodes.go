package cli

import (
	"fmt"
	"strings"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
)

// exitRows is the table of docs/exit-codes.md, as --help prints it.
var exitRows = []struct {
	code int
	kind errkind.Kind
	text string
}{
	{ExitOK, errkind.Unknown, "done (for a check: it passed)"},
	{ExitNegative, errkind.Negative, "the thing checked is bad or not ready"},
	{ExitUsage, errkind.Usage, "what you typed is wrong: a flag, an argument, a named file missing or not what the flag wants"},
	{ExitEnvironment, errkind.Environment, "the machine or the state does not allow the step: state dir, Docker, cluster, disk, a precondition"},
	{ExitConflict, errkind.Conflict, "conflict: a lock or a running step elsewhere, an illegal transition, a protected slot"},
}

// ExitCodesHelp is the "Exit codes" section of a binary's --help: the
// suite's table, each row followed by this binary's examples (ok for 0,
// examples by kind for the others; empty ones are left out).
func ExitCodesHelp(ok string, examples map[errkind.Kind]string) string {
	var b strings.Builder
	b.WriteString("Exit codes (the same for every kubectl-bundle binary and script; docs/exit-codes.md):")
	for _, r := range exitRows {
		fmt.Fprintf(&b, "\n  %d  %s", r.code, r.text)
		ex := ok
		if r.code != ExitOK {
			ex = examples[r.kind]
		}
		if ex != "" {
			fmt.Fprintf(&b, "\n     here: %s", ex)
		}
	}
	return b.String()
}
