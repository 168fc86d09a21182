package slot

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/offline"
	"github.com/kubectl-bundle/kubectl-bundle/internal/seed"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// Config is <state>/config.yaml: how slots are built. A flag beats an
// environment variable, which beats the file, which beats the default.
type Config struct {
	APIVersion string `yaml:"apiVersion,omitempty" json:"apiVersion"`
	Kind       string `yaml:"kind,omitempty" json:"kind"`
	// Provider names a registered provider (provider_*.go): kind (the
	// default) or existing.
	Provider string `yaml:"provider,omitempty" json:"provider"`
	// Slots lists the slot names in order; a slot's index (its port
	// offset) is its position here.
	Slots            []string `yaml:"slots,omitempty" json:"slots"`
	ClusterPrefix    string   `yaml:"clusterPrefix,omitempty" json:"clusterPrefix"`
	RegistryName     string   `yaml:"registryName,omitempty" json:"registryName"`
	RegistryPortBase int      `yaml:"registryPortBase,omitempty" json:"registryPortBase"`
	RegistryImage    string   `yaml:"registryImage,omitempty" json:"registryImage"`
	NodeImage        string   `yaml:"nodeImage,omitempty" json:"nodeImage"`
	DockerSocket     string   `yaml:"dockerSocket,omitempty" json:"dockerSocket"`
	// ZarfRegistry is the registry zarf init sets up: "nodeport" (zarf's
	// own, from the init package, on NodePort 31999; the default) or
	// "slot" (the slot's registry container, as zarf's external registry at
	// 127.0.0.1:<port>; the node's containerd pulls it from the kind network;
	// create also gives it the in-cluster name zarf's own registry has, for
	// pods such as Flux's: registrysvc.go).
	ZarfRegistry string `yaml:"zarfRegistry,omitempty" json:"zarfRegistry,omitempty"`
	// Archives is the directory with the init package and image archives.
	Archives        string `yaml:"archives,omitempty" json:"archives"`
	InitPackageGlob string `yaml:"initPackageGlob,omitempty" json:"initPackageGlob"`
	// Variables are passed to zarf with --set-variables; ${SLOT} expands to
	// the slot's name.
	Variables map[string]string `yaml:"variables,omitempty" json:"variables"`
	// WorkloadClusters are the CAPD workload-cluster base names a package
	// creates; per slot they are <name>-<slot> (the package suffixes them
	// with the SLOT variable). Preflight checks their containers are free.
	WorkloadClusters []string `yaml:"workloadClusters,omitempty" json:"workloadClusters"`
	// SlotVariable says whether blue/green needs the package to declare
	// the Zarf variable SLOT: "required" (the default; preflight
	// --blue-green refuses a package without it) or "optional" (for
	// packages whose names never reach the shared Docker daemon or
	// network: a missing SLOT is reported, not refused; a name that is the
	// same for both slots is still refused).
	SlotVariable string `yaml:"slotVariable,omitempty" json:"slotVariable,omitempty"`
	// AliasContext is the kube context that follows the active slot
	// (default kind-<clusterPrefix>, the name the site's scripts know).
	AliasContext string `yaml:"aliasContext,omitempty" json:"aliasContext"`
	// RegistryAlias is the network alias that follows the active slot's registry.
	RegistryAlias string `yaml:"registryAlias,omitempty" json:"registryAlias"`
	Network       string `yaml:"network,omitempty" json:"network"`
	// SoakWindow is how long a switch soaks before accept --if-soaked accepts it.
	SoakWindow string `yaml:"soakWindow,omitempty" json:"soakWindow"`
	// Existing maps a slot to the kube context the existing provider uses.
	Existing map[string]ExistingSlot `yaml:"existing,omitempty" json:"existing,omitempty"`
	// Verify is the site's verification policy: kubectl bundle-verify
	// uses it when its flags do not say otherwise.
	Verify VerifyPolicy `yaml:"verify,omitempty" json:"verify,omitempty"`
	// Offline is the site's offline assurance: the strategy scripts refuse
	// to deploy while a public registry answers (kubectl bundle-journal
	// offline-check).
	Offline OfflinePolicy `yaml:"offline,omitempty" json:"offline,omitempty"`
	// ZarfInitTimeout bounds zarf init (the site's 1m); ZarfDeployTimeout
	// bounds zarf package deploy (the site's 5m). zarf gets it as --timeout
	// and is stopped when it overruns it.
	ZarfInitTimeout   string `yaml:"zarfInitTimeout,omitempty" json:"zarfInitTimeout"`
	ZarfDeployTimeout string `yaml:"zarfDeployTimeout,omitempty" json:"zarfDeployTimeout"`
	// GateTimeout bounds a gate run (default: the largest check timeout).
	GateTimeout string `yaml:"gateTimeout,omitempty" json:"gateTimeout,omitempty"`
	// GateCheckTimeouts overrides the timeout of gate checks by name.
	GateCheckTimeouts map[string]string `yaml:"gateCheckTimeouts,omitempty" json:"gateCheckTimeouts,omitempty"`
	// EvidenceKeep is how many transactions' evidence journal end keeps
	// (0: all); the evidence of what serves is never removed.
	EvidenceKeep int `yaml:"evidenceKeep,omitempty" json:"evidenceKeep"`
	// Seed lists what slot create pushes into a kind slot's registry once
	// it runs (what stage-and-create-cluster.sh pushes into krops-registry):
	// the Flux config artifact and the Helm charts the slot's workloads
	// pull, each {ref: REPOSITORY:TAG, path: a directory, OCI layout or
	// chart archive}, paths relative to archives. slot create --seed
	// replaces the list.
	Seed []seed.Entry `yaml:"seed,omitempty" json:"seed,omitempty"`

	// provider is the registered provider Provider names, resolved once by
	// validate.
	provider Provider
	// fileKeys are the string settings the file sets.
	fileKeys map[string]bool
}

