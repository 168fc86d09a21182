package slot

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
)

// ProviderKind builds each slot as a kind cluster on the host's Docker,
// with its own registry container, then runs zarf init there.
const ProviderKind = "kind"

type kindProvider struct{}

func (kindProvider) Name() string { return ProviderKind }

func (kindProvider) ValidateConfig(c *Config) error {
	if !record.NameRE.MatchString(c.ClusterPrefix) {
		return fmt.Errorf("clusterPrefix %q: use lower-case letters, digits and '-'", c.ClusterPrefix)
	}
	return nil
}

func (kindProvider) Inputs(m *Manager, n *Names) []string {
	c := m.Config
	parts := []string{c.NodeImage, c.RegistryImage, c.DockerSocket, m.Kubeconfig}
	if c.ZarfRegistry != "" && c.ZarfRegistry != ZarfRegistryNodePort {
		parts = append(parts, "zarfRegistry="+c.ZarfRegistry)
	}
	if p, err := m.InitPackage(); err == nil {
		parts = append(parts, p)
	}
	for _, e := range c.Seed {
		parts = append(parts, "seed="+e.Ref+"="+e.Path)
	}
	return parts
}

func (kindProvider) NewRecord(m *Manager, rec *Record, n *Names) {
	rec.Cluster, rec.Registry, rec.RegistryPort, rec.Kubeconfig = n.Cluster, n.Registry, n.RegistryPort, m.Kubeconfig
}

func (kindProvider) Summary(r *Record) string {
	return fmt.Sprintf("kind cluster %s (context %s), registry %s on 127.0.0.1:%d", r.Cluster, r.Context, r.Registry, r.RegistryPort)
}

