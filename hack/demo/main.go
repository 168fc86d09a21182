// Command demo is make demo: the blue/green flow of kubectl-bundle on local
// API servers and the real zarf, no Docker needed. It cleans up after itself.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/kubectl-bundle/kubectl-bundle/internal/demo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	root, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	work, err := os.MkdirTemp("", "kubectl-bundle-demo-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	err = demo.Run(ctx, demo.Options{Root: root, Work: work, Out: os.Stdout,
		Path: []string{filepath.Join(root, "bin"), filepath.Join(root, "bin", "testbin")}})
	os.RemoveAll(work)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}
