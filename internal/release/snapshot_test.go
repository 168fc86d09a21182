package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kubectl-bundle/kubectl-bundle/internal/plugins"
	"github.com/kubectl-bundle/kubectl-bundle/internal/releasefmt"
)

// The release test runs the real goreleaser on the real .goreleaser.yaml,
// narrowed to the two platforms of the krops site (linux/amd64 and
// darwin/arm64) to keep the suite's time, then checks what it produced and
// installs every plugin with the real krew from its manifest and archive,
// as an air-gapped operator does. `make release-snapshot` runs the full
// four-platform matrix and the same check.

var testTargets = []string{"linux_amd64_v1", "darwin_arm64_v8.0"}

const repoRoot = "../.."

// tool returns the path of a release tool: $ENV when set, else
// bin/testbin/name. Missing: skip, or fail under CI=true.
func tool(t *testing.T, env, name string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		p = filepath.Join(repoRoot, "bin", "testbin", name)
	}
	abs, err := filepath.Abs(p)
	if err == nil {
		_, err = os.Stat(abs)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required under CI=true: run make releasetools (%v)", name, err)
		}
		t.Skipf("%s not built (run make releasetools): %v", name, err)
	}
	return abs
}

func TestMain(m *testing.M) {
	code := m.Run()
	if snap.dist != "" {
		os.RemoveAll(filepath.Dir(snap.dist))
	}
	os.Exit(code)
}

var snap struct {
	once sync.Once
	dist string
	log  string
	err  error
}

// snapshot runs goreleaser once for the package's tests and returns the
// dist directory.
func snapshot(t *testing.T) string {
	t.Helper()
	goreleaser := tool(t, "GORELEASER", "goreleaser")
	zarf := tool(t, "ZARF", "zarf")
	cosign := tool(t, "COSIGN", "cosign")
	if testing.Short() {
		t.Skip("goreleaser builds ten binaries: not in -short")
	}
	snap.once.Do(func() {
		snap.dist, snap.log, snap.err = runSnapshot(goreleaser, zarf, cosign)
	})
	if snap.err != nil {
		t.Fatalf("goreleaser release --snapshot: %v\n%s", snap.err, snap.log)
	}
	return snap.dist
}

func runSnapshot(goreleaser, zarf, cosign string) (dist, log string, err error) {
	dir, err := os.MkdirTemp("", "kb-release-")
	if err != nil {
		return "", "", err
	}
	b, err := os.ReadFile(filepath.Join(repoRoot, ".goreleaser.yaml"))
	if err != nil {
		return "", "", err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return "", "", err
	}
	for _, bl := range cfg["builds"].([]any) {
		build := bl.(map[string]any)
		delete(build, "goos")
		delete(build, "goarch")
		build["targets"] = testTargets
	}
	// The test must not touch the checkout: no `go mod tidy`, dist elsewhere.
	delete(cfg, "before")
	dist = filepath.Join(dir, "dist")
	cfg["dist"] = dist
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return "", "", err
	}
	config := filepath.Join(dir, "goreleaser.yaml")
	if err := os.WriteFile(config, out, 0o644); err != nil {
		return "", "", err
	}
	key, _ := filepath.Abs(testKey)
	root, _ := filepath.Abs(repoRoot)
	cmd := exec.Command(goreleaser, "release", "--snapshot", "--clean", "--config", config)
	cmd.Dir = root
	cmd.Env = append(os.Environ(),
		"PATH="+strings.Join([]string{filepath.Dir(zarf), filepath.Dir(cosign), os.Getenv("PATH")}, string(os.PathListSeparator)),
		"COSIGN_KEY="+key, "COSIGN_PASSWORD="+testPassword)
	o, err := cmd.CombinedOutput()
	return dist, string(o), err
}

func krewNames() []string {
	var names []string
	for _, p := range plugins.All() {
		names = append(names, releasefmt.KrewName(p.Name))
	}
	return names
}