// FromFile says whether config.yaml sets the string setting key.
func (c *Config) FromFile(key string) bool { return c.fileKeys[key] }

// Keyless says the policy names the signers (identity and issuer), so
// that verify needs no flags.
func (v VerifyPolicy) Keyless() bool {
	return (v.CertificateIdentity != "" || v.CertificateIdentityRegexp != "") && (v.CertificateOIDCIssuer != "" || v.CertificateOIDCIssuerRegexp != "")
}

// VerifyPolicy is the site's verification policy (config.yaml's verify:),
// so that the strategy scripts need no verification flags. Each flag of
// kubectl bundle-verify overrides its setting here.
type VerifyPolicy struct {
	// Keyless: who may sign (exact or regexp) and the OIDC issuer that
	// vouched for them, e.g. a CI workflow identity and
	// https://token.actions.githubusercontent.com.
	CertificateIdentity         string `yaml:"certificateIdentity,omitempty" json:"certificateIdentity,omitempty"`
	CertificateIdentityRegexp   string `yaml:"certificateIdentityRegexp,omitempty" json:"certificateIdentityRegexp,omitempty"`
	CertificateOIDCIssuer       string `yaml:"certificateOIDCIssuer,omitempty" json:"certificateOIDCIssuer,omitempty"`
	CertificateOIDCIssuerRegexp string `yaml:"certificateOIDCIssuerRegexp,omitempty" json:"certificateOIDCIssuerRegexp,omitempty"`
	// TrustedRoot is a Sigstore trusted_root.json (default: the public-good
	// root the pinned zarf embeds). A relative path is relative to the
	// state dir.
	TrustedRoot string `yaml:"trustedRoot,omitempty" json:"trustedRoot,omitempty"`
	// RequireDigests makes every verify check the digest-pin policy
	// (--require-digests).
	RequireDigests bool `yaml:"requireDigests,omitempty" json:"requireDigests,omitempty"`
	// DigestExemptions are image references the digest-pin policy does
	// not apply to, exactly as zarf.yaml spells them.
	DigestExemptions []string `yaml:"digestExemptions,omitempty" json:"digestExemptions,omitempty"`
}

