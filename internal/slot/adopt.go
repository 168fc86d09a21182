package slot

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
)

// AdoptOptions name a running site (built the way offline-run.sh builds
// it) and the package it runs.
type AdoptOptions struct {
	// Cluster is the site's kind cluster (airgap-mgmt).
	Cluster string
	// Context reaches it (kind-airgap-mgmt).
	Context string
	// Registry is the site's registry container and RegistryPort its
	// published host port (krops-registry-airgap on 5002).
	Registry     string
	RegistryPort int
	// Workloads are the site's CAPD workload clusters, unsuffixed (airgap-wl).
	Workloads []string
	// Package is the verified, staged archive; Digest its sha256, Name and
	// Version from its zarf.yaml.
	Package, Digest, Name, Version string
	// Site, when set, has adopt read the settings a slot built beside the
	// site needs into config.yaml (ReadSite) once the site is found to be
	// the one named and to run the package, before the slot is recorded.
	Site *SiteOptions
}

// AdoptDefaults are the site's names as offline-run.sh sets them: the
// config's prefixes without a slot suffix.
func (c *Config) AdoptDefaults() AdoptOptions {
	return AdoptOptions{Cluster: c.ClusterPrefix, Context: "kind-" + c.ClusterPrefix, Registry: c.RegistryName,
		RegistryPort: c.RegistryPortBase, Workloads: append([]string(nil), c.WorkloadClusters...)}
}

// AdoptResult is what adopt found and recorded.
type AdoptResult struct {
	Record *Record `json:"record"`
	// ManifestDigest is the digest zarf computes for the archive, equal to
	// the one in zarf's deployed-package record in the cluster.
	ManifestDigest string `json:"manifestDigest"`
	// Secret is that record (namespace/name).
	Secret string `json:"secret"`
	// Config is what adopt read from the site for config.yaml.
	Config *SiteRead `json:"config,omitempty"`
}

// NamesOf returns the names slot slotName has: an adopted slot's are its
// record's, any other's are derived from the config. Its workload
// clusters are those names less the ones an S3 pivot moved out of the
// slot, plus the ones a pivot moved in (the record's MovedOut, MovedIn):
// the slot whose providers manage a workload cluster's containers is the
// one that removes them and lists them as its losses.
func (m *Manager) NamesOf(slotName string) (*Names, error) {
	n, err := m.Config.NamesFor(slotName)
	if err != nil {
		return nil, err
	}
	rec, err := Load(m.Dir, slotName)
	if err != nil {
		// Lost or damaged: the history keeps whether it was adopted, and
		// what a pivot moved.
		rec = m.historyRecord(slotName)
	}
	if rec == nil {
		return n, nil
	}
	if rec.Adopted {
		n = m.Config.adoptedNames(rec, n)
	}
	n.Workloads = movedWorkloads(n.Workloads, rec)
	return n, nil
}