func TestReleaseSnapshotPassesTheCheck(t *testing.T) {
	dist := snapshot(t)
	c, err := CheckRelease(dist, readPub(t, testPub), krewNames())
	if err != nil {
		t.Fatal(err)
	}
	// Every plugin, on every target, and nothing else in checksums.txt:
	// one archive and one SBOM per plugin and platform.
	if len(c.Plugins) != len(plugins.All()) {
		t.Fatalf("checked %d plugins, the suite has %d", len(c.Plugins), len(plugins.All()))
	}
	for _, p := range c.Plugins {
		if got := strings.Join(p.Platforms, " "); got != "darwin/arm64 linux/amd64" {
			t.Errorf("%s: platforms %s", p.Name, got)
		}
		if !strings.HasPrefix(p.Version, "v") || !strings.HasSuffix(p.Version, "-snapshot") {
			t.Errorf("%s: version %s", p.Name, p.Version)
		}
	}
	// cosign itself verifies the signature goreleaser had it make.
	cmd := exec.Command(tool(t, "COSIGN", "cosign"), "verify-blob", "--key", testPub, "--bundle", filepath.Join(dist, BundleFile),
		"--insecure-ignore-tlog=true", filepath.Join(dist, ChecksumsFile))
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "Verified OK") {
		t.Errorf("cosign verify-blob checksums.txt: %v\n%s", err, out)
	}
	if want := 2*len(testTargets)*len(plugins.All()) + 1; c.Files != want {
		t.Errorf("checksums.txt lists %d files, want %d (archives and SBOMs, and the scripts' archive)", c.Files, want)
	}
	if !strings.HasPrefix(c.Scripts, ScriptsArchivePrefix) || !strings.HasSuffix(c.Scripts, "-snapshot.tar.gz") {
		t.Errorf("scripts archive %q", c.Scripts)
	}
	// Built as .goreleaser.yaml says: static, trimmed paths, stripped,
	// stamped with the release's version.
	for _, p := range plugins.All() {
		bin, err := checkArchive(linuxArchive(t, dist, releasefmt.KrewName(p.Name)), p.Name, "linux", "amd64")
		if err != nil {
			t.Fatal(err)
		}
		info, err := buildinfo.Read(bytes.NewReader(bin))
		if err != nil {
			t.Fatal(err)
		}
		settings := map[string]string{}
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
		// (-trimpath keeps -ldflags out of the build information: the
		// version is checked by running the binary, -s by its symbols.)
		if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
			t.Errorf("%s built with %v", p.Name, settings)
		}
		exe := filepath.Join(t.TempDir(), p.Name)
		if err := os.WriteFile(exe, bin, 0o755); err != nil {
			t.Fatal(err)
		}
		version := strings.TrimPrefix(c.Plugins[0].Version, "v")
		if out, err := exec.Command(exe, "--version").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != p.Name+" version "+version {
			t.Errorf("%s --version: %v %q, want version %s", p.Name, err, out, version)
		}
		if f, err := elf.NewFile(bytes.NewReader(bin)); err != nil {
			t.Error(err)
		} else if _, err := f.Symbols(); err != elf.ErrNoSymbols {
			t.Errorf("%s is not stripped: %v", p.Name, err)
		}
	}
	for _, p := range plugins.All() {
		for _, goos := range []string{"linux", "darwin"} {
			for _, f := range []string{".tar.gz", ".tar.gz" + SBOMSuffix} {
				if m, _ := filepath.Glob(filepath.Join(dist, p.Name+"_*_"+goos+"_*"+f)); len(m) != 1 {
					t.Errorf("want one %s %s*%s, found %v", p.Name, goos, f, m)
				}
			}
		}
	}
}

