package slot

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/units"
)

// Finding is one preflight observation.
type Finding struct {
	Check   string `json:"check"`
	OK      bool   `json:"ok"`
	Blocks  bool   `json:"blocks"`
	Message string `json:"message"`
}

// PreflightReport lists every finding; Blocked when any blocks.
type PreflightReport struct {
	Slot     string    `json:"slot"`
	Provider string    `json:"provider"`
	Names    *Names    `json:"names"`
	Blocked  bool      `json:"blocked"`
	Findings []Finding `json:"findings"`
}

func (p *PreflightReport) add(check string, ok bool, format string, args ...any) {
	f := Finding{Check: check, OK: ok, Blocks: !ok, Message: fmt.Sprintf(format, args...)}
	if !ok {
		p.Blocked = true
	}
	p.Findings = append(p.Findings, f)
}

// PreflightError is a preflight with blocking findings.
type PreflightError struct{ Report *PreflightReport }

func (e *PreflightError) Error() string {
	var msgs []string
	for _, f := range e.Report.Findings {
		if f.Blocks {
			msgs = append(msgs, f.Check+": "+f.Message)
		}
	}
	return fmt.Sprintf("preflight for slot %s failed: %s", e.Report.Slot, strings.Join(msgs, "; "))
}

// ErrorKind: a failed preflight is a negative verdict.
func (e *PreflightError) ErrorKind() errkind.Kind { return errkind.Negative }

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

// owned reports whether container name belongs to slot n.
func owned(name string, n *Names) bool {
	if name == n.Registry || strings.HasPrefix(name, n.Cluster+"-") {
		return true
	}
	for _, w := range n.Workloads {
		if strings.HasPrefix(name, w+"-") {
			return true
		}
	}
	return false
}

// Preflight checks, before any change, that slot can be built here. It
// reports every finding; Blocked when any of them blocks.
func (m *Manager) Preflight(ctx context.Context, slotName string, packageBytes int64) (*PreflightReport, error) {
	n, err := m.Config.NamesFor(slotName)
	if err != nil {
		return nil, err
	}
	rep := &PreflightReport{Slot: slotName, Provider: m.Config.Provider, Names: n}
	if m.Config.Provider == "existing" {
		m.preflightExisting(ctx, rep)
		return rep, nil
	}
	rec, _ := Load(m.Dir, slotName)
	ours := rec != nil // an existing record: leftovers are this slot's own

	out, err := m.Run.Run(ctx, "docker", "info", "--format", "{{json .}}")
	var info dockerInfo
	if err == nil {
		err = json.Unmarshal(out, &info)
	}
	if err != nil {
		rep.add("docker", false, "Docker is not reachable: %v (start Docker, or check DOCKER_HOST)", err)
		return rep, nil
	}
	rep.add("docker", true, "Docker %s, %d CPUs, %s memory", info.ServerVersion, info.NCPU, bytesIEC(info.MemTotal))

	cs, err := m.containers(ctx)
	if err != nil {
		rep.add("names", false, "listing containers: %v", err)
		return rep, nil
	}
	var clash []string
	for _, c := range cs {
		if owned(c.Name, n) && !ours {
			clash = append(clash, c.Name)
		}
	}
	if len(clash) > 0 {
		rep.add("names", false, "containers with slot %s's names already exist and no slot record claims them: %s (remove them, or run kubectl bundle-slot destroy %s)", slotName, strings.Join(clash, ", "), slotName)
	} else {
		rep.add("names", true, "cluster %s, registry %s and workload clusters %s are free", n.Cluster, n.Registry, strings.Join(n.Workloads, ", "))
	}

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
	m.preflightMemory(ctx, rep, slotName, info)
	m.preflightInit(rep)
	return rep, nil
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

// archives returns the image archives (*.tar) to docker load before create.
func (m *Manager) archives() []string {
	if m.Config.Archives == "" {
		return nil
	}
	matches, _ := filepath.Glob(filepath.Join(m.Config.Archives, "*.tar"))
	sort.Strings(matches)
	return matches
}

// InitPackage finds the one init package in the archives dir.
func (m *Manager) InitPackage() (string, error) {
	pattern := filepath.Join(m.Config.Archives, m.Config.InitPackageGlob)
	matches, err := filepath.Glob(pattern)
	if err != nil {
		return "", fmt.Errorf("initPackageGlob %q: %w", m.Config.InitPackageGlob, err)
	}
	if len(matches) != 1 {
		return "", fmt.Errorf("expected exactly one zarf init package matching %s, found %d%s (set archives / initPackageGlob in config.yaml, or --archives)",
			pattern, len(matches), listSuffix(matches))
	}
	return matches[0], nil
}

func listSuffix(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return ": " + strings.Join(s, ", ")
}

func (m *Manager) preflightInit(rep *PreflightReport) {
	p, err := m.InitPackage()
	if err != nil {
		rep.add("init-package", false, "%v", err)
		return
	}
	rep.add("init-package", true, "%s", p)
}

func (m *Manager) preflightDisk(rep *PreflightReport, packageBytes int64) {
	need := packageBytes
	for _, a := range m.archives() {
		if fi, err := os.Stat(a); err == nil {
			need += fi.Size()
		}
	}
	need *= 2
	var st unix.Statfs_t
	if err := unix.Statfs(m.Dir.Path, &st); err != nil {
		rep.add("disk", false, "checking free space under %s: %v", m.Dir.Path, err)
		return
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	if free < need {
		rep.add("disk", false, "%s free under %s, need %s (twice the package and image archives)", bytesIEC(free), m.Dir.Path, bytesIEC(need))
		return
	}
	rep.add("disk", true, "%s free, need %s (twice the package and image archives)", bytesIEC(free), bytesIEC(need))
}

// preflightMemory: with another slot running, its measured usage must fit
// again in what Docker has free; else blue/green would starve both.
func (m *Manager) preflightMemory(ctx context.Context, rep *PreflightReport, slotName string, info dockerInfo) {
	var others []*Names
	names, _ := List(m.Dir)
	for _, s := range names {
		if s == slotName {
			continue
		}
		if rec, err := Load(m.Dir, s); err == nil && rec.Provider == "kind" && rec.State == StateReady {
			if on, err := m.Config.NamesFor(s); err == nil {
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
	if other > free {
		rep.add("memory", false, "a second slot needs about what slot %s uses (%s) and Docker has %s free of %s: blue/green does not fit here; use the recreate strategy (scripts/recreate.sh)",
			others[0].Slot, bytesIEC(other), bytesIEC(free), bytesIEC(info.MemTotal))
		return
	}
	rep.add("memory", true, "slot %s uses %s; %s free of %s fits a second one", others[0].Slot, bytesIEC(other), bytesIEC(free), bytesIEC(info.MemTotal))
}

// parseBytes reads docker stats sizes: 1.5GiB, 300MiB, 12kB, 512B.
func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			f, err := strconv.ParseFloat(strings.TrimSuffix(s, u.suffix), 64)
			if err != nil {
				return 0, err
			}
			return int64(f * u.mult), nil
		}
	}
	return 0, fmt.Errorf("size %q has no unit", s)
}

func bytesIEC(b int64) string { return units.IEC(b) }
