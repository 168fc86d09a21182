package fakes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// dockerCmd is one docker subcommand the fake imitates: the flags it takes
// (true: the flag takes a value), the --format templates it answers ("":
// no --format), and what it does.
type dockerCmd struct {
	flags   map[string]bool
	formats []string
	// interspersed false: flags end at the first argument (docker run IMAGE CMD...).
	interspersed bool
	run          func(e env, s *State, c *dockerCall, out io.Writer) error
}

// dockerCall is a parsed invocation.
type dockerCall struct {
	flags  map[string][]string
	args   []string
	format string
}

func (c *dockerCall) has(flag string) bool { _, ok := c.flags[flag]; return ok }

// Templates the library passes to docker; each is answered below.
const (
	formatJSON     = "{{json .}}"
	formatPS       = "{{.Names}}\t{{.Ports}}"
	formatStats    = "{{.Name}}\t{{.MemUsage}}"
	formatNetworks = "{{json .NetworkSettings.Networks}}"
	formatID       = "{{.Id}}"
	// formatImage is the image a container runs: the reference it was
	// started with, and the ID of the image that reference named then.
	formatImage = "{{.Config.Image}}\t{{.Image}}"
)

// usageExit is the status of a call a fake cannot parse or does not
// imitate: docker's own for a command line it rejects.
const usageExit = 125

// dockerCommands is everything the fake docker imitates; any other
// subcommand, flag or template is rejected.
var dockerCommands = map[string]dockerCmd{
	"info":          {flags: map[string]bool{"--format": true}, formats: []string{formatJSON}, interspersed: true, run: dockerInfo},
	"ps":            {flags: map[string]bool{"-a": false, "--format": true}, formats: []string{"", formatPS}, interspersed: true, run: dockerPS},
	"stats":         {flags: map[string]bool{"--no-stream": false, "--format": true}, formats: []string{formatStats}, interspersed: true, run: dockerStats},
	"inspect":       {flags: map[string]bool{"--format": true}, formats: []string{formatNetworks, formatImage}, interspersed: true, run: dockerInspect},
	"image inspect": {flags: map[string]bool{"--format": true}, formats: []string{formatID}, interspersed: true, run: dockerImageInspect},
	"run": {flags: map[string]bool{"-d": false, "--name": true, "--network": true, "--network-alias": true, "-p": true, "--label": true, "--restart": true},
		formats: []string{""}, run: dockerRun},
	"rm":                 {flags: map[string]bool{"-f": false}, formats: []string{""}, interspersed: true, run: dockerRm},
	"load":               {flags: map[string]bool{"-i": true}, formats: []string{""}, interspersed: true, run: dockerLoad},
	"port":               {formats: []string{""}, interspersed: true, run: dockerPort},
	"logs":               {flags: map[string]bool{"--tail": true}, formats: []string{""}, interspersed: true, run: dockerLogs},
	"network connect":    {flags: map[string]bool{"--alias": true}, formats: []string{""}, interspersed: true, run: dockerConnect},
	"network disconnect": {formats: []string{""}, interspersed: true, run: dockerDisconnect},
}

// unsupported is a call the fake does not imitate.
type unsupported struct{ what string }

func (u *unsupported) Error() string { return u.what }

