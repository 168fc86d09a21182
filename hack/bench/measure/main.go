// Command measure runs a command and prints its wall time in seconds and
// peak resident set size in KiB ("<seconds> <maxrss_kib> <exit code>"), the
// numbers hack/bench/verify.sh compares. Output of the command is discarded.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: measure PROG [ARGS...]")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stderr = nil
	cmd.Stdout = nil
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start).Seconds()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		fmt.Fprintln(os.Stderr, "measure:", err)
		os.Exit(3)
	}
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	var rss int64
	if ru != nil {
		rss = ru.Maxrss
	}
	fmt.Printf("%.3f %d %d\n", wall, rss, code)
}