// OfflinePolicy is config.yaml's offline: section. The check is on by
// default, as in offline-run.sh: only SKIP_OFFLINE_CHECK=1 in the
// strategy scripts' environment skips it (recorded as caller-monitored).
type OfflinePolicy struct {
	// WaitSeconds is how long to wait for the endpoints to stop answering
	// before refusing; 0 probes once. Unset: 900 (offline-run.sh's
	// OFFLINE_WAIT_SECONDS), unless the scripts get --offline-wait or
	// $OFFLINE_WAIT_SECONDS.
	WaitSeconds *int `yaml:"waitSeconds,omitempty" json:"waitSeconds,omitempty"`
	// Endpoints are probed: http(s) URLs (any answer is reachable) or
	// HOST:PORT (a TCP connection is reachable). Default: the registries
	// offline-run.sh probes, https://ghcr.io and https://registry.k8s.io.
	Endpoints []string `yaml:"endpoints,omitempty" json:"endpoints,omitempty"`
	// ProbeTimeout bounds each probe (default 3s).
	ProbeTimeout string `yaml:"probeTimeout,omitempty" json:"probeTimeout,omitempty"`
}

// ExistingSlot is a cluster the operator already has.
type ExistingSlot struct {
	Context    string `yaml:"context" json:"context"`
	Kubeconfig string `yaml:"kubeconfig,omitempty" json:"kubeconfig,omitempty"`
	// Init runs zarf init there too (default false: the cluster is ready).
	Init bool `yaml:"init,omitempty" json:"init,omitempty"`
}

// The images a site loads from its archives (docker load keeps their tags,
// not a repository digest): references by tag, so Docker never reaches for
// a registry. A site pins one by its image ID as NAME:TAG@sha256:<image ID>
// (what `docker image inspect --format '{{.Id}}'` prints); create checks it.
const (
	DefaultNodeImage     = "kindest/node:v1.36.4"
	DefaultRegistryImage = "registry:3"
)

// The registries zarf init can set up (Config.ZarfRegistry).
const (
	ZarfRegistryNodePort = "nodeport"
	ZarfRegistrySlot     = "slot"
)

// Whether blue/green needs the package's SLOT variable (Config.SlotVariable).
const (
	SlotVariableRequired = "required"
	SlotVariableOptional = "optional"
)

// Defaults are the krops site's values.
func Defaults() Config {
	return Config{
		APIVersion: RecordAPIVersion, Kind: "Config",
		Provider:         ProviderKind,
		Slots:            []string{"a", "b"},
		ClusterPrefix:    "airgap-mgmt",
		RegistryName:     "krops-registry-airgap",
		RegistryPortBase: 5002,
		RegistryImage:    DefaultRegistryImage,
		NodeImage:        DefaultNodeImage,
		DockerSocket:     "/var/run/docker.sock",
		Archives:         "archives",
		InitPackageGlob:  "zarf-init-*-v*.tar.zst",
		Variables:        map[string]string{"SLOT": "${SLOT}"},
		WorkloadClusters: []string{"airgap-wl"},
		RegistryAlias:    "krops-registry",
		Network:          "kind",
		SoakWindow:       "24h",
		ZarfInitTimeout:  DefaultZarfInitTimeout.String(),
		// (time.Duration's String spells 5m as 5m0s.)
		ZarfDeployTimeout: DefaultZarfDeployTimeout.String(),
		EvidenceKeep:      DefaultEvidenceKeep,
	}
}

// The site's timeouts for zarf, and the default evidence retention.
const (
	DefaultZarfInitTimeout   = time.Minute
	DefaultZarfDeployTimeout = 5 * time.Minute
	DefaultEvidenceKeep      = 20
)

