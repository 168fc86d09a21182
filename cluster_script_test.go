package kubectlbundle_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/rogpeppe/go-internal/testscript"
	"k8s.io/client-go/rest"

	"github.com/kubectl-bundle/kubectl-bundle/internal/sitesim"
	"github.com/kubectl-bundle/kubectl-bundle/internal/testenv"
)

// The stand-ins testscript registers for what this machine cannot run
// (Docker), and the commands that start real API servers for scripts.

// fakeDocker is registered as the program docker. It appends its argv to
// $FAKE_DOCKER/calls and answers from files under $FAKE_DOCKER:
//
//	ports/<container>    the output of `docker port <container> ...`
//	fail/<subcommand>    exit 1 with this file's content on stderr
func fakeDocker() {
	dir := os.Getenv("FAKE_DOCKER")
	if dir == "" {
		fmt.Fprintln(os.Stderr, "fake docker: FAKE_DOCKER is not set")
		os.Exit(2)
	}
	args := os.Args[1:]
	f, err := os.OpenFile(filepath.Join(dir, "calls"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		fmt.Fprintln(f, "docker "+strings.Join(args, " "))
		f.Close()
	}
	if len(args) == 0 {
		os.Exit(2)
	}
	if msg, err := os.ReadFile(filepath.Join(dir, "fail", args[0])); err == nil {
		os.Stderr.Write(msg)
		os.Exit(1)
	}
	switch args[0] {
	case "port":
		if len(args) < 2 {
			os.Exit(2)
		}
		out, err := os.ReadFile(filepath.Join(dir, "ports", args[1]))
		if err != nil {
			fmt.Fprintf(os.Stderr, "Error: No such container: %s\n", args[1])
			os.Exit(1)
		}
		os.Stdout.Write(out)
	default:
		fmt.Fprintf(os.Stderr, "fake docker: %s is not faked\n", args[0])
		os.Exit(1)
	}
}

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

// sitesim MGMT WORKLOAD [SERVER]: write what a healthy krops site's
// controllers would into the two API servers started by apiserver; SERVER
// replaces the workload address in the kubeconfig secret.
func cmdSitesim(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: sitesim MGMT WORKLOAD [SERVER]")
	}
	s := scriptServers(ts)
	s.mu.Lock()
	mgmt, workload := s.cfgs[args[0]], s.cfgs[args[1]]
	s.mu.Unlock()
	if mgmt == nil || workload == nil {
		ts.Fatalf("start both servers with apiserver first")
	}
	site := sitesim.Site{}
	if len(args) == 3 {
		site.WorkloadServer = args[2]
	}
	ts.Check(sitesim.Healthy(context.Background(), mgmt, workload, site))
}
