package e2e_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/rogpeppe/go-internal/testscript"
)

// listen http|tcp|closed VAR: stand in for a public registry in an
// offline check. http serves HTTP (404 to everything) and sets VAR to its
// URL; tcp accepts TCP connections and sets VAR to HOST:PORT; closed sets
// VAR to a local HOST:PORT nothing listens on. Servers stop with the
// script, or at `listen close VAR` (the uplink cut while a script waits).
func cmdListen(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: listen http|tcp|closed|close VAR")
	}
	started, _ := ts.Value(listenersKey{}).(listeners)
	switch args[0] {
	case "close":
		stop, ok := started[args[1]]
		if !ok {
			ts.Fatalf("listen close: no listener started as %s", args[1])
		}
		stop()
	case "http":
		srv := httptest.NewServer(http.NotFoundHandler())
		started.add(ts, args[1], srv.Close)
		ts.Setenv(args[1], srv.URL)
	case "tcp", "closed":
		l, err := net.Listen("tcp", "127.0.0.1:0")
		ts.Check(err)
		ts.Setenv(args[1], l.Addr().String())
		if args[0] == "closed" {
			ts.Check(l.Close())
			return
		}
		started.add(ts, args[1], func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	default:
		ts.Fatalf("listen: want http, tcp or closed, got %q", args[0])
	}
}

// expand SRC DST: copy SRC to DST with $VAR and ${VAR} replaced by the
// script's environment (for files that name a listener's address).
func cmdExpand(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: expand SRC DST")
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), []byte(os.Expand(ts.ReadFile(args[0]), ts.Getenv)), 0o600))
}