// movedWorkloads is names less rec.MovedOut, plus rec.MovedIn.
func movedWorkloads(names []string, rec *Record) []string {
	var out []string
	for _, w := range names {
		if !slices.Contains(rec.MovedOut, w) {
			out = append(out, w)
		}
	}
	for _, w := range rec.MovedIn {
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

func (c *Config) adoptedNames(rec *Record, n *Names) *Names {
	a := *n
	a.Adopted = true
	a.Cluster, a.Context, a.Registry, a.RegistryPort = rec.Cluster, rec.Context, rec.Registry, rec.RegistryPort
	a.Workloads = append([]string(nil), rec.Workloads...)
	a.derived = nil
	for _, s := range c.Slots {
		if d, err := c.NamesFor(s); err == nil {
			a.derived = append(a.derived, d)
		}
	}
	return &a
}

// Adopt registers a running site as slot slotName without changing it:
// the cluster, its registry container and the package zarf recorded there
// must be the ones named. The caller has checked that no slot is active or
// recorded (adopt is a first install) and verified and staged the package.
// The cluster's credentials are copied into a context of the slot's own
// (kind-<clusterPrefix>-<slot>, as create names it), so that the alias
// context, which may be the site's own kind-<cluster>, can move to another
// slot and retiring this one never deletes it.
func (m *Manager) Adopt(ctx context.Context, slotName string, o AdoptOptions) (*AdoptResult, error) {
	n, err := m.Config.NamesFor(slotName)
	if err != nil {
		return nil, err
	}
	env := func(format string, args ...any) error { return errkind.New(errkind.Environment, format, args...) }
	if n.Context == m.Config.AliasContext || n.Context == o.Context {
		return nil, env("slot %s's own context would be %s, which is the alias context or the site's: pick another clusterPrefix", slotName, n.Context)
	}
	if ok, err := m.Kind.Exists(ctx, o.Cluster); err != nil {
		return nil, env("looking for kind cluster %s: %w", o.Cluster, err)
	} else if !ok {
		return nil, env("kind cluster %s does not exist (kind get clusters lists them; --cluster names the site's)", o.Cluster)
	}
	cs, err := m.containers(ctx)
	if err != nil {
		return nil, env("listing containers: %w", err)
	}
	found := false
	for _, c := range cs {
		if c.Name == o.Registry {
			found = true
			if !publishes(c.Ports, strconv.Itoa(o.RegistryPort)) {
				return nil, env("registry container %s does not publish port %d (its ports: %q; --registry-port names the site's)", o.Registry, o.RegistryPort, c.Ports)
			}
		}
	}
	if !found {
		return nil, env("registry container %s does not exist (docker ps -a lists them; --registry names the site's)", o.Registry)
	}
	raw, err := loadingRules(m.Kubeconfig).Load()
	if err != nil {
		return nil, env("loading the kubeconfig: %w", err)
	}
	src, ok := raw.Contexts[o.Context]
	if !ok {
		return nil, env("kube context %s does not exist in the kubeconfig (kubectl config get-contexts lists them; --context names the site's)", o.Context)
	}
	if _, taken := raw.Contexts[n.Context]; taken {
		return nil, errkind.New(errkind.Conflict, "kube context %s, slot %s's own, already exists: remove it (kubectl config delete-context %s) if nothing uses it", n.Context, slotName, n.Context)
	}
	digest, err := m.manifestDigest(ctx, o.Package)
	if err != nil {
		return nil, err
	}
	secret := "zarf/zarf-package-" + o.Name
	recorded, err := m.deployedDigest(ctx, o.Context, o.Name)
	if err != nil {
		return nil, err
	}
	if recorded != digest {
		return nil, errkind.New(errkind.Negative, "the site runs another package: zarf recorded %s for %s in %s, and %s is %s: adopt the archive the site was deployed from",
			recorded, o.Name, secret, o.Package, digest)
	}
	var site *SiteRead
	if o.Site != nil {
		if site, err = m.ReadSite(ctx, o, *o.Site); err != nil {
			return nil, err
		}
	}
	m.record(slotName, "adopt", "started", nil)
	rec := &Record{Name: slotName, Provider: ProviderKind, Cluster: o.Cluster, Context: n.Context, Kubeconfig: m.Kubeconfig,
		Registry: o.Registry, RegistryPort: o.RegistryPort, State: StateReady, Inputs: "adopted", Created: time.Now().UTC(),
		Adopted: true, Workloads: o.Workloads,
		Package: &PackageRef{Digest: o.Digest, Name: o.Name, Version: o.Version, Deployed: time.Now().UTC()}}
	err = m.step(rec, "adopt", "context", func() error {
		if err := copyContext(kubeconfigTarget(m.Kubeconfig), raw, src, n.Context); err != nil {
			return err
		}
		return writeSlotKubeconfig(m.Dir, slotName, m.Kubeconfig, n.Context)
	})
	if err == nil {
		err = Save(m.Dir, rec)
	}
	if err != nil {
		m.record(slotName, "adopt", "failed", err)
		return nil, err
	}
	ev := IdentityEvent(rec, "adopt", journal.StatusDone)
	ev.Package = o.Digest // the package it runs, as a deploy records it
	m.recordEvent(ev)
	return &AdoptResult{Record: rec, ManifestDigest: digest, Secret: secret, Config: site}, nil
}

// copyContext writes context name into file with copies of the cluster and
// user of src (from the merged kubeconfig raw), under name; every other
// entry of file is kept.
func copyContext(file string, raw *clientcmdapi.Config, src *clientcmdapi.Context, name string) error {
	c, ok := raw.Clusters[src.Cluster]
	if !ok {
		return fmt.Errorf("the site's context names cluster %s, which is not in the kubeconfig", src.Cluster)
	}
	u, ok := raw.AuthInfos[src.AuthInfo]
	if !ok {
		return fmt.Errorf("the site's context names user %s, which is not in the kubeconfig", src.AuthInfo)
	}
	to, err := LoadKubeconfig(file)
	if err != nil {
		return err
	}
	to.Clusters[name], to.AuthInfos[name] = c.DeepCopy(), u.DeepCopy()
	to.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: src.Namespace}
	return WriteKubeconfig(file, to)
}

// manifestDigest is the digest zarf computes for the archive (the OCI
// manifest digest it records when it deploys the package).
func (m *Manager) manifestDigest(ctx context.Context, pkg string) (string, error) {
	out, err := m.Run.Run(ctx, "zarf", "package", "inspect", "digest", pkg, "--no-color")
	if err != nil {
		return "", errkind.New(errkind.Environment, "computing the package's digest with zarf: %w", err)
	}
	lines := strings.Fields(strings.TrimSpace(string(out)))
	if len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], "sha256:") {
		return "", errkind.New(errkind.Environment, "zarf package inspect digest %s printed no digest (output %q)", pkg, out)
	}
	return lines[len(lines)-1], nil
}

