package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto"
	"debug/buildinfo"
	"debug/elf"
	"debug/macho"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kubectl-bundle/kubectl-bundle/internal/digest"
	"github.com/kubectl-bundle/kubectl-bundle/internal/releasefmt"
)

// Names goreleaser gives the release files (.goreleaser.yaml).
const (
	ChecksumsFile = "checksums.txt"
	BundleFile    = ChecksumsFile + ".sigstore.json"
	SBOMSuffix    = ".spdx.json"
	// MaxBinarySize bounds what is read from an archive into memory.
	MaxBinarySize = 512 << 20
)

// Checked is what CheckRelease found in a good release.
type Checked struct {
	// KeyFingerprint signed the checksums.
	KeyFingerprint string `json:"keyFingerprint"`
	// Files is every file checksums.txt lists.
	Files   int             `json:"files"`
	Plugins []CheckedPlugin `json:"plugins"`
	// Scripts is the strategy scripts' archive.
	Scripts string `json:"scripts"`
}

// CheckedPlugin is one plugin's manifest and the platforms it installs on.
type CheckedPlugin struct {
	Name      string   `json:"name"`
	Version   string   `json:"version"`
	Platforms []string `json:"platforms"`
}

// CheckRelease checks a release directory the way an operator must before
// carrying it across the gap, and everything goreleaser is expected to
// have put there: checksums.txt signed by pub (checksums.txt.sigstore.json),
// every file it lists present with that digest, and for every name in
// krewNames a krew manifest (krew/<name>.yaml) that validates, whose
// platforms point at listed archives with the manifest's sha256, each
// holding LICENSE and bin built for the platform's os and arch, and an SPDX
// SBOM beside each archive that lists every module the binary was built
// from; and the strategy scripts' archive (checkScripts). All problems are
// returned, joined.
func CheckRelease(dist string, pub crypto.PublicKey, krewNames []string) (*Checked, error) {
	sums, err := os.ReadFile(filepath.Join(dist, ChecksumsFile))
	if err != nil {
		return nil, err
	}
	bundleJSON, err := os.ReadFile(filepath.Join(dist, BundleFile))
	if err != nil {
		return nil, fmt.Errorf("%w (the checksums must be signed)", err)
	}
	fp, err := VerifyBlob(sums, bundleJSON, pub)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", BundleFile, err)
	}
	lines, err := releasefmt.ParseSHA256Sums(sums)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ChecksumsFile, err)
	}
	c := &Checked{KeyFingerprint: fp, Files: len(lines)}
	var errs []error
	listed := map[string]string{}
	for _, l := range lines {
		listed[l.Name] = l.SHA256
		got, err := digest.File(filepath.Join(dist, l.Name))
		if err != nil {
			errs = append(errs, err)
		} else if got != l.SHA256 {
			errs = append(errs, fmt.Errorf("%s: sha256 %s, checksums.txt says %s", l.Name, got, l.SHA256))
		}
		if l.Name == BundleFile || l.Name == ChecksumsFile {
			errs = append(errs, fmt.Errorf("checksums.txt lists %s, which cannot be signed by a bundle over checksums.txt", l.Name))
		}
	}
	for _, name := range krewNames {
		p, err := checkPlugin(dist, name, listed)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		c.Plugins = append(c.Plugins, *p)
	}
	scripts, err := checkScripts(dist, listed)
	if err != nil {
		errs = append(errs, err)
	}
	c.Scripts = scripts
	return c, errors.Join(errs...)
}

