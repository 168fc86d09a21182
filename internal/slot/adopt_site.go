package slot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content/oci"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/kubectl-bundle/kubectl-bundle/internal/seed"
)

// SiteRead is what adopt read from a running site for the settings a slot
// built beside it needs (config.yaml's nodeImage, registryImage, archives,
// initPackageGlob, seed), and what became of each in config.yaml.
type SiteRead struct {
	// File is the config.yaml written.
	File     string        `json:"file"`
	Settings []SiteSetting `json:"settings"`
}

// SiteSetting is one setting adopt read (or could not).
type SiteSetting struct {
	Key string `json:"key"`
	// Value is what the site has: a string, or the seed entries.
	Value any `json:"value,omitempty"`
	// From says where it was read.
	From string `json:"from"`
	// Status: written (into config.yaml), kept (config.yaml sets it
	// already: what the operator wrote stays), unchanged (the default is
	// right), or unknown (not determined: Add is what to add).
	Status string `json:"status"`
	// Add is the exact config.yaml text to add when Status is unknown.
	Add string `json:"add,omitempty"`
	// Note says why, or what to check.
	Note string `json:"note,omitempty"`
}

// The statuses of a SiteSetting.
const (
	SettingWritten   = "written"
	SettingKept      = "kept"
	SettingUnchanged = "unchanged"
	SettingUnknown   = "unknown"
)

// Unknown lists the settings adopt could not determine.
func (r *SiteRead) Unknown() []SiteSetting {
	var out []SiteSetting
	for _, s := range r.Settings {
		if s.Status == SettingUnknown {
			out = append(out, s)
		}
	}
	return out
}

// SiteOptions say where adopt looks, beyond the site's names.
type SiteOptions struct {
	// Archives is the site's archives directory, absolute; "" when the
	// operator named none (neither --archives, the environment nor
	// config.yaml).
	Archives string
	// ArchivesFrom says who named it (--archives, $KUBECTL_BUNDLE_ARCHIVES, config.yaml).
	ArchivesFrom string
	// File is the config.yaml to write ("" : the state dir's).
	File string
}

// initPackagePattern finds the candidates for the site's zarf init package
// (krops' archives/zarf-init-arm64.tar.zst as much as zarf's own
// zarf-init-arm64-v0.84.0.tar.zst).
const initPackagePattern = "zarf-init*.tar.zst"

// SiteRegistryTimeout bounds the reading of the site's registry (its
// catalog, and the copy of what it holds).
const SiteRegistryTimeout = 5 * time.Minute

// EnvTestRegistryAddrs maps published registry ports to the addresses
// that answer for them (PORT=HOST:PORT, space-separated): the end-to-end
// suite's registries, whose containers are fakes. Unset at a site.
const EnvTestRegistryAddrs = "KUBECTL_BUNDLE_TEST_REGISTRY_ADDRS"

