// Command workload is the small HTTP server of the bench's workload image
// (hack/images): it answers every request with its version and host name,
// so a test can tell which slot's pod served it.
package main

import (
	"fmt"
	"net/http"
	"os"
)

func main() {
	version := os.Getenv("VERSION")
	if version == "" {
		version = "v1"
	}
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("workload", version)
		return
	}
	addr := os.Getenv("ADDR")
	if addr == "" {
		addr = ":8080"
	}
	host, _ := os.Hostname()
	http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "workload %s %s\n", version, host)
	})
	if err := http.ListenAndServe(addr, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