func (kindProvider) Create(ctx context.Context, m *Manager, rec *Record, n *Names) error {
	initPkg, err := m.InitPackage()
	if err != nil {
		return err
	}
	if err := m.step(rec, "create", "load-images", func() error {
		for _, a := range m.archives() {
			m.logf("  docker load -i %s", filepath.Base(a))
			if _, err := m.Run.Run(ctx, "docker", "load", "-i", a); err != nil {
				return fmt.Errorf("%w (is the archive a docker save tarball?)", err)
			}
		}
		for _, ref := range []string{m.Config.NodeImage, m.Config.RegistryImage} {
			if err := m.checkImage(ctx, ref); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := m.step(rec, "create", "cluster", func() error {
		return m.Kind.Create(ctx, n.Cluster, KindConfig(m.Config, n), m.Kubeconfig)
	}); err != nil {
		return err
	}
	if err := m.step(rec, "create", "registry", func() error { return m.startRegistry(ctx, n) }); err != nil {
		return err
	}
	if len(m.Config.Seed) > 0 {
		if err := m.step(rec, "create", "seed", func() error { return m.seedRegistry(ctx, rec, n) }); err != nil {
			return err
		}
	}
	if err := m.step(rec, "create", "kubeconfig", func() error {
		return writeSlotKubeconfig(m.Dir, rec.Name, m.Kubeconfig, n.Context)
	}); err != nil {
		return err
	}
	return m.step(rec, "create", "zarf-init", func() error {
		if err := m.zarfInit(ctx, rec.Name, initPkg, n.RegistryPort); err != nil {
			return err
		}
		if m.Config.ZarfRegistry == ZarfRegistrySlot {
			return m.registryService(ctx, rec, n, "kind")
		}
		return nil
	})
}

func (kindProvider) Destroy(ctx context.Context, m *Manager, rec *Record, n *Names) error {
	if n.Adopted {
		return m.destroyAdopted(ctx, rec, n)
	}
	if err := m.step(rec, "destroy", "cluster", func() error { return m.Kind.Delete(ctx, n.Cluster, rec.Kubeconfig) }); err != nil {
		return err
	}
	return m.step(rec, "destroy", "containers", func() error { return m.removeContainers(ctx, n) })
}

func (p kindProvider) Preflight(ctx context.Context, m *Manager, rep *PreflightReport, n *Names, packageBytes int64) {
	slotName := n.Slot
	rec, _ := Load(m.Dir, slotName)
	ours := rec != nil // an existing record: leftovers are this slot's own

	out, err := m.Run.Run(ctx, "docker", "info", "--format", "{{json .}}")
	var info dockerInfo
	if err == nil {
		err = json.Unmarshal(out, &info)
	}
	if err != nil {
		rep.add("docker", false, "Docker is not reachable: %v (start Docker, or check DOCKER_HOST)", err)
		return
	}
	rep.add("docker", true, "Docker %s, %d CPUs, %s memory", info.ServerVersion, info.NCPU, bytesIEC(info.MemTotal))

	cs, err := m.containers(ctx)
	if err != nil {
		rep.add("names", false, "listing containers: %v", err)
		return
	}
	var clash []string
	for _, c := range cs {
		if owned(c.Name, n) && !ours {
			clash = append(clash, c.Name)
		}
	}
	if len(clash) > 0 {
		rep.add("names", false, "containers with slot %s's names already exist and no slot record claims them: %s (remove them, or run %s)%s", slotName, strings.Join(clash, ", "), m.Dir.Plugin("slot", "destroy", slotName), leftoverWorkloadNote(clash, n))
	} else {
		rep.add("names", true, "cluster %s, registry %s and workload clusters %s are free", n.Cluster, n.Registry, strings.Join(n.Workloads, ", "))
	}

	p.preflightOthers(ctx, m, rep, n, ours)

	port := strconv.Itoa(n.RegistryPort)
	holder := ""
	for _, c := range cs {
		if c.Name != n.Registry && publishes(c.Ports, port) {
			holder = c.Name
		}
	}
	switch {
	case holder != "":
		rep.add("ports", false, "port %s is published by container %s, which is not slot %s's registry (pick another registryPortBase, or remove the container)", port, holder, slotName)
	case !ours && !portFree(n.RegistryPort):
		rep.add("ports", false, "port %s is in use by a process on this host (pick another registryPortBase)", port)
	default:
		rep.add("ports", true, "registry port 127.0.0.1:%s is free", port)
	}

	m.preflightDisk(rep, packageBytes)
	p.preflightMemory(ctx, m, rep, slotName, info)
	m.preflightInit(rep)
}

// preflightOthers: slot n's cluster is not a kind cluster already on the
// daemon (kind get clusters) that no record of n claims, and none of its
// names, its port or its context is another slot's: an adopted site keeps
// names that are not derived from its slot, so derivation alone does not
// keep two slots apart.
func (kindProvider) preflightOthers(ctx context.Context, m *Manager, rep *PreflightReport, n *Names, ours bool) {
	var clash []string
	if !ours {
		if ok, err := m.Kind.Exists(ctx, n.Cluster); err != nil {
			clash = append(clash, fmt.Sprintf("listing kind clusters: %v", err))
		} else if ok {
			clash = append(clash, fmt.Sprintf("kind cluster %s already exists and no record of slot %s claims it (kind get clusters lists it)", n.Cluster, n.Slot))
		}
	}
	if n.Context == m.Config.AliasContext {
		clash = append(clash, fmt.Sprintf("context %s is the alias context, which follows the active slot", n.Context))
	}
	names, _ := List(m.Dir)
	for _, s := range names {
		rec, err := Load(m.Dir, s)
		if s == n.Slot || err != nil {
			continue
		}
		switch {
		case rec.Cluster != "" && rec.Cluster == n.Cluster:
			clash = append(clash, fmt.Sprintf("cluster %s is slot %s's", n.Cluster, s))
		case rec.Registry != "" && rec.Registry == n.Registry:
			clash = append(clash, fmt.Sprintf("registry %s is slot %s's", n.Registry, s))
		case rec.RegistryPort != 0 && rec.RegistryPort == n.RegistryPort:
			clash = append(clash, fmt.Sprintf("port %d is slot %s's registry's", n.RegistryPort, s))
		case rec.Context == n.Context:
			clash = append(clash, fmt.Sprintf("context %s is slot %s's", n.Context, s))
		}
	}
	if len(clash) > 0 {
		rep.add("others", false, "%s (set other names in config.yaml: clusterPrefix, registryName, registryPortBase)", strings.Join(clash, "; "))
		return
	}
	rep.add("others", true, "no kind cluster, slot, port or context has slot %s's names", n.Slot)
}

// GrowthMargin is the part of a running slot's measured memory that
// preflight adds for what both slots grow while the second one is built.
// Measured on real CAPD (docs/experiments.md, experiment (c)): slot b,
// built beside slot a, used 1.07 times what slot a used at preflight, and
// slot a itself grew 1.21 times meanwhile; both together 1.14 times twice
// the prediction without a margin.
const GrowthMargin = 4 // a quarter

// preflightMemory: with another slot running, its measured usage and a
// quarter more (GrowthMargin) must fit in what Docker has free; else
// blue/green would starve both, and what is killed first may be a
// workload cluster's machine.
func (kindProvider) preflightMemory(ctx context.Context, m *Manager, rep *PreflightReport, slotName string, info dockerInfo) {
	var others []*Names
	names, _ := List(m.Dir)
	for _, s := range names {
		if s == slotName {
			continue
		}
		if rec, err := Load(m.Dir, s); err == nil && rec.Provider == ProviderKind && rec.State == StateReady {
			if on, err := m.NamesOf(s); err == nil {
				others = append(others, on)
			}
		}
	}
	if len(others) == 0 {
		rep.add("memory", true, "no other slot is running")
		return
	}
	out, err := m.Run.Run(ctx, "docker", "stats", "--no-stream", "--format", "{{.Name}}\t{{.MemUsage}}")
	if err != nil {
		rep.add("memory", false, "measuring the running slots: %v", err)
		return
	}
	var total, other int64
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, usage, ok := strings.Cut(line, "\t")
		if !ok {
			continue
		}
		used, _, _ := strings.Cut(usage, "/")
		b, err := parseBytes(strings.TrimSpace(used))
		if err != nil {
			continue
		}
		total += b
		for _, on := range others {
			if owned(name, on) {
				other += b
			}
		}
	}
	free := info.MemTotal - total
	need := other + other/GrowthMargin
	if need > free {
		rep.add("memory", false, "a second slot needs about what slot %s uses (%s) and a quarter more for what both grow while it is built (%s), and Docker has %s free of %s: blue/green does not fit here; use the recreate strategy (scripts/recreate.sh)",
			others[0].Slot, bytesIEC(other), bytesIEC(need), bytesIEC(free), bytesIEC(info.MemTotal))
		return
	}
	rep.add("memory", true, "slot %s uses %s; with a quarter more for growth (%s), %s free of %s fits a second one", others[0].Slot, bytesIEC(other), bytesIEC(need), bytesIEC(free), bytesIEC(info.MemTotal))
}

type dockerInfo struct {
	MemTotal      int64  `json:"MemTotal"`
	NCPU          int    `json:"NCPU"`
	DockerRootDir string `json:"DockerRootDir"`
	ServerVersion string `json:"ServerVersion"`
}

type container struct {
	Name  string
	Ports string
}

// containers lists every container (running or not) with its ports.
func (m *Manager) containers(ctx context.Context) ([]container, error) {
	out, err := m.Run.Run(ctx, "docker", "ps", "-a", "--format", "{{.Names}}\t{{.Ports}}")
	if err != nil {
		return nil, err
	}
	var cs []container
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		name, ports, _ := strings.Cut(line, "\t")
		cs = append(cs, container{Name: name, Ports: ports})
	}
	return cs, nil
}

// Running lists slot n's kind cluster and its containers (registry, CAPD
// workloads), as destroy would find them.
func (kindProvider) Running(ctx context.Context, m *Manager, n *Names) ([]string, error) {
	var out []string
	if m.Kind != nil {
		ok, err := m.Kind.Exists(ctx, n.Cluster)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, "kind cluster "+n.Cluster)
		}
	}
	cs, err := m.containers(ctx)
	if err != nil {
		return nil, err
	}
	for _, c := range cs {
		if c.Name == n.Registry || ownedWorkload(c.Name, n) {
			out = append(out, "container "+c.Name)
		}
	}
	return out, nil
}

