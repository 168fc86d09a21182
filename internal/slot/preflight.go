package slot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/kubectl-bundle/kubectl-bundle/internal/bluegreen"
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
	// BlueGreen is the package's S2 contract (preflight --blue-green).
	BlueGreen *bluegreen.Result `json:"blueGreen,omitempty"`
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

// ErrorKind: a blocking finding (Docker down, a port or name taken, not
// enough memory or disk) is the machine not allowing the step.
func (e *PreflightError) ErrorKind() errkind.Kind { return errkind.Environment }

// Preflight checks, before any change, that slot can be built here. It
// reports every finding; Blocked when any of them blocks.
func (m *Manager) Preflight(ctx context.Context, slotName string, packageBytes int64) (*PreflightReport, error) {
	n, err := m.Config.NamesFor(slotName)
	if err != nil {
		return nil, err
	}
	p, err := m.provider()
	if err != nil {
		return nil, err
	}
	// A damaged record is met first, with its repair: the providers take
	// a slot without a record for one whose leftovers no record claims.
	if _, err := Load(m.Dir, slotName); err != nil && !errors.As(err, new(*NotFoundError)) {
		return nil, err
	}
	rep := &PreflightReport{Slot: slotName, Provider: p.Name(), Names: n}
	p.Preflight(ctx, m, rep, n, packageBytes)
	return rep, nil
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

// Recreatable says why slotName could not be created again now: the
// zarf init package its create runs is missing, or, for an existing
// cluster, config.yaml names another context than the one it runs on (the
// rebuild would build it on another cluster). An existing cluster created
// without init needs nothing from the archives.
func (m *Manager) Recreatable(slotName string) error {
	p, err := m.provider()
	if err != nil {
		return err
	}
	if p.Name() == ProviderExisting {
		if err := m.recreatableExisting(slotName); err != nil || !m.Config.Existing[slotName].Init {
			return err
		}
	}
	_, err = m.InitPackage()
	return err
}