// The operator's install across the gap, with the real krew and kubectl.
func TestKrewInstallsEveryPluginFromItsManifestAndArchive(t *testing.T) {
	dist := snapshot(t)
	krew := tool(t, "KREW", "krew")
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("kubectl is required under CI=true")
		}
		t.Skip("no kubectl")
	}
	root := t.TempDir()
	for _, name := range krewNames() {
		archive := linuxArchive(t, dist, name)
		out := run(t, root, krew, "install", "--manifest="+filepath.Join(dist, "krew", name+".yaml"), "--archive="+archive)
		if !strings.Contains(out, "Installed plugin: "+name) {
			t.Fatalf("krew install %s:\n%s", name, out)
		}
	}
	// kubectl finds every plugin under krew's bin dir, warns about nothing,
	// and each one runs as the release's version.
	path := filepath.Join(root, "bin") + string(os.PathListSeparator) + filepath.Dir(kubectl)
	cmd := exec.Command(kubectl, "plugin", "list")
	cmd.Env = append(os.Environ(), "PATH="+path)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil || strings.Contains(strings.ToLower(stdout.String()+stderr.String()), "warning") {
		t.Fatalf("kubectl plugin list: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	m, err := releasefmt.ParseKrewManifest(mustRead(t, filepath.Join(dist, "krew", "bundle-verify.yaml")), "bundle-verify")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range krewNames() {
		link := filepath.Join(root, "bin", "kubectl-"+strings.ReplaceAll(name, "-", "_"))
		if !strings.Contains(stdout.String(), link+"\n") {
			t.Errorf("kubectl plugin list does not show %s:\n%s", link, stdout.String())
		}
		// krew's one link answers to kubectl bundle-verify (not kubectl
		// bundle verify, which needs a kubectl-bundle-verify on PATH).
		cmd := exec.Command(kubectl, name, "--version")
		cmd.Env = append(os.Environ(), "PATH="+path)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), strings.TrimPrefix(m.Spec.Version, "v")) {
			t.Errorf("kubectl %s --version: %v\n%s", name, err, out)
		}
	}
	// Completion through kubectl once the helpers docs/install.md links
	// exist beside krew's links.
	for _, name := range krewNames() {
		u := strings.ReplaceAll(name, "-", "_")
		if err := os.Symlink(filepath.Join(root, "bin", "kubectl-"+u), filepath.Join(root, "bin", "kubectl_complete-"+u)); err != nil {
			t.Fatal(err)
		}
	}
	for args, want := range map[string]string{"bundle-slot cr": "create\t", "bundle-verify --ke": "--key\t", "bundle-switch t": "to\t"} {
		cmd := exec.Command(kubectl, append([]string{"__complete"}, strings.Fields(args)...)...)
		cmd.Env = append(os.Environ(), "PATH="+path)
		out, err := cmd.Output()
		if err != nil || !strings.Contains(string(out), "\n"+want) && !strings.HasPrefix(string(out), want) {
			t.Errorf("kubectl __complete %s: %v\n%s", args, err, out)
		}
	}
	// A plugin that does something through kubectl, from krew's install.
	cmd = exec.Command(kubectl, "bundle-gate", "--print-default")
	cmd.Env = append(os.Environ(), "PATH="+path)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "kind: Gate") {
		t.Errorf("kubectl bundle-gate --print-default: %v\n%s", err, out)
	}
	// The strategy scripts find krew's kubectl-bundle_<plugin> links.
	script, _ := filepath.Abs(filepath.Join(repoRoot, "scripts", "blue-green.sh"))
	cmd = exec.Command("bash", script, "status")
	cmd.Env = append(os.Environ(), "PATH="+path+string(os.PathListSeparator)+"/usr/bin:/bin", "KUBECTL_BUNDLE_STATE_DIR="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "no transaction in progress") || !strings.Contains(string(out), "no slots") {
		t.Errorf("blue-green.sh status with krew's install: %v\n%s", err, out)
	}

	// An archive changed on the way is refused, and nothing is installed.
	bad := filepath.Join(t.TempDir(), filepath.Base(linuxArchive(t, dist, "bundle-verify")))
	b := mustRead(t, linuxArchive(t, dist, "bundle-verify"))
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(bad, b, 0o644); err != nil {
		t.Fatal(err)
	}
	root2 := t.TempDir()
	cmd = exec.Command(krew, "install", "--manifest="+filepath.Join(dist, "krew", "bundle-verify.yaml"), "--archive="+bad)
	cmd.Env = append(os.Environ(), "KREW_ROOT="+root2)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "checksum does not match") {
		t.Errorf("krew installed a changed archive: %v\n%s", err, out)
	}
	if entries, _ := os.ReadDir(filepath.Join(root2, "bin")); len(entries) != 0 {
		t.Errorf("krew left %d entries in bin after refusing", len(entries))
	}
}