func checkPlugin(dist, name string, listed map[string]string) (*CheckedPlugin, error) {
	b, err := os.ReadFile(filepath.Join(dist, "krew", name+".yaml"))
	if err != nil {
		return nil, err
	}
	m, err := releasefmt.ParseKrewManifest(b, name)
	if err != nil {
		return nil, err
	}
	out := &CheckedPlugin{Name: name, Version: m.Spec.Version}
	var errs []error
	for _, p := range m.Spec.Platforms {
		goos, goarch := p.Platform()
		plat := goos + "/" + goarch
		archive := path.Base(p.URI)
		sum, ok := listed[archive]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s: archive %s is not in checksums.txt", plat, archive))
			continue
		case sum != p.SHA256:
			errs = append(errs, fmt.Errorf("%s: the manifest's sha256 %s is not the archive's %s", plat, p.SHA256, sum))
			continue
		}
		bin, err := checkArchive(filepath.Join(dist, archive), p.Bin, goos, goarch)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", archive, err))
			continue
		}
		if _, ok := listed[archive+SBOMSuffix]; !ok {
			errs = append(errs, fmt.Errorf("%s: no SBOM %s in checksums.txt", archive, archive+SBOMSuffix))
		} else if err := checkSBOM(filepath.Join(dist, archive+SBOMSuffix), bin); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", archive+SBOMSuffix, err))
		}
		out.Platforms = append(out.Platforms, plat)
	}
	sort.Strings(out.Platforms)
	return out, errors.Join(errs...)
}

// checkArchive reads a tar.gz and returns bin's contents after checking
// it is a regular executable file built for goos/goarch, and that the
// archive carries LICENSE.
func checkArchive(archive, bin, goos, goarch string) ([]byte, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	var data []byte
	license := false
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch path.Clean(h.Name) {
		case "LICENSE":
			license = true
		case bin:
			if h.Typeflag != tar.TypeReg || h.Mode&0o111 == 0 {
				return nil, fmt.Errorf("%s is not a regular executable file (type %q, mode %o)", bin, h.Typeflag, h.Mode)
			}
			if h.Size > MaxBinarySize {
				return nil, fmt.Errorf("%s is %d bytes, over %d", bin, h.Size, MaxBinarySize)
			}
			if data, err = io.ReadAll(tr); err != nil {
				return nil, err
			}
		}
	}
	switch {
	case data == nil:
		return nil, fmt.Errorf("no %s in the archive (the manifest's bin)", bin)
	case !license:
		return nil, errors.New("no LICENSE in the archive")
	}
	gotOS, gotArch, err := BinaryPlatform(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", bin, err)
	}
	if gotOS != goos || gotArch != goarch {
		return nil, fmt.Errorf("%s is built for %s/%s, the manifest selects %s/%s", bin, gotOS, gotArch, goos, goarch)
	}
	return data, nil
}

// BinaryPlatform tells the os and arch an executable was built for, from
// its ELF or Mach-O header.
func BinaryPlatform(b []byte) (goos, goarch string, err error) {
	if f, err := elf.NewFile(bytes.NewReader(b)); err == nil {
		switch f.Machine {
		case elf.EM_X86_64:
			return "linux", "amd64", nil
		case elf.EM_AARCH64:
			return "linux", "arm64", nil
		}
		return "linux", f.Machine.String(), nil
	}
	if f, err := macho.NewFile(bytes.NewReader(b)); err == nil {
		switch f.Cpu {
		case macho.CpuAmd64:
			return "darwin", "amd64", nil
		case macho.CpuArm64:
			return "darwin", "arm64", nil
		}
		return "darwin", f.Cpu.String(), nil
	}
	return "", "", errors.New("neither an ELF nor a Mach-O executable")
}

// checkSBOM checks an SPDX JSON document lists every module bin was built
// from, at the version it was built with.
func checkSBOM(file string, bin []byte) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var doc struct {
		SPDXVersion string `json:"spdxVersion"`
		Packages    []struct {
			Name        string `json:"name"`
			VersionInfo string `json:"versionInfo"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("not SPDX JSON: %w", err)
	}
	if !strings.HasPrefix(doc.SPDXVersion, "SPDX-2.") {
		return fmt.Errorf("spdxVersion %q, want SPDX-2.x", doc.SPDXVersion)
	}
	have := map[string]bool{}
	for _, p := range doc.Packages {
		have[p.Name+"@"+p.VersionInfo] = true
	}
	info, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("the binary has no Go build information: %w", err)
	}
	var missing []string
	for _, d := range info.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		if !have[d.Path+"@"+d.Version] {
			missing = append(missing, d.Path+"@"+d.Version)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%d of the binary's %d modules are not listed, e.g. %s", len(missing), len(info.Deps), missing[0])
	}
	return nil
}
