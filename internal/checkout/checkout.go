// Package checkout finds a checkout of this repository from a directory
// inside it: the tests' plugins and fixtures, and the journal's advice for a
// plugin run from a checkout, need the repository's root when a -trimpath
// build knows no source path.
package checkout

import (
	"os"
	"path/filepath"
	"strings"
)

// Module is the main module's path, as its go.mod names it.
const Module = "github.com/kubectl-bundle/kubectl-bundle"

// Around returns the nearest directory from dir up whose go.mod names
// Module, or "" when there is none.
func Around(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && moduleOf(b) == Module {
			return d
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

// moduleOf returns the module path a go.mod's module line names.
func moduleOf(b []byte) string {
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}
