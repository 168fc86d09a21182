package kubectlbundle_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
)

// The stand-ins for what this machine cannot run: docker and zarf as
// programs (registered with testscript, so they run as processes found on
// PATH, like the real ones), and kind as an in-process ClusterProvider.
// They share one state file, $FAKES/state.json, and append every call to
// $FAKES/calls. $FAKE_FAIL names steps that fail on request, comma
// separated: docker-<subcommand>, zarf-init, zarf-deploy, kind-create,
// kind-delete. $FAKE_DOCKER_MEM sets the memory docker info reports.

type fakeContainer struct {
	Image   string            `json:"image"`
	Network string            `json:"network,omitempty"`
	Ports   []string          `json:"ports,omitempty"` // 127.0.0.1:5002->5000/tcp
	Aliases []string          `json:"aliases,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	Memory  int64             `json:"memory"`
	Health  string            `json:"health,omitempty"`
}

type fakeDeploy struct {
	Context   string   `json:"context"`
	Package   string   `json:"package"`
	Variables []string `json:"variables,omitempty"`
}

type fakeState struct {
	MemTotal   int64                     `json:"memTotal"`
	Containers map[string]*fakeContainer `json:"containers"`
	Images     []string                  `json:"images"`
	Inits      []string                  `json:"inits"`
	Deploys    []fakeDeploy              `json:"deploys"`
}

func fakesDir() string { return os.Getenv("FAKES") }

// withFakeState runs fn on the state under an exclusive flock.
func withFakeState(fn func(s *fakeState) error) error {
	dir := fakesDir()
	if dir == "" {
		return fmt.Errorf("FAKES is not set")
	}
	lf, err := os.OpenFile(filepath.Join(dir, "state.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	p := filepath.Join(dir, "state.json")
	s := &fakeState{MemTotal: 16 << 30, Containers: map[string]*fakeContainer{}}
	if data, err := os.ReadFile(p); err == nil {
		if err := json.Unmarshal(data, s); err != nil {
			return fmt.Errorf("fake state %s: %w", p, err)
		}
	}
	if s.Containers == nil {
		s.Containers = map[string]*fakeContainer{}
	}
	if err := fn(s); err != nil {
		return err
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o644)
}

func fakeCall(line string) {
	f, err := os.OpenFile(filepath.Join(fakesDir(), "calls"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		fmt.Fprintln(f, line)
		f.Close()
	}
}

func fakeFails(step string) bool {
	for _, s := range strings.Split(os.Getenv("FAKE_FAIL"), ",") {
		if strings.TrimSpace(s) == step {
			return true
		}
	}
	return false
}

func fakeExit(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(code)
}

// fakeDocker is the docker program.
func fakeDocker() {
	args := os.Args[1:]
	fakeCall("docker " + strings.Join(args, " "))
	if len(args) == 0 {
		fakeExit(2, "usage: docker COMMAND")
	}
	if fakeFails("docker-" + args[0]) {
		fakeExit(1, "Error response from daemon: %s failed (FAKE_FAIL)", args[0])
	}
	err := withFakeState(func(s *fakeState) error { return dockerCommand(s, args) })
	if err != nil {
		fakeExit(1, "%v", err)
	}
}

func dockerCommand(s *fakeState, args []string) error {
	switch args[0] {
	case "info":
		fmt.Printf(`{"MemTotal":%d,"NCPU":8,"ServerVersion":"27.5.1-fake","DockerRootDir":"/var/lib/docker"}`+"\n", fakeMemTotal(s))
	case "ps":
		names := sortedNames(s)
		for _, n := range names {
			fmt.Printf("%s\t%s\n", n, strings.Join(s.Containers[n].Ports, ", "))
		}
	case "run":
		return dockerRun(s, args[1:])
	case "rm":
		for _, a := range args[1:] {
			if !strings.HasPrefix(a, "-") {
				delete(s.Containers, a)
			}
		}
	case "inspect":
		name := args[len(args)-1]
		c, ok := s.Containers[name]
		if !ok {
			return fmt.Errorf("Error: No such object: %s", name)
		}
		if strings.Contains(strings.Join(args, " "), "NetworkSettings.Networks") {
			nets := map[string]any{}
			if c.Network != "" {
				aliases := append([]string{name}, c.Aliases...)
				nets[c.Network] = map[string]any{"Aliases": aliases}
			}
			out, _ := json.Marshal(nets)
			fmt.Println(string(out))
			return nil
		}
		h := c.Health
		if h == "" {
			h = "healthy"
		}
		fmt.Println(h)
	case "load":
		if len(args) < 3 {
			return fmt.Errorf("docker load: want -i FILE")
		}
		if _, err := os.Stat(args[2]); err != nil {
			return fmt.Errorf("open %s: no such file or directory", args[2])
		}
		s.Images = append(s.Images, filepath.Base(args[2]))
		fmt.Printf("Loaded image: %s\n", filepath.Base(args[2]))
	case "port":
		if len(args) < 2 {
			return fmt.Errorf("docker port: want CONTAINER")
		}
		if out, err := os.ReadFile(filepath.Join(fakesDir(), "ports", args[1])); err == nil {
			os.Stdout.Write(out)
			return nil
		}
		return fmt.Errorf("Error: No such container: %s", args[1])
	case "stats":
		for _, n := range sortedNames(s) {
			fmt.Printf("%s\t%.1fMiB / %.1fGiB\n", n, float64(s.Containers[n].Memory)/(1<<20), float64(fakeMemTotal(s))/(1<<30))
		}
	case "network":
		return dockerNetwork(s, args[1:])
	default:
		return fmt.Errorf("fake docker: %s is not faked", args[0])
	}
	return nil
}

// fakeMemTotal is the memory docker reports: $FAKE_DOCKER_MEM when set.
func fakeMemTotal(s *fakeState) int64 {
	var m int64
	if _, err := fmt.Sscan(os.Getenv("FAKE_DOCKER_MEM"), &m); err == nil && m > 0 {
		return m
	}
	return s.MemTotal
}

func sortedNames(s *fakeState) []string {
	names := make([]string, 0, len(s.Containers))
	for n := range s.Containers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func dockerRun(s *fakeState, args []string) error {
	c := &fakeContainer{Labels: map[string]string{}, Memory: 64 << 20}
	name := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		val := func() string {
			if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(k, "--") {
				return v
			}
			i++
			if i < len(args) {
				return args[i]
			}
			return ""
		}
		switch {
		case a == "-d":
		case a == "--name" || strings.HasPrefix(a, "--name="):
			name = val()
		case a == "--network" || strings.HasPrefix(a, "--network="):
			c.Network = val()
		case a == "-p":
			spec := val() // 127.0.0.1:5002:5000
			idx := strings.LastIndexByte(spec, ':')
			c.Ports = append(c.Ports, spec[:idx]+"->"+spec[idx+1:]+"/tcp")
		case a == "--label" || strings.HasPrefix(a, "--label="):
			k, v, _ := strings.Cut(val(), "=")
			c.Labels[k] = v
		case a == "--health-cmd":
			val()
		case strings.HasPrefix(a, "-"):
		default:
			c.Image = a
			i = len(args)
		}
	}
	if name == "" || c.Image == "" {
		return fmt.Errorf("fake docker run: want --name and an image")
	}
	if _, ok := s.Containers[name]; ok {
		return fmt.Errorf(`docker: Error response from daemon: Conflict. The container name "/%s" is already in use`, name)
	}
	for _, p := range c.Ports {
		host, _, _ := strings.Cut(p, "->")
		for on, o := range s.Containers {
			for _, op := range o.Ports {
				if oh, _, _ := strings.Cut(op, "->"); oh == host {
					return fmt.Errorf("docker: Error response from daemon: Bind for %s failed: port is already allocated (held by %s)", host, on)
				}
			}
		}
	}
	s.Containers[name] = c
	fmt.Println("f00d" + fmt.Sprintf("%x", len(s.Containers)))
	return nil
}

// dockerNetwork fakes connect/disconnect with --alias (the switch moves
// the registry alias).
func dockerNetwork(s *fakeState, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("docker network: want a subcommand")
	}
	var alias, rest []string
	for i := 1; i < len(args); i++ {
		if args[i] == "--alias" && i+1 < len(args) {
			alias = append(alias, args[i+1])
			i++
			continue
		}
		if !strings.HasPrefix(args[i], "-") {
			rest = append(rest, args[i])
		}
	}
	if len(rest) != 2 {
		return fmt.Errorf("docker network %s: want NETWORK CONTAINER", args[0])
	}
	c, ok := s.Containers[rest[1]]
	if !ok {
		return fmt.Errorf("Error response from daemon: No such container: %s", rest[1])
	}
	switch args[0] {
	case "connect":
		if c.Network == rest[0] {
			return fmt.Errorf("Error response from daemon: endpoint with name %s already exists in network %s", rest[1], rest[0])
		}
		c.Network, c.Aliases = rest[0], alias
	case "disconnect":
		if c.Network != rest[0] {
			return fmt.Errorf("Error response from daemon: container %s is not connected to network %s", rest[1], rest[0])
		}
		c.Network, c.Aliases = "", nil
	default:
		return fmt.Errorf("fake docker: network %s is not faked", args[0])
	}
	return nil
}

// fakeZarf is the zarf program: it records init and deploy against the
// current context of $KUBECONFIG (the slot's own kubeconfig).
func fakeZarf() {
	args := os.Args[1:]
	ctxName := "(none)"
	if kc := os.Getenv("KUBECONFIG"); kc != "" {
		if cfg, err := clientcmd.LoadFromFile(kc); err == nil {
			ctxName = cfg.CurrentContext
		}
	}
	fakeCall(fmt.Sprintf("zarf %s [context %s]", strings.Join(args, " "), ctxName))
	switch {
	case len(args) > 0 && args[0] == "init":
		if fakeFails("zarf-init") {
			fakeExit(1, "ERROR: failed to deploy init package: timed out waiting for the registry (FAKE_FAIL)")
		}
		check(withFakeState(func(s *fakeState) error { s.Inits = append(s.Inits, ctxName); return nil }))
	case len(args) > 2 && args[0] == "package" && args[1] == "deploy":
		if _, err := os.Stat(args[2]); err != nil {
			fakeExit(1, "ERROR: unable to open package %s: %v", args[2], err)
		}
		if fakeFails("zarf-deploy") {
			fakeExit(1, "ERROR: failed to deploy package: timed out waiting for Deployment podinfo/podinfo to become available (FAKE_FAIL)")
		}
		d := fakeDeploy{Context: ctxName, Package: filepath.Base(args[2])}
		for i, a := range args {
			if a == "--set-variables" && i+1 < len(args) {
				d.Variables = append(d.Variables, args[i+1])
			}
		}
		check(withFakeState(func(s *fakeState) error { s.Deploys = append(s.Deploys, d); return nil }))
	default:
		fakeExit(1, "fake zarf: %v is not faked", args)
	}
}

func check(err error) {
	if err != nil {
		fakeExit(1, "%v", err)
	}
}

// fakeKind is the in-process kind provider: a control-plane container in
// the fake Docker, and a kind-<name> context in the kubeconfig. When
// $WORK/<name>.kubeconfig exists (an apiserver started for it), the
// context reaches that real API server.
type fakeKind struct{}

func kubeconfigFile(explicit string) string {
	if explicit != "" {
		return explicit
	}
	if kc := os.Getenv("KUBECONFIG"); kc != "" {
		return filepath.SplitList(kc)[0]
	}
	return filepath.Join(os.Getenv("HOME"), ".kube", "config")
}

func (fakeKind) Create(_ context.Context, name string, cfg *v1alpha4.Cluster, kubeconfig string) error {
	fakeCall(fmt.Sprintf("kind create cluster --name %s --image %s", name, cfg.Nodes[0].Image))
	if fakeFails("kind-create") {
		return fmt.Errorf("failed to create cluster: node(s) already exist for a cluster with the name %q (FAKE_FAIL)", name)
	}
	if err := withFakeState(func(s *fakeState) error {
		if _, ok := s.Containers[name+"-control-plane"]; ok {
			return fmt.Errorf("node(s) already exist for a cluster with the name %q", name)
		}
		s.Containers[name+"-control-plane"] = &fakeContainer{Image: cfg.Nodes[0].Image, Network: "kind", Memory: 1536 << 20,
			Ports:  []string{"127.0.0.1:0->6443/tcp"},
			Labels: map[string]string{"io.x-k8s.kind.cluster": name}}
		return nil
	}); err != nil {
		return err
	}
	path := kubeconfigFile(kubeconfig)
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		kc = clientcmdapi.NewConfig()
	}
	ctx := "kind-" + name
	cluster := &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	user := &clientcmdapi.AuthInfo{Token: "fake"}
	if backend, err := clientcmd.LoadFromFile(filepath.Join(os.Getenv("WORK"), name+".kubeconfig")); err == nil {
		cluster, user = backend.Clusters[name], backend.AuthInfos[name]
	}
	kc.Clusters[ctx], kc.AuthInfos[ctx] = cluster, user
	kc.Contexts[ctx] = &clientcmdapi.Context{Cluster: ctx, AuthInfo: ctx}
	kc.CurrentContext = ctx
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*kc, path)
}

func (fakeKind) Delete(_ context.Context, name, kubeconfig string) error {
	fakeCall("kind delete cluster --name " + name)
	if fakeFails("kind-delete") {
		return fmt.Errorf("failed to delete cluster %q (FAKE_FAIL)", name)
	}
	if err := withFakeState(func(s *fakeState) error {
		delete(s.Containers, name+"-control-plane")
		return nil
	}); err != nil {
		return err
	}
	path := kubeconfigFile(kubeconfig)
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil
	}
	ctx := "kind-" + name
	delete(kc.Contexts, ctx)
	delete(kc.Clusters, ctx)
	delete(kc.AuthInfos, ctx)
	if kc.CurrentContext == ctx {
		kc.CurrentContext = ""
	}
	return clientcmd.WriteToFile(*kc, path)
}

func (fakeKind) Exists(_ context.Context, name string) (bool, error) {
	found := false
	err := withFakeState(func(s *fakeState) error { _, found = s.Containers[name+"-control-plane"]; return nil })
	return found, err
}

// fakeProbe answers a registry's /v2/ when a fake container publishes the
// port.
func fakeProbe(_ context.Context, u string) error {
	pu, err := url.Parse(u)
	if err != nil {
		return err
	}
	found := false
	err = withFakeState(func(s *fakeState) error {
		for _, c := range s.Containers {
			for _, p := range c.Ports {
				if strings.HasPrefix(p, pu.Host+"->") {
					found = true
				}
			}
		}
		return nil
	})
	if err == nil && !found {
		err = fmt.Errorf("dial tcp %s: connect: connection refused", pu.Host)
	}
	return err
}