// registryHost is where this host reaches a registry published on port.
func (m *Manager) registryHost(port int) string {
	if m.RegistryAddr != nil {
		return m.RegistryAddr(port)
	}
	for _, kv := range strings.Fields(os.Getenv(EnvTestRegistryAddrs)) {
		if p, addr, ok := strings.Cut(kv, "="); ok && p == strconv.Itoa(port) {
			return addr
		}
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// ReadSite reads from the running site o names what config.yaml needs
// for a slot built beside it, and writes what it found into config.yaml
// (only keys the file does not set; --archives is written as given):
// the images its node and registry containers run (pinned by image ID),
// the archives directory, the init package there, and what its registry
// holds, copied into the state dir as OCI layouts for create to seed. It
// changes nothing at the site. A setting it cannot determine is Unknown,
// with the text to add; the file is written all the same.
func (m *Manager) ReadSite(ctx context.Context, o AdoptOptions, so SiteOptions) (*SiteRead, error) {
	file := so.File
	if file == "" {
		file = m.Dir.Join("config.yaml")
	}
	doc, err := loadConfigDoc(file)
	if err != nil {
		return nil, err
	}
	r := &SiteRead{File: file}
	node := o.Cluster + "-control-plane"
	r.Settings = append(r.Settings,
		m.readImage(ctx, "nodeImage", node, "the site's node container"),
		m.readImage(ctx, "registryImage", o.Registry, "the site's registry container"))
	arch := readArchives(so)
	r.Settings = append(r.Settings, arch)
	r.Settings = append(r.Settings, m.readInitPackage(so.Archives, doc.has("initPackageGlob")))
	if doc.has("seed") {
		r.Settings = append(r.Settings, SiteSetting{Key: "seed", From: "config.yaml", Status: SettingKept,
			Note: "config.yaml's seed: list is kept; the site's registry was not read"})
	} else {
		r.Settings = append(r.Settings, m.readSeed(ctx, o))
	}
	for i := range r.Settings {
		s := &r.Settings[i]
		if s.Status != SettingWritten {
			continue
		}
		if doc.has(s.Key) && !(s.Key == "archives" && so.ArchivesFrom == "--archives") {
			if have, ok := doc.scalar(s.Key); ok && have == s.Value {
				s.Status, s.Note = SettingUnchanged, "config.yaml has it"
				continue
			}
			have, _ := doc.scalar(s.Key)
			s.Status = SettingKept
			s.Note = fmt.Sprintf("config.yaml says %q, which is kept: the site's is the value shown", have)
			continue
		}
		if err := doc.set(s.Key, s.Value); err != nil {
			return nil, err
		}
	}
	if doc.changed {
		if err := doc.write(file); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// imageIDRE is an image ID as docker prints it.
var imageIDRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// readImage reads the image container runs: NAME:TAG from the reference
// it was started with, pinned by the image ID it runs
// (NAME:TAG@sha256:ID, the pin create checks), so that slot b's
// containers run the same bytes.
func (m *Manager) readImage(ctx context.Context, key, container, what string) SiteSetting {
	s := SiteSetting{Key: key, From: fmt.Sprintf("docker inspect %s (%s)", container, what)}
	unknown := func(note string) SiteSetting {
		s.Status, s.Note = SettingUnknown, note
		s.Add = fmt.Sprintf("%s: NAME:TAG   # the image %s runs: docker inspect --format '{{.Config.Image}}' %s", key, container, container)
		return s
	}
	out, err := m.Run.Run(ctx, "docker", "inspect", "--format", "{{.Config.Image}}\t{{.Image}}", container)
	if err != nil {
		return unknown(fmt.Sprintf("container %s could not be inspected: %v", container, err))
	}
	ref, id, _ := strings.Cut(strings.TrimSpace(string(out)), "\t")
	ref, id = strings.TrimSpace(ref), strings.TrimSpace(id)
	name, _, _ := strings.Cut(ref, "@")
	if name == "" || strings.HasPrefix(name, "sha256:") {
		return unknown(fmt.Sprintf("container %s names no image by name (%q)", container, ref))
	}
	s.Value, s.Status = name, SettingWritten
	if imageIDRE.MatchString(id) {
		s.Value = name + "@" + id
	} else {
		s.Note = fmt.Sprintf("no image ID (%q): written unpinned", id)
	}
	return s
}

// readArchives is the archives directory the operator named.
func readArchives(so SiteOptions) SiteSetting {
	s := SiteSetting{Key: "archives", From: so.ArchivesFrom}
	if so.Archives == "" {
		s.Status, s.From = SettingUnknown, "not named"
		s.Add = "archives: /ABSOLUTE/PATH/TO/THE/SITE/archives   # or adopt --archives DIR"
		s.Note = "the directory of the site's zarf init package and image archives: adopt --archives DIR writes it"
		return s
	}
	s.Value, s.Status = so.Archives, SettingWritten
	if fi, err := os.Stat(so.Archives); err != nil || !fi.IsDir() {
		s.Status = SettingUnknown
		s.Add = "archives: " + so.Archives
		s.Note = fmt.Sprintf("%s is not a directory: name the site's archives (adopt --archives DIR)", so.Archives)
		s.Value = nil
	}
	return s
}

// readInitPackage finds the site's zarf init package in dir: when
// initPackageGlob matches exactly it, nothing is written; when it does
// not and exactly one file looks like one, initPackageGlob becomes its
// name.
func (m *Manager) readInitPackage(dir string, kept bool) SiteSetting {
	s := SiteSetting{Key: "initPackageGlob", From: "the archives directory"}
	if kept {
		s.Status, s.From = SettingKept, "config.yaml"
		return s
	}
	if dir == "" {
		s.Status = SettingUnknown
		s.Add = "initPackageGlob: FILE-NAME   # the site's zarf init package in archives"
		s.Note = "no archives directory to look in"
		return s
	}
	glob := m.Config.InitPackageGlob
	matches, _ := filepath.Glob(filepath.Join(dir, glob))
	if len(matches) == 1 {
		s.Status, s.Value, s.From = SettingUnchanged, glob, filepath.Base(matches[0])
		s.Note = "initPackageGlob " + glob + " matches it"
		return s
	}
	cands, _ := filepath.Glob(filepath.Join(dir, initPackagePattern))
	seen := map[string]bool{}
	var names []string
	for _, c := range append(cands, matches...) {
		if b := filepath.Base(c); !seen[b] {
			seen[b] = true
			names = append(names, b)
		}
	}
	sort.Strings(names)
	switch len(names) {
	case 1:
		s.Status, s.Value, s.From = SettingWritten, globQuote(names[0]), names[0]
		if len(matches) == 0 {
			s.Note = "initPackageGlob " + glob + " matches no file"
		}
		return s
	case 0:
		s.Status = SettingUnknown
		s.Add = "initPackageGlob: FILE-NAME   # the site's zarf init package, put into " + dir
		s.Note = fmt.Sprintf("no zarf init package (%s) in %s", initPackagePattern, dir)
	default:
		s.Status = SettingUnknown
		s.Add = "initPackageGlob: " + globQuote(names[0]) + "   # the one the site was initialised with, of: " + strings.Join(names, ", ")
		s.Note = fmt.Sprintf("%d zarf init packages in %s: %s", len(names), dir, strings.Join(names, ", "))
	}
	return s
}

// globQuote makes a file name a pattern that matches only it.
func globQuote(name string) string {
	return strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`).Replace(name)
}

// krops' config artifact, which the site's workload cluster syncs from.
const kropsArtifact = "krops:latest"

// readSeed reads what the site's registry holds (its catalog and tags)
// and copies each tag into the state dir as an OCI layout (seed/), as
// seed: entries: slot create pushes them into its own registry, so that
// its workload clusters find what the site's pull.
func (m *Manager) readSeed(ctx context.Context, o AdoptOptions) SiteSetting {
	host := m.registryHost(o.RegistryPort)
	s := SiteSetting{Key: "seed", From: fmt.Sprintf("the site's registry %s (http://%s)", o.Registry, host)}
	unknown := func(note string) SiteSetting {
		s.Status, s.Note = SettingUnknown, note
		s.Add = "seed:\n  - ref: " + kropsArtifact + "   # what the site's workloads pull, from the archives\n    path: config-artifact"
		return s
	}
	ctx, cancel := context.WithTimeout(ctx, SiteRegistryTimeout)
	defer cancel()
	refs, err := registryTags(ctx, "http://"+host)
	if err != nil {
		return unknown(fmt.Sprintf("the site's registry did not list what it holds: %v", err))
	}
	if len(refs) == 0 {
		return unknown("the site's registry holds nothing")
	}
	base, err := filepath.Abs(m.Dir.Join("seed"))
	if err != nil {
		return unknown(err.Error())
	}
	var entries []seed.Entry
	used := map[string]bool{}
	for _, ref := range refs {
		dir := filepath.Join(base, layoutName(ref, used))
		if err := copyToLayout(ctx, host, ref, dir); err != nil {
			return unknown(fmt.Sprintf("copying %s from the site's registry: %v", ref, err))
		}
		m.logf("  read %s from the site's registry into %s", ref, dir)
		entries = append(entries, seed.Entry{Ref: ref, Path: dir})
	}
	s.Value, s.Status = entries, SettingWritten
	var have []string
	for _, e := range entries {
		have = append(have, e.Ref)
	}
	s.Note = "holds " + strings.Join(have, ", ")
	if !containsRef(refs, kropsArtifact) {
		s.Note += "; no " + kropsArtifact + " (the config artifact krops' workload cluster syncs from): if the site's workloads pull it, add it to seed: (- ref: krops:latest, path: its directory)"
	}
	return s
}

func containsRef(refs []string, ref string) bool {
	for _, r := range refs {
		if r == ref {
			return true
		}
	}
	return false
}

// layoutName names ref's layout directory: its repository and tag with
// / and : as _, unique among used.
func layoutName(ref string, used map[string]bool) string {
	name := strings.NewReplacer("/", "_", ":", "_").Replace(ref)
	out := name
	for i := 2; used[out]; i++ {
		out = name + "-" + strconv.Itoa(i)
	}
	used[out] = true
	return out
}

// maxSiteRepositories bounds the catalog read.
const maxSiteRepositories = 1000

// registryTags lists REPOSITORY:TAG for every tag the registry at base holds.
func registryTags(ctx context.Context, base string) ([]string, error) {
	var cat struct {
		Repositories []string `json:"repositories"`
	}
	if err := getJSON(ctx, base+"/v2/_catalog?n="+strconv.Itoa(maxSiteRepositories), &cat); err != nil {
		return nil, err
	}
	var out []string
	for _, r := range cat.Repositories {
		var tags struct {
			Tags []string `json:"tags"`
		}
		if err := getJSON(ctx, base+"/v2/"+(&url.URL{Path: r}).EscapedPath()+"/tags/list", &tags); err != nil {
			return nil, err
		}
		for _, t := range tags.Tags {
			out = append(out, r+":"+t)
		}
	}
	sort.Strings(out)
	return out, nil
}

// copyToLayout copies ref (REPOSITORY:TAG) from the registry at host into
// a fresh OCI image layout at dir, tagged with its tag.
func copyToLayout(ctx context.Context, host, ref, dir string) error {
	i := strings.LastIndex(ref, ":")
	repoName, tag := ref[:i], ref[i+1:]
	repo, err := remote.NewRepository(host + "/" + repoName)
	if err != nil {
		return err
	}
	repo.PlainHTTP = true
	repo.Client = &auth.Client{Client: http.DefaultClient, Cache: auth.NewCache()}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	store, err := oci.New(dir)
	if err != nil {
		return err
	}
	_, err = oras.Copy(ctx, repo, tag, store, tag, oras.DefaultCopyOptions)
	return err
}

// loadConfigDoc reads file for editing; a missing file is an empty one.
func loadConfigDoc(file string) (*configDoc, error) {
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return newConfigDoc(nil)
	}
	if err != nil {
		return nil, &ConfigError{fmt.Errorf("reading %s: %w", file, err)}
	}
	d, err := newConfigDoc(data)
	if err != nil {
		return nil, &ConfigError{fmt.Errorf("%s: %w", file, err)}
	}
	return d, nil
}
