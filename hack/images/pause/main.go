// Command pause is the pod sandbox's process in the kind node image built
// here (hack/images): it sleeps until SIGINT or SIGTERM and reaps the
// children it inherits as PID 1, as Kubernetes' pause does.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (kubectl-bundle bench)")
		return
	}
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sig {
		if s == syscall.SIGCHLD {
			for {
				var ws syscall.WaitStatus
				if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
					break
				}
			}
			continue
		}
		return
	}
}