func linuxArchive(t *testing.T, dist, name string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dist, "kubectl-"+name+"_*_linux_amd64.tar.gz"))
	if len(m) != 1 {
		t.Fatalf("want one linux/amd64 archive of %s, found %v", name, m)
	}
	return m[0]
}

func run(t *testing.T, krewRoot, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "KREW_ROOT="+krewRoot)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mutable makes a copy of dist in which every file is a hard link except
// the ones a case rewrites (write replaces the link).
func mutable(t *testing.T, dist string) string {
	t.Helper()
	dir := t.TempDir()
	err := filepath.WalkDir(dist, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dist, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		return os.Link(p, filepath.Join(dir, rel))
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func write(t *testing.T, p string, b []byte) {
	t.Helper()
	os.Remove(p)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// resign rewrites checksums.txt from the files it lists (as they are now)
// and signs it with a fresh key, so that a case reaches the check after the
// signature; it returns that key's public half.
func resign(t *testing.T, dir string) crypto.PublicKey {
	t.Helper()
	lines, err := releasefmt.ParseSHA256Sums(mustRead(t, filepath.Join(dir, ChecksumsFile)))
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, l := range lines {
		sum := sha256.Sum256(mustRead(t, filepath.Join(dir, l.Name)))
		fmt.Fprintf(&sb, "%s  %s\n", hex.EncodeToString(sum[:]), l.Name)
	}
	write(t, filepath.Join(dir, ChecksumsFile), []byte(sb.String()))
	priv, pubPEM, err := GenerateKey([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := LoadPrivateKey(priv, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := SignBlob([]byte(sb.String()), k)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, BundleFile), b)
	pub, err := ParsePublicKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// rewriteArchive rebuilds a tar.gz with edit applied to each member
// (returning nil drops it), and sets the manifest's sha256 to the new one.
func rewriteArchive(t *testing.T, dir, name string, edit func(h *tar.Header, data []byte) []byte) {
	t.Helper()
	archive := linuxArchive(t, dir, name)
	zr, err := gzip.NewReader(bytes.NewReader(mustRead(t, archive)))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		if data = edit(h, data); data == nil {
			continue
		}
		h.Size = int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write(data)
	}
	tw.Close()
	zw.Close()
	old := sha256.Sum256(mustRead(t, archive))
	write(t, archive, buf.Bytes())
	now := sha256.Sum256(buf.Bytes())
	manifest := filepath.Join(dir, "krew", name+".yaml")
	write(t, manifest, bytes.ReplaceAll(mustRead(t, manifest), []byte(hex.EncodeToString(old[:])), []byte(hex.EncodeToString(now[:]))))
}

// Each way a release can be wrong is found, with a message that says where.
func TestCheckReleaseFindsEveryDefect(t *testing.T) {
	dist := snapshot(t)
	pub := readPub(t, testPub)
	darwinBinary := func(t *testing.T, dir string) []byte {
		m, _ := filepath.Glob(filepath.Join(dir, "kubectl-bundle-verify_darwin_arm64*", "kubectl-bundle-verify"))
		if len(m) != 1 {
			t.Fatalf("darwin build of bundle-verify: %v", m)
		}
		return mustRead(t, m[0])
	}
	for _, tc := range []struct {
		name   string
		break_ func(t *testing.T, dir string) crypto.PublicKey
		want   string
	}{
		{"checked with another key", func(t *testing.T, dir string) crypto.PublicKey {
			return readPub(t, testOtherPub)
		}, "does not verify with key"},
		{"checksums edited after signing", func(t *testing.T, dir string) crypto.PublicKey {
			p := filepath.Join(dir, ChecksumsFile)
			write(t, p, append(mustRead(t, p), []byte(strings.Repeat("0", 64)+"  extra\n")...))
			return pub
		}, "does not verify"},
		{"archive changed after checksumming", func(t *testing.T, dir string) crypto.PublicKey {
			a := linuxArchive(t, dir, "bundle-gate")
			b := mustRead(t, a)
			b[100] ^= 1
			write(t, a, b)
			return pub
		}, "checksums.txt says"},
		{"listed file missing", func(t *testing.T, dir string) crypto.PublicKey {
			os.Remove(linuxArchive(t, dir, "bundle-slot") + SBOMSuffix)
			return pub
		}, "no such file"},
		{"manifest sha256 wrong", func(t *testing.T, dir string) crypto.PublicKey {
			p := filepath.Join(dir, "krew", "bundle-journal.yaml")
			sum := sha256.Sum256(mustRead(t, linuxArchive(t, dir, "bundle-journal")))
			write(t, p, bytes.ReplaceAll(mustRead(t, p), []byte(hex.EncodeToString(sum[:])), []byte(strings.Repeat("a", 64))))
			return pub
		}, "the manifest's sha256"},
		{"manifest missing", func(t *testing.T, dir string) crypto.PublicKey {
			os.Remove(filepath.Join(dir, "krew", "bundle-switch.yaml"))
			return pub
		}, "bundle-switch: open"},
		{"manifest invalid", func(t *testing.T, dir string) crypto.PublicKey {
			p := filepath.Join(dir, "krew", "bundle-switch.yaml")
			write(t, p, bytes.Replace(mustRead(t, p), []byte("version: v"), []byte("version: "), 1))
			return pub
		}, "leading v"},
		{"no LICENSE in the archive", func(t *testing.T, dir string) crypto.PublicKey {
			rewriteArchive(t, dir, "bundle-verify", func(h *tar.Header, b []byte) []byte {
				if h.Name == "LICENSE" {
					return nil
				}
				return b
			})
			return resign(t, dir)
		}, "no LICENSE"},
		{"binary not executable", func(t *testing.T, dir string) crypto.PublicKey {
			rewriteArchive(t, dir, "bundle-verify", func(h *tar.Header, b []byte) []byte {
				if h.Name == "kubectl-bundle-verify" {
					h.Mode = 0o644
				}
				return b
			})
			return resign(t, dir)
		}, "not a regular executable"},
		{"binary for another platform", func(t *testing.T, dir string) crypto.PublicKey {
			darwin := darwinBinary(t, dir)
			rewriteArchive(t, dir, "bundle-verify", func(h *tar.Header, b []byte) []byte {
				if h.Name == "kubectl-bundle-verify" {
					return darwin
				}
				return b
			})
			return resign(t, dir)
		}, "built for darwin/arm64, the manifest selects linux/amd64"},
		{"SBOM lists nothing", func(t *testing.T, dir string) crypto.PublicKey {
			write(t, linuxArchive(t, dir, "bundle-gate")+SBOMSuffix, []byte(`{"spdxVersion":"SPDX-2.3","packages":[]}`))
			return resign(t, dir)
		}, "modules are not listed"},
		{"checksums list the signature", func(t *testing.T, dir string) crypto.PublicKey {
			p := filepath.Join(dir, ChecksumsFile)
			write(t, p, append(mustRead(t, p), []byte(strings.Repeat("0", 64)+"  "+BundleFile+"\n")...))
			return resign(t, dir)
		}, "cannot be signed by a bundle over checksums.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := mutable(t, dist)
			key := tc.break_(t, dir)
			_, err := CheckRelease(dir, key, krewNames())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v\nwant an error containing %q", err, tc.want)
			}
		})
	}
	// Sanity: the untouched copy passes, so each failure above is the case's.
	if _, err := CheckRelease(mutable(t, dist), pub, krewNames()); err != nil {
		t.Fatal(err)
	}
	names := krewNames()
	sort.Strings(names)
	if _, err := CheckRelease(mutable(t, dist), pub, append(names, "bundle-missing")); err == nil {
		t.Fatal("a plugin without a manifest passed")
	}
}
