package fakes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubectl-bundle/kubectl-bundle/internal/runner"
)

// zarfCommands is everything the fake zarf imitates, with the flags each
// takes (true: the flag takes a value); anything else is rejected.
var zarfCommands = map[string]map[string]bool{
	"init":           {"--registry-mode": true, "--registry-url": true, "--registry-push-username": true, "--registry-push-password": true, "--components": true, "--confirm": false, "--timeout": true, "--no-color": false},
	"package deploy": {"--confirm": false, "--key": true, "--timeout": true, "--set-variables": true, "--no-color": false},
	// The digest of an archive is computed by the real zarf ($ZARF): the
	// fake cannot imitate its OCI manifest, and must not guess it.
	"package inspect digest": {"--no-color": false},
}

// parseZarf finds the subcommand and parses its flags; positional
// arguments come back in args.
func parseZarf(argv []string) (string, map[string][]string, []string, error) {
	name := ""
	rest := argv
	switch {
	case len(argv) > 0 && argv[0] == "init":
		name, rest = "init", argv[1:]
	case len(argv) > 2 && argv[0] == "package" && argv[1] == "inspect":
		name, rest = "package inspect "+argv[2], argv[3:]
	case len(argv) > 1 && argv[0] == "package":
		name, rest = "package "+argv[1], argv[2:]
	case len(argv) > 0:
		name = argv[0]
	}
	flags, ok := zarfCommands[name]
	if !ok {
		return name, nil, nil, &unsupported{fmt.Sprintf("subcommand %q", name)}
	}
	set := map[string][]string{}
	var args []string
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if !strings.HasPrefix(a, "-") {
			args = append(args, a)
			continue
		}
		flag, val, hasVal := strings.Cut(a, "=")
		takes, ok := flags[flag]
		if !ok {
			return name, nil, nil, &unsupported{fmt.Sprintf("flag %s of zarf %s", flag, name)}
		}
		if takes && !hasVal {
			if i+1 >= len(rest) {
				return name, nil, nil, fmt.Errorf("flag needs an argument: %s", flag)
			}
			i++
			val = rest[i]
		}
		set[flag] = append(set[flag], val)
	}
	if len(args) != 1 {
		return name, nil, nil, fmt.Errorf("zarf %s: want exactly one package, got %q", name, args)
	}
	return name, set, args, nil
}

// zarf is the fake zarf program: it records init and deploy against the
// current context of $KUBECONFIG (the slot's own kubeconfig), a deploy
// with the server that context names (the cluster it really reaches), and
// returns its exit status.
func zarf(e env, argv []string, stdout, stderr io.Writer) int {
	ctxName, server := "(none)", ""
	if kc := e("KUBECONFIG"); kc != "" {
		if cfg, err := clientcmd.LoadFromFile(kc); err == nil {
			ctxName = cfg.CurrentContext
			if c := cfg.Contexts[ctxName]; c != nil && cfg.Clusters[c.Cluster] != nil {
				server = cfg.Clusters[c.Cluster].Server
			}
		}
	}
	e.call(fmt.Sprintf("zarf %s [context %s]", strings.Join(argv, " "), ctxName))
	name, flags, args, err := parseZarf(argv)
	var u *unsupported
	if errors.As(err, &u) {
		return reject(e, stderr, "zarf", argv, u)
	}
	if err != nil {
		fmt.Fprintf(stderr, "ERROR: %v\n", err)
		return 1
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, format+"\n", a...)
		return 1
	}
	if e.hangs(map[string]string{"init": "zarf-init", "package deploy": "zarf-deploy"}[name]) {
		// FAKE_HANG: a zarf that never returns, until it is killed.
		time.Sleep(time.Hour)
	}
	switch name {
	case "package inspect digest":
		real := e("ZARF")
		if real == "" {
			return fail("fake zarf: package inspect digest runs the real zarf: set $ZARF")
		}
		out, err := runner.Exec{}.Run(context.Background(), real, "package", "inspect", "digest", args[0], "--no-color")
		if err != nil {
			return fail("%v", err)
		}
		_, _ = stdout.Write(out)
		return 0
	case "init":
		if e.fails("zarf-init") {
			return fail("ERROR: failed to deploy init package: timed out waiting for the registry (FAKE_FAIL)")
		}
		if e.kills("zarf-init") {
			_ = withState(e.dir(), func(s *State) error { s.PartialInits = append(s.PartialInits, ctxName); return nil })
			e.killed("zarf-init")
			return killedExit
		}
		err = withState(e.dir(), func(s *State) error { s.Inits = append(s.Inits, ctxName); return nil })
	case "package deploy":
		if _, err := os.Stat(args[0]); err != nil {
			return fail("ERROR: unable to open package %s: %v", args[0], err)
		}
		if e.fails("zarf-deploy") {
			return fail("ERROR: failed to deploy package: timed out waiting for Deployment podinfo/podinfo to become available (FAKE_FAIL)")
		}
		d := Deploy{Context: ctxName, Server: server, Package: filepath.Base(args[0]), Variables: flags["--set-variables"]}
		if e.kills("zarf-deploy") {
			d.Partial = true
			_ = withState(e.dir(), func(s *State) error { s.Deploys = append(s.Deploys, d); return nil })
			e.killed("zarf-deploy")
			return killedExit
		}
		err = withState(e.dir(), func(s *State) error { s.Deploys = append(s.Deploys, d); return nil })
	}
	if err != nil {
		return fail("%v", err)
	}
	return 0
}