// owned reports whether container name belongs to slot n.
func owned(name string, n *Names) bool {
	if name == n.Registry || strings.HasPrefix(name, n.Cluster+"-") && !n.derivedName(name) {
		return true
	}
	return ownedWorkload(name, n)
}

// RunningWorkloads lists the workload clusters of slot name that have a
// container on the Docker daemon (config.yaml's workloadClusters, as the
// slot names them, less those an S3 pivot moved out, plus those it moved
// in). The existing provider runs none that this tool knows.
func (m *Manager) RunningWorkloads(ctx context.Context, name string) ([]string, error) {
	if m.Config.Provider != ProviderKind {
		return nil, nil
	}
	n, err := m.NamesOf(name)
	if err != nil {
		return nil, err
	}
	cs, err := m.containers(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the workload clusters of slot %s: %w", name, err)
	}
	var out []string
	for _, w := range n.Workloads {
		for _, c := range cs {
			if strings.HasPrefix(c.Name, w+"-") {
				out = append(out, w)
				break
			}
		}
	}
	return out, nil
}

// leftoverWorkloadNote says, when clash holds workload-cluster containers,
// what a new management cluster does with them: on real Cluster API and
// CAPD it does not adopt them; the same Cluster applied again starts a
// second control plane behind the same load balancer and leaves the old
// machine running and unowned (docs/experiments.md, experiment (a)).
func leftoverWorkloadNote(clash []string, n *Names) string {
	for _, c := range clash {
		if ownedWorkload(c, n) {
			return "; a new management cluster does not adopt workload-cluster containers: it would start a second control plane beside them behind the same load balancer and leave them unowned (docs/experiments.md, experiment (a))"
		}
	}
	return ""
}