// parseDocker finds the subcommand of args and parses its flags against the
// table.
func parseDocker(args []string) (string, *dockerCmd, *dockerCall, error) {
	if len(args) == 0 {
		return "", nil, nil, &unsupported{"docker without a subcommand"}
	}
	name, rest := args[0], args[1:]
	if (name == "network" || name == "image") && len(rest) > 0 {
		name, rest = name+" "+rest[0], rest[1:]
	}
	cmd, ok := dockerCommands[name]
	if !ok {
		return name, nil, nil, &unsupported{fmt.Sprintf("subcommand %q", name)}
	}
	c := &dockerCall{flags: map[string][]string{}}
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			c.args = append(c.args, a)
			if !cmd.interspersed {
				c.args = append(c.args, rest[i+1:]...)
				break
			}
			continue
		}
		flag, val, hasVal := strings.Cut(a, "=")
		takes, ok := cmd.flags[flag]
		if !ok {
			return name, nil, nil, &unsupported{fmt.Sprintf("flag %s of docker %s", flag, name)}
		}
		switch {
		case takes && !hasVal:
			if i+1 >= len(rest) {
				return name, nil, nil, fmt.Errorf("flag needs an argument: %s", flag)
			}
			i++
			val = rest[i]
		case !takes && hasVal:
			return name, nil, nil, &unsupported{fmt.Sprintf("flag %s with a value", a)}
		}
		c.flags[flag] = append(c.flags[flag], val)
	}
	if f := c.flags["--format"]; len(f) > 0 {
		c.format = f[len(f)-1]
	}
	known := false
	for _, f := range cmd.formats {
		known = known || f == c.format
	}
	if !known {
		return name, nil, nil, &unsupported{fmt.Sprintf("--format template %q of docker %s", c.format, name)}
	}
	return name, &cmd, c, nil
}

