// Command gendocs writes docs/cli/*.md and docs/man/*.1 from the plugins'
// commands (make docs). A test fails when they are out of date.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/kubectl-bundle/kubectl-bundle/internal/plugins"
)

func main() {
	pages, err := plugins.Docs()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for path, content := range pages {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("wrote", path)
	}
}
