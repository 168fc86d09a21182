package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v3"
)

// Completion directives of kubectl's (cobra's) __complete protocol.
const (
	compDefault    = 0 // the shell may complete file names
	compNoFileComp = 4
)

// CompletionPrefix names the helper kubectl runs to complete a plugin's
// arguments: kubectl_complete-bundle-verify for kubectl bundle verify.
const CompletionPrefix = "kubectl_complete-"

// IsCompletion reports whether the program was started as a completion helper.
func IsCompletion(argv0 string) bool {
	return strings.HasPrefix(filepath.Base(argv0), CompletionPrefix)
}

// Complete answers kubectl's plugin completion: args are the words after
// the plugin's name, the last one being completed. It prints one candidate
// per line (with a tab and its usage) and the directive line.
func Complete(w io.Writer, root *cli.Command, args []string) {
	cmd := root
	cur := ""
	if len(args) > 0 {
		cur = args[len(args)-1]
		args = args[:len(args)-1]
	}
	valueNext := false
	for _, a := range args {
		switch {
		case valueNext:
			valueNext = false
		case strings.HasPrefix(a, "-"):
			if f := findFlag(cmd, root, strings.TrimLeft(a, "-")); f != nil && !strings.Contains(a, "=") && takesValue(f) {
				valueNext = true
			}
		default:
			if sub := cmd.Command(a); sub != nil {
				cmd = sub
			}
		}
	}
	if valueNext {
		// The value of a flag: a file name, most often.
		fmt.Fprintf(w, ":%d\n", compDefault)
		return
	}
	if strings.HasPrefix(cur, "-") {
		for _, f := range visibleFlags(cmd, root) {
			for _, n := range f.Names() {
				name := "--" + n
				if len(n) == 1 {
					name = "-" + n
				}
				if strings.HasPrefix(name, cur) {
					fmt.Fprintf(w, "%s\t%s\n", name, usageOf(f))
				}
			}
		}
		fmt.Fprintf(w, ":%d\n", compNoFileComp)
		return
	}
	subs := 0
	for _, sub := range cmd.Commands {
		if sub.Hidden {
			continue
		}
		subs++
		if strings.HasPrefix(sub.Name, cur) {
			fmt.Fprintf(w, "%s\t%s\n", sub.Name, sub.Usage)
		}
	}
	if subs > 0 {
		fmt.Fprintf(w, ":%d\n", compNoFileComp)
		return
	}
	fmt.Fprintf(w, ":%d\n", compDefault)
}

func visibleFlags(cmd, root *cli.Command) []cli.Flag {
	fs := append([]cli.Flag{}, cmd.Flags...)
	if cmd != root {
		fs = append(fs, root.Flags...)
	}
	return fs
}

func findFlag(cmd, root *cli.Command, name string) cli.Flag {
	name, _, _ = strings.Cut(name, "=")
	for _, f := range visibleFlags(cmd, root) {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

func takesValue(f cli.Flag) bool {
	_, isBool := f.(*cli.BoolFlag)
	return !isBool
}

func usageOf(f cli.Flag) string {
	if d, ok := f.(interface{ GetUsage() string }); ok {
		return d.GetUsage()
	}
	return ""
}
