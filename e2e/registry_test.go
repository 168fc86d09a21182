package e2e_test

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/kubectl-bundle/kubectl-bundle/internal/seed"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
)

// registry PORT [REF=PATH...]: a working registry (in this process) that
// stands for the registry container the fake docker publishes on
// 127.0.0.1:PORT, holding each PATH (relative to $WORK; what seed reads:
// a directory as a Flux artifact, a chart .tgz, an OCI layout) as REF.
// The plugins reach it for PORT through $KUBECTL_BUNDLE_TEST_REGISTRY_ADDRS;
// its address is $REGISTRY_<PORT>. It stops with the script.
func cmdRegistry(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: registry PORT [REF=PATH...]")
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	ts.Defer(srv.Close)
	u, err := url.Parse(srv.URL)
	ts.Check(err)
	for _, a := range args[1:] {
		ref, path, ok := strings.Cut(a, "=")
		if !ok {
			ts.Fatalf("registry: %q: give REF=PATH", a)
		}
		_, err := seed.Push(context.Background(), u.Host, ts.MkAbs("."), seed.Entry{Ref: ref, Path: path}, seed.Options{PlainHTTP: true})
		ts.Check(err)
	}
	addrs := strings.TrimSpace(ts.Getenv(slot.EnvTestRegistryAddrs) + " " + args[0] + "=" + u.Host)
	ts.Setenv(slot.EnvTestRegistryAddrs, addrs)
	ts.Setenv("REGISTRY_"+args[0], u.Host)
}