// EnvVars maps each setting to its environment variable.
var EnvVars = map[string]string{
	"provider":          "KUBECTL_BUNDLE_PROVIDER",
	"clusterPrefix":     "KUBECTL_BUNDLE_CLUSTER_PREFIX",
	"registryName":      "KUBECTL_BUNDLE_REGISTRY_NAME",
	"registryPortBase":  "KUBECTL_BUNDLE_REGISTRY_PORT_BASE",
	"registryImage":     "KUBECTL_BUNDLE_REGISTRY_IMAGE",
	"nodeImage":         "KUBECTL_BUNDLE_NODE_IMAGE",
	"zarfRegistry":      "KUBECTL_BUNDLE_ZARF_REGISTRY",
	"dockerSocket":      "KUBECTL_BUNDLE_DOCKER_SOCKET",
	"archives":          "KUBECTL_BUNDLE_ARCHIVES",
	"initPackageGlob":   "KUBECTL_BUNDLE_INIT_PACKAGE_GLOB",
	"aliasContext":      "KUBECTL_BUNDLE_ALIAS_CONTEXT",
	"registryAlias":     "KUBECTL_BUNDLE_REGISTRY_ALIAS",
	"network":           "KUBECTL_BUNDLE_NETWORK",
	"soakWindow":        "KUBECTL_BUNDLE_SOAK_WINDOW",
	"zarfInitTimeout":   "KUBECTL_BUNDLE_ZARF_INIT_TIMEOUT",
	"zarfDeployTimeout": "KUBECTL_BUNDLE_ZARF_DEPLOY_TIMEOUT",
	"gateTimeout":       "KUBECTL_BUNDLE_GATE_TIMEOUT",
	"evidenceKeep":      "KUBECTL_BUNDLE_EVIDENCE_KEEP",
	"slotVariable":      "KUBECTL_BUNDLE_SLOT_VARIABLE",
}

// ConfigError is a bad config file, variable or flag.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// ErrorKind: configuration mistakes are usage errors.
func (e *ConfigError) ErrorKind() errkind.Kind { return errkind.Usage }

// LoadConfig merges the defaults, the file, the environment (getenv) and
// the flags (settings by name, as in EnvVars; empty values are unset).
func LoadConfig(path string, getenv func(string) string, flags map[string]string) (*Config, error) {
	c := Defaults()
	data, err := state.ReadFile(path, -1, false)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, &ConfigError{fmt.Errorf("reading %s: %w", path, err)}
	default:
		var file Config
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&file); err != nil && !errors.Is(err, fs.ErrNotExist) && err.Error() != "EOF" {
			return nil, &ConfigError{fmt.Errorf("%s: %v", path, err)}
		}
		if file.Kind != "" && file.Kind != "Config" {
			return nil, &ConfigError{fmt.Errorf("%s: kind is %q, want Config", path, file.Kind)}
		}
		merge(&c, &file)
		c.fileKeys = map[string]bool{}
		for key, v := range file.strings() {
			if *v != "" {
				c.fileKeys[key] = true
			}
		}
	}
	for key, env := range EnvVars {
		if v := getenv(env); v != "" {
			if err := set(&c, key, v); err != nil {
				return nil, &ConfigError{fmt.Errorf("$%s: %w", env, err)}
			}
		}
	}
	for key, v := range flags {
		if v != "" {
			if err := set(&c, key, v); err != nil {
				return nil, &ConfigError{fmt.Errorf("--%s: %w", flagName(key), err)}
			}
		}
	}
	if c.Archives != "" && !filepath.IsAbs(c.Archives) {
		if abs, err := filepath.Abs(c.Archives); err == nil {
			c.Archives = abs
		}
	}
	if c.AliasContext == "" {
		c.AliasContext = "kind-" + c.ClusterPrefix
	}
	return &c, c.validate()
}

