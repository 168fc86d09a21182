// Command fakeprog is the fake docker and zarf as a program of its own,
// named by its argv[0] (docker or zarf). The e2e suite builds it once and
// puts it on PATH: a call then starts this small program instead of a copy
// of the whole test binary, whose package initialisation (client-go's and
// Cluster API's schemes) costs tens of milliseconds of CPU per call, and
// the suite makes thousands of calls.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/kubectl-bundle/kubectl-bundle/internal/fakes"
)

func main() {
	switch filepath.Base(os.Args[0]) {
	case "docker":
		fakes.Docker()
	case "zarf":
		fakes.Zarf()
	default:
		fmt.Fprintf(os.Stderr, "fakeprog: run as docker or zarf, not %s\n", os.Args[0])
		os.Exit(2)
	}
}
