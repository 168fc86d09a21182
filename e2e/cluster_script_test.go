package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/rogpeppe/go-internal/testscript"
	"k8s.io/client-go/rest"

	"github.com/kubectl-bundle/kubectl-bundle/internal/sitesim"
	"github.com/kubectl-bundle/kubectl-bundle/internal/testenv"
)

// The commands that start real API servers for scripts.

type serversKey struct{}

type servers struct {
	mu   sync.Mutex
	cfgs map[string]*rest.Config
}

func scriptServers(ts *testscript.TestScript) *servers {
	return ts.Value(serversKey{}).(*servers)
}

// apiserver NAME: start a real API server (kube-apiserver + etcd, with the
// Flux, flux-operator and Cluster API CRDs), write $WORK/NAME.kubeconfig
// (cluster, user and context all NAME) and set $NAME_HOST and $NAME_PORT.
// It stops when the script ends.
func cmdAPIServer(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: apiserver NAME")
	}
	if err := testenv.Missing(); err != nil {
		ts.Fatalf("%v (guard the script with [!apiserver] skip)", err)
	}
	name := args[0]
	cfg, stop, err := testenv.StartServer(filepath.Join(ts.Getenv("ROOT"), "testdata", "crds"))
	ts.Check(err)
	ts.Defer(func() { _ = stop() })
	kc, err := testenv.Kubeconfig(cfg, name)
	ts.Check(err)
	ts.Check(os.WriteFile(ts.MkAbs(name+".kubeconfig"), kc, 0o600))
	host := strings.TrimPrefix(cfg.Host, "https://")
	ts.Setenv(strings.ToUpper(name)+"_HOST", host)
	ts.Setenv(strings.ToUpper(name)+"_PORT", host[strings.LastIndexByte(host, ':')+1:])
	s := scriptServers(ts)
	s.mu.Lock()
	s.cfgs[name] = cfg
	s.mu.Unlock()
}

// sitesim [-cluster NAME] MGMT WORKLOAD [SERVER]: write what a healthy
// krops site's controllers would into the two API servers started by
// apiserver; NAME is the workload cluster's (default airgap-wl, a slot's
// is airgap-wl-<slot>), SERVER replaces the workload address in the
// kubeconfig secret.
func cmdSitesim(ts *testscript.TestScript, neg bool, args []string) {
	site := sitesim.Site{}
	if len(args) > 1 && args[0] == "-cluster" {
		site.WorkloadCluster, args = args[1], args[2:]
	}
	if neg || len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: sitesim [-cluster NAME] MGMT WORKLOAD [SERVER]")
	}
	s := scriptServers(ts)
	s.mu.Lock()
	mgmt, workload := s.cfgs[args[0]], s.cfgs[args[1]]
	s.mu.Unlock()
	if mgmt == nil || workload == nil {
		ts.Fatalf("start both servers with apiserver first")
	}
	if len(args) == 3 {
		site.WorkloadServer = args[2]
	}
	ts.Check(sitesim.Healthy(context.Background(), mgmt, workload, site))
}