// flagName spells a setting as its flag (registryPortBase -> registry-port-base).
func flagName(key string) string {
	var b strings.Builder
	for _, r := range key {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('-')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// strings maps each string setting's key to its field.
func (c *Config) strings() map[string]*string {
	return map[string]*string{
		"provider": &c.Provider, "clusterPrefix": &c.ClusterPrefix, "registryName": &c.RegistryName,
		"registryImage": &c.RegistryImage, "nodeImage": &c.NodeImage, "dockerSocket": &c.DockerSocket,
		"zarfRegistry": &c.ZarfRegistry,
		"archives":     &c.Archives, "initPackageGlob": &c.InitPackageGlob, "aliasContext": &c.AliasContext,
		"registryAlias": &c.RegistryAlias, "network": &c.Network, "soakWindow": &c.SoakWindow,
		"slotVariable":    &c.SlotVariable,
		"zarfInitTimeout": &c.ZarfInitTimeout, "zarfDeployTimeout": &c.ZarfDeployTimeout, "gateTimeout": &c.GateTimeout,
	}
}

func merge(c, f *Config) {
	from := f.strings()
	for key, dst := range c.strings() {
		if v := *from[key]; v != "" {
			*dst = v
		}
	}
	if f.RegistryPortBase != 0 {
		c.RegistryPortBase = f.RegistryPortBase
	}
	if len(f.Slots) > 0 {
		c.Slots = f.Slots
	}
	if f.Variables != nil {
		c.Variables = f.Variables
	}
	if f.WorkloadClusters != nil {
		c.WorkloadClusters = f.WorkloadClusters
	}
	if f.Existing != nil {
		c.Existing = f.Existing
	}
	c.Verify = f.Verify
	c.Offline = f.Offline
	if f.GateCheckTimeouts != nil {
		c.GateCheckTimeouts = f.GateCheckTimeouts
	}
	if f.EvidenceKeep != 0 {
		c.EvidenceKeep = f.EvidenceKeep
	}
	if f.Seed != nil {
		c.Seed = f.Seed
	}
}

func set(c *Config, key, v string) error {
	if dst, ok := c.strings()[key]; ok {
		*dst = v
		return nil
	}
	if key == "evidenceKeep" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("%q is not a count of transactions (0 keeps all)", v)
		}
		c.EvidenceKeep = n
		return nil
	}
	if key != "registryPortBase" {
		return fmt.Errorf("unknown setting %s", key)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("%q is not a port number", v)
	}
	c.RegistryPortBase = n
	return nil
}

func (c *Config) validate() error {
	bad := func(format string, args ...any) error { return &ConfigError{fmt.Errorf(format, args...)} }
	p, err := ProviderNamed(c.Provider)
	if err != nil {
		return &ConfigError{err}
	}
	c.provider = p
	if c.RegistryPortBase < 1024 || c.RegistryPortBase+len(c.Slots) > 65535 {
		return bad("registryPortBase %d: use a port from 1024 so that every slot's port (base + index) is below 65536", c.RegistryPortBase)
	}
	if d, err := time.ParseDuration(c.SoakWindow); err != nil || d < 0 {
		return bad("soakWindow %q is not a duration (e.g. 24h)", c.SoakWindow)
	}
	for key, v := range map[string]string{"zarfInitTimeout": c.ZarfInitTimeout, "zarfDeployTimeout": c.ZarfDeployTimeout, "gateTimeout": c.GateTimeout} {
		if d, err := time.ParseDuration(v); v != "" && (err != nil || d <= 0) {
			return bad("%s %q is not a positive duration (e.g. 5m)", key, v)
		}
	}
	for name, v := range c.GateCheckTimeouts {
		if d, err := time.ParseDuration(v); err != nil || d <= 0 {
			return bad("gateCheckTimeouts: %s: %q is not a positive duration (e.g. 10m)", name, v)
		}
	}
	if c.EvidenceKeep < 0 {
		return bad("evidenceKeep %d: a count of transactions (0 keeps all)", c.EvidenceKeep)
	}
	for _, s := range c.Slots {
		if err := ValidName(s); err != nil {
			return bad("slots: %v", err)
		}
	}
	switch c.SlotVariable {
	case "", SlotVariableRequired, SlotVariableOptional:
	default:
		return bad("slotVariable %q: use %s or %s", c.SlotVariable, SlotVariableRequired, SlotVariableOptional)
	}
	switch c.ZarfRegistry {
	case "", ZarfRegistryNodePort, ZarfRegistrySlot:
	default:
		return bad("zarfRegistry %q: use %s or %s", c.ZarfRegistry, ZarfRegistryNodePort, ZarfRegistrySlot)
	}
	for i, e := range c.Seed {
		if e.Ref == "" || e.Path == "" {
			return bad("seed[%d]: give both ref (REPOSITORY:TAG) and path", i)
		}
	}
	if err := c.Offline.validate(); err != nil {
		return &ConfigError{err}
	}
	if err := p.ValidateConfig(c); err != nil {
		return &ConfigError{err}
	}
	return nil
}