// docker is the fake docker program: it returns its exit status.
func docker(e env, args []string, stdout, stderr io.Writer) int {
	e.call("docker " + strings.Join(args, " "))
	name, cmd, c, err := parseDocker(args)
	var u *unsupported
	if errors.As(err, &u) {
		return reject(e, stderr, "docker", args, u)
	}
	if err != nil {
		fmt.Fprintf(stderr, "docker: %v\n", err)
		return usageExit
	}
	step := "docker-" + strings.Fields(name)[0]
	if e.fails(step) {
		fmt.Fprintf(stderr, "Error response from daemon: %s failed (FAKE_FAIL)\n", name)
		return 1
	}
	if e.kills(step) {
		// Half the work, then the caller dies before it sees the answer.
		_ = withState(e.dir(), func(s *State) error { dockerPartial(name, s, c); return nil })
		e.killed(step)
		return killedExit
	}
	if err := withState(e.dir(), func(s *State) error { return cmd.run(e, s, c, stdout) }); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// dockerPartial is what a docker subcommand has done when FAKE_KILL stops
// it: run has created the container but not started it, rm has removed the
// first container only, network disconnect has disconnected, network
// connect has connected without the aliases, load has loaded the image;
// the read-only subcommands have done nothing.
func dockerPartial(name string, s *State, c *dockerCall) {
	switch name {
	case "run":
		if n := last(c.flags["--name"]); n != "" && len(c.args) > 0 && s.Containers[n] == nil {
			s.Containers[n] = &Container{Image: c.args[0], Network: last(c.flags["--network"]), Status: StatusCreated, Memory: 64 << 20}
		}
	case "rm":
		if len(c.args) > 0 {
			delete(s.Containers, c.args[0])
		}
	case "network disconnect", "network connect":
		if len(c.args) == 2 && s.Containers[c.args[1]] != nil {
			_ = networkMove(s.Containers[c.args[1]], c.args[0], c.args[1], nil, name == "network connect")
		}
	case "load":
		if in := c.flags["-i"]; len(in) == 1 {
			s.Images = append(s.Images, filepath.Base(in[0]))
		}
	}
}

// reject refuses a call the fake does not imitate, and keeps it in
// $FAKES/rejected for Setup and the end-to-end suite to fail on.
func reject(e env, stderr io.Writer, prog string, args []string, u *unsupported) int {
	msg := fmt.Sprintf("fake %s: unsupported %s", prog, u.what)
	appendLine(e.dir(), "rejected", fmt.Sprintf("%s %s: %s", prog, strings.Join(args, " "), msg))
	fmt.Fprintln(stderr, msg)
	return usageExit
}

func dockerInfo(e env, s *State, _ *dockerCall, out io.Writer) error {
	fmt.Fprintf(out, `{"MemTotal":%d,"NCPU":8,"ServerVersion":"27.5.1-fake","DockerRootDir":"/var/lib/docker"}`+"\n", e.memTotal(s))
	return nil
}

func dockerPS(_ env, s *State, c *dockerCall, out io.Writer) error {
	for _, n := range sortedNames(s) {
		if s.Containers[n].Status == StatusCreated && !c.has("-a") {
			continue
		}
		fmt.Fprintf(out, "%s\t%s\n", n, strings.Join(s.Containers[n].Ports, ", "))
	}
	return nil
}

// dockerLogs prints a line per container start: what the fake knows of a
// container's life ($FAKE_LOG_<name> adds a line, for tests that look for
// a container's own words in a capture).
func dockerLogs(e env, s *State, c *dockerCall, out io.Writer) error {
	if len(c.args) != 1 {
		return fmt.Errorf("fake docker logs: want one container, got %q", c.args)
	}
	name := c.args[0]
	ct, ok := s.Containers[name]
	if !ok {
		return fmt.Errorf("Error response from daemon: No such container: %s", name)
	}
	st := ct.Status
	if st == "" {
		st = "running"
	}
	fmt.Fprintf(out, "fake container %s (%s): %s\n", name, ct.Image, st)
	if line := e("FAKE_LOG_" + strings.NewReplacer("-", "_", ".", "_").Replace(name)); line != "" {
		fmt.Fprintln(out, line)
	}
	return nil
}

func dockerStats(e env, s *State, _ *dockerCall, out io.Writer) error {
	for _, n := range sortedNames(s) {
		fmt.Fprintf(out, "%s\t%.1fMiB / %.1fGiB\n", n, float64(s.Containers[n].Memory)/(1<<20), float64(e.memTotal(s))/(1<<30))
	}
	return nil
}

func dockerInspect(_ env, s *State, c *dockerCall, out io.Writer) error {
	if len(c.args) != 1 {
		return fmt.Errorf("fake docker inspect: want one container, got %q", c.args)
	}
	name := c.args[0]
	ct, ok := s.Containers[name]
	if !ok {
		return fmt.Errorf("Error: No such object: %s", name)
	}
	if c.format == formatImage {
		// The ID is the one docker image inspect reports for the
		// reference's name (a pin after @ is not part of it).
		ref, _, _ := strings.Cut(ct.Image, "@")
		id := FakeImageID(ref)
		if ct.Image == "" {
			id = ""
		}
		fmt.Fprintf(out, "%s\t%s\n", ct.Image, id)
		return nil
	}
	nets := map[string]any{}
	if ct.Network != "" {
		// An address of the name's own, as the network's IPAM would give;
		// another one after each docker network connect (Docker's IPAM
		// allocates serially: a reconnected container does not get its
		// released address back).
		h := fnv.New32a()
		h.Write([]byte(name))
		ip := fmt.Sprintf("172.18.%d.%d", h.Sum32()>>8%250, 2+(h.Sum32()+uint32(ct.Connects))%250)
		nets[ct.Network] = map[string]any{"Aliases": append([]string{name}, ct.Aliases...), "IPAddress": ip}
	}
	b, _ := json.Marshal(nets)
	fmt.Fprintln(out, string(b))
	return nil
}

// dockerImageInspect: every image is there (the archives a slot loads are
// not parsed), with an ID derived from its name; FAKE_FAIL=docker-image
// makes none be.
func dockerImageInspect(_ env, _ *State, c *dockerCall, out io.Writer) error {
	if len(c.args) != 1 {
		return fmt.Errorf("fake docker image inspect: want one image, got %q", c.args)
	}
	fmt.Fprintln(out, FakeImageID(c.args[0]))
	return nil
}

// FakeImageID is the image ID the fake docker reports for image name.
func FakeImageID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func dockerRm(_ env, s *State, c *dockerCall, _ io.Writer) error {
	for _, n := range c.args {
		if _, ok := s.Containers[n]; !ok && !c.has("-f") {
			return fmt.Errorf("Error response from daemon: No such container: %s", n)
		}
		delete(s.Containers, n)
	}
	return nil
}

func dockerLoad(_ env, s *State, c *dockerCall, out io.Writer) error {
	in := c.flags["-i"]
	if len(in) != 1 || len(c.args) != 0 {
		return fmt.Errorf("fake docker load: want -i FILE")
	}
	if _, err := os.Stat(in[0]); err != nil {
		return fmt.Errorf("open %s: no such file or directory", in[0])
	}
	s.Images = append(s.Images, filepath.Base(in[0]))
	fmt.Fprintf(out, "Loaded image: %s\n", filepath.Base(in[0]))
	return nil
}

func dockerPort(e env, _ *State, c *dockerCall, out io.Writer) error {
	if len(c.args) < 1 || len(c.args) > 2 {
		return fmt.Errorf("fake docker port: want CONTAINER [PORT]")
	}
	b, err := os.ReadFile(filepath.Join(e.dir(), "ports", c.args[0]))
	if err != nil {
		return fmt.Errorf("Error: No such container: %s", c.args[0])
	}
	_, err = out.Write(b)
	return err
}

func dockerRun(_ env, s *State, c *dockerCall, out io.Writer) error {
	name := last(c.flags["--name"])
	if name == "" || len(c.args) == 0 {
		return fmt.Errorf("fake docker run: want --name and an image")
	}
	ct := &Container{Image: c.args[0], Network: last(c.flags["--network"]), Aliases: c.flags["--network-alias"], Labels: map[string]string{}, Memory: 64 << 20, Restart: last(c.flags["--restart"])}
	for _, l := range c.flags["--label"] {
		k, v, _ := strings.Cut(l, "=")
		ct.Labels[k] = v
	}
	for _, spec := range c.flags["-p"] { // 127.0.0.1:5002:5000
		idx := strings.LastIndexByte(spec, ':')
		if idx < 0 {
			return fmt.Errorf("fake docker run: -p %s: want HOST:PORT:CONTAINERPORT", spec)
		}
		ct.Ports = append(ct.Ports, spec[:idx]+"->"+spec[idx+1:]+"/tcp")
	}
	if _, ok := s.Containers[name]; ok {
		return fmt.Errorf(`docker: Error response from daemon: Conflict. The container name "/%s" is already in use`, name)
	}
	for _, p := range ct.Ports {
		host, _, _ := strings.Cut(p, "->")
		for _, on := range sortedNames(s) {
			for _, op := range s.Containers[on].Ports {
				if oh, _, _ := strings.Cut(op, "->"); oh == host {
					return fmt.Errorf("docker: Error response from daemon: Bind for %s failed: port is already allocated (held by %s)", host, on)
				}
			}
		}
	}
	s.Containers[name] = ct
	fmt.Fprintf(out, "f00d%x\n", len(s.Containers))
	return nil
}

// dockerConnect and dockerDisconnect move a container on and off a
// network (the switch moves the registry alias with them).
func dockerConnect(_ env, s *State, c *dockerCall, _ io.Writer) error {
	return dockerNetwork(s, c, true)
}

func dockerDisconnect(_ env, s *State, c *dockerCall, _ io.Writer) error {
	return dockerNetwork(s, c, false)
}

func dockerNetwork(s *State, c *dockerCall, connect bool) error {
	if len(c.args) != 2 {
		return fmt.Errorf("fake docker network: want NETWORK CONTAINER, got %q", c.args)
	}
	network, name := c.args[0], c.args[1]
	ct, ok := s.Containers[name]
	if !ok {
		return fmt.Errorf("Error response from daemon: No such container: %s", name)
	}
	return networkMove(ct, network, name, c.flags["--alias"], connect)
}

func networkMove(ct *Container, network, name string, aliases []string, connect bool) error {
	if connect {
		if ct.Network == network {
			return fmt.Errorf("Error response from daemon: endpoint with name %s already exists in network %s", name, network)
		}
		ct.Network, ct.Aliases = network, aliases
		ct.Connects++
		return nil
	}
	if ct.Network != network {
		return fmt.Errorf("Error response from daemon: container %s is not connected to network %s", name, network)
	}
	ct.Network, ct.Aliases = "", nil
	return nil
}

func last(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}