func ownedWorkload(name string, n *Names) bool {
	for _, w := range n.Workloads {
		if strings.HasPrefix(name, w+"-") && !n.derivedName(name) {
			return true
		}
	}
	return false
}

// derivedName reports whether an adopted slot's name is one that a
// configured slot derives: then it is that slot's, not the adopted one's.
func (n *Names) derivedName(name string) bool {
	for _, d := range n.derived {
		if belongs(name, d) {
			return true
		}
	}
	return false
}

// publishes reports whether a `docker ps` Ports column publishes host port p.
func publishes(ports, p string) bool {
	for _, part := range strings.Split(ports, ",") {
		part = strings.TrimSpace(part)
		host, _, ok := strings.Cut(part, "->")
		if ok && strings.HasSuffix(host, ":"+p) {
			return true
		}
	}
	return false
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// removeContainers removes the slot's registry and CAPD workload
// containers; never a container of another slot.
func (m *Manager) removeContainers(ctx context.Context, n *Names) error {
	cs, err := m.containers(ctx)
	if err != nil {
		return err
	}
	for _, c := range cs {
		if c.Name == n.Registry || ownedWorkload(c.Name, n) {
			m.logf("  docker rm -f %s", c.Name)
			if _, err := m.Run.Run(ctx, "docker", "rm", "-f", c.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

// startRegistry runs the slot's registry as stage-and-create-cluster.sh
// does and checks its health from the host: GET /v2/ on the published port
// (the image need not carry a shell or wget for a health command). Unlike
// the site's own registry, it restarts with the Docker engine (a host
// reboot) unless an operator stopped it: the kind node beside it does, and
// a node whose registry is gone pulls nothing.
func (m *Manager) startRegistry(ctx context.Context, n *Names) error {
	_, _ = m.Run.Run(ctx, "docker", "rm", "-f", n.Registry)
	port := strconv.Itoa(n.RegistryPort)
	args := []string{"run", "-d", "--restart", "unless-stopped", "--name", n.Registry, "--network", "kind"}
	// The active slot rebuilt (recreate's BUILDING, BUILDING_FALLBACK)
	// gets the registry alias back with its new container: the switch
	// that gave it to the old container does not run again.
	if active, err := site.Read(m.Dir).Active(); err == nil && active == n.Slot && m.Config.RegistryAlias != "" {
		args = append(args, "--network-alias", m.Config.RegistryAlias)
	}
	args = append(args, "-p", "127.0.0.1:"+port+":5000",
		"--label", "dev.kubectl-bundle.slot="+n.Slot,
		imageName(m.Config.RegistryImage))
	if _, err := m.Run.Run(ctx, "docker", args...); err != nil {
		return fmt.Errorf("%w (is port %s free? %s checks)", err, port, m.Dir.Plugin("slot", "preflight", n.Slot))
	}
	url := "http://127.0.0.1:" + port + "/v2/"
	var err error
	for range 30 {
		if err = m.probe(ctx, url); err == nil {
			return nil
		}
		m.sleep(time.Second)
	}
	return fmt.Errorf("registry %s is not healthy: GET %s: %w (docker logs %s shows why)", n.Registry, url, err, n.Registry)
}

// imageName is the reference Docker and kind are given: ref without a
// trailing @sha256:<image ID> pin.
func imageName(ref string) string {
	name, _, _ := strings.Cut(ref, "@")
	return name
}

// checkImage: the image ref names is loaded (from the archives, or before),
// and when ref pins an image ID (NAME:TAG@sha256:ID), it is that image.
func (m *Manager) checkImage(ctx context.Context, ref string) error {
	name, pin, pinned := strings.Cut(ref, "@")
	out, err := m.Run.Run(ctx, "docker", "image", "inspect", "--format", "{{.Id}}", name)
	if err != nil {
		return fmt.Errorf("image %s is not loaded: put its docker-save archive in the archives directory (create loads every *.tar there) or docker load it: %w", name, err)
	}
	id := strings.TrimSpace(string(out))
	if pinned && id != pin {
		return fmt.Errorf("image %s is %s, not the pinned %s (the pin is the image ID, as docker image inspect --format '{{.Id}}' prints it)", name, id, pin)
	}
	m.logf("  image %s %s", name, id)
	return nil
}

func (m *Manager) sleep(d time.Duration) {
	if m.Sleep != nil {
		m.Sleep(d)
		return
	}
	time.Sleep(d)
}

func (m *Manager) probe(ctx context.Context, url string) error {
	if m.Probe != nil {
		return m.Probe(ctx, url)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