// deployedDigest reads the digest in zarf's deployed-package record of
// package name (the secret zarf-package-<name> in namespace zarf, as zarf
// v0.84 writes it) through kubeContext.
func (m *Manager) deployedDigest(ctx context.Context, kubeContext, name string) (string, error) {
	secret := "zarf/zarf-package-" + name
	cfg, err := restConfig(m.Kubeconfig, kubeContext)
	if err != nil {
		return "", errkind.New(errkind.Environment, "context %s: %w", kubeContext, err)
	}
	cfg.Timeout = 30 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", errkind.New(errkind.Environment, "context %s: %w", kubeContext, err)
	}
	s, err := cs.CoreV1().Secrets("zarf").Get(ctx, "zarf-package-"+name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", errkind.New(errkind.Environment, "package %s is not deployed in the cluster of context %s (no secret %s, where zarf records a deployed package): adopt the package the site runs (zarf package list shows it)", name, kubeContext, secret)
	}
	if err != nil {
		return "", errkind.New(errkind.Environment, "reading zarf's record of package %s (secret %s) through context %s: %w", name, secret, kubeContext, err)
	}
	var dp struct {
		Name       string `json:"name"`
		Digest     string `json:"digest"`
		CLIVersion string `json:"cliVersion"`
	}
	if err := json.Unmarshal(s.Data["data"], &dp); err != nil {
		return "", errkind.New(errkind.Environment, "secret %s does not hold zarf's record of a deployed package: %v", secret, err)
	}
	if dp.Digest == "" {
		v := dp.CLIVersion
		if v == "" {
			v = "unknown"
		}
		return "", errkind.New(errkind.Environment, "zarf's record of package %s (secret %s, written by zarf %s) holds no digest: zarf records one from v0.84 on, so the deployed bytes cannot be matched to the archive; "+
			"deploy the archive again with zarf v0.84 or later (zarf package deploy ARCHIVE --confirm, as offline-run.sh does), then adopt", name, secret, v)
	}
	return dp.Digest, nil
}

// removeAdoptedEntries removes an adopted slot's kubeconfig entries: its
// own context and the site's kind-<cluster> entries, except the alias
// context and any cluster or user a kept context still uses (kind's
// delete would remove kind-<cluster> whole, and that may be the alias).
func removeAdoptedEntries(file, alias string, contexts ...string) error {
	to, err := LoadKubeconfig(file)
	if err != nil {
		return err
	}
	changed := false
	for _, c := range contexts {
		if c == alias {
			continue
		}
		if _, ok := to.Contexts[c]; ok {
			delete(to.Contexts, c)
			changed = true
		}
	}
	used := map[string]bool{}
	for _, c := range to.Contexts {
		used["c/"+c.Cluster], used["u/"+c.AuthInfo] = true, true
	}
	for _, c := range contexts {
		if _, ok := to.Clusters[c]; ok && !used["c/"+c] {
			delete(to.Clusters, c)
			changed = true
		}
		if _, ok := to.AuthInfos[c]; ok && !used["u/"+c] {
			delete(to.AuthInfos, c)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return WriteKubeconfig(file, to)
}

// destroyAdopted deletes an adopted slot's kind cluster without letting
// kind touch the shared kubeconfig, then removes the slot's entries there.
func (m *Manager) destroyAdopted(ctx context.Context, rec *Record, n *Names) error {
	if err := m.step(rec, "destroy", "cluster", func() error {
		private, err := os.MkdirTemp("", "kubectl-bundle-adopted-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(private)
		if err := m.Kind.Delete(ctx, n.Cluster, private+"/kubeconfig"); err != nil {
			return err
		}
		return removeAdoptedEntries(kubeconfigTarget(rec.Kubeconfig), m.Config.AliasContext, rec.Context, kindEntry(n.Cluster))
	}); err != nil {
		return err
	}
	return m.step(rec, "destroy", "containers", func() error { return m.removeContainers(ctx, n) })
}