// Names are everything derived from a slot's name: two slots never share one.
type Names struct {
	Slot         string `json:"slot"`
	Index        int    `json:"index"`
	Cluster      string `json:"cluster"`
	Context      string `json:"context"`
	Registry     string `json:"registry"`
	RegistryPort int    `json:"registryPort"`
	// Workloads are the CAPD workload clusters' names in this slot.
	Workloads []string          `json:"workloads,omitempty"`
	Variables map[string]string `json:"variables,omitempty"`
	// Adopted: the names are an adopted site's own (its record's), not
	// derived from the slot's name.
	Adopted bool `json:"adopted,omitempty"`
	// derived are every configured slot's derived names: an adopted
	// slot's unsuffixed names are prefixes of theirs (airgap-wl of
	// airgap-wl-b), so a name one of them derives is never the adopted
	// slot's.
	derived []*Names
}

// NamesFor derives a slot's names; the slot must be listed in Slots.
func (c *Config) NamesFor(slotName string) (*Names, error) {
	if err := ValidName(slotName); err != nil {
		return nil, &ConfigError{err}
	}
	idx := slices.Index(c.Slots, slotName)
	if idx < 0 {
		return nil, &ConfigError{fmt.Errorf("slot %q is not one of the configured slots %v: add it to slots: in the state dir's config.yaml", slotName, c.Slots)}
	}
	n := &Names{Slot: slotName, Index: idx,
		Cluster:      c.ClusterPrefix + "-" + slotName,
		Registry:     c.RegistryName + "-" + slotName,
		RegistryPort: c.RegistryPortBase + idx,
		Variables:    map[string]string{},
	}
	n.Context = "kind-" + n.Cluster
	for _, w := range c.WorkloadClusters {
		n.Workloads = append(n.Workloads, w+"-"+slotName)
	}
	for k, v := range c.Variables {
		n.Variables[k] = strings.ReplaceAll(v, "${SLOT}", slotName)
	}
	return n, nil
}

func (o *OfflinePolicy) validate() error {
	if o.WaitSeconds != nil && (*o.WaitSeconds < 0 || *o.WaitSeconds > offline.MaxWaitSeconds) {
		return fmt.Errorf("offline.waitSeconds %d: use 0 to %d seconds (a day)", *o.WaitSeconds, offline.MaxWaitSeconds)
	}
	for _, e := range o.Endpoints {
		if err := offline.ParseEndpoint(e); err != nil {
			return fmt.Errorf("offline.endpoints: %w", err)
		}
	}
	if o.ProbeTimeout != "" {
		if d, err := time.ParseDuration(o.ProbeTimeout); err != nil || d <= 0 {
			return fmt.Errorf("offline.probeTimeout %q is not a positive duration (e.g. 3s)", o.ProbeTimeout)
		}
	}
	return nil
}

// Duration returns a duration setting (the validated config's), 0 when unset.
func (c *Config) Duration(key string) time.Duration {
	v, ok := c.strings()[key]
	if !ok || *v == "" {
		return 0
	}
	d, _ := time.ParseDuration(*v)
	return d
}
