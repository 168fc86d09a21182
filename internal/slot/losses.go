package slot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/seed"
)

// LossTimeout bounds each look at what a slot holds: a slot being
// discarded may be broken, and the look is best effort.
const LossTimeout = 5 * time.Second

// Claim is one PersistentVolumeClaim and its size.
type Claim struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Size      string `json:"size"`
}

// Losses is what discarding a slot loses: the PersistentVolumeClaims of
// its cluster and the repositories and tags of its registry. What could
// not be looked at is said, not counted.
type Losses struct {
	Slot         string   `json:"slot"`
	Claims       []Claim  `json:"claims"`
	Repositories []string `json:"repositories"`
	// Seeded are the registry's tags that hold what slot create seeded
	// from the archives, digest unchanged: not lost (the archives have
	// them), so not in Repositories.
	Seeded []string `json:"seeded,omitempty"`
	// Workloads are the workload clusters discarding the slot deletes:
	// those an S1 update kept it running as their owner (its record's
	// ownsWorkloads) and those of its own that run on the Docker daemon
	// (config.yaml's workloadClusters, as the slot names them).
	Workloads []string `json:"workloadClusters,omitempty"`
	// Unnamed are the Cluster API Clusters in the slot's management
	// cluster (kind provider) that are not among its workload clusters:
	// destroying the slot would leave their containers running, owned by
	// nothing, and a management cluster built again with the same package
	// would start a second control plane beside them (docs/experiments.md,
	// experiments (a) and (e)). Refusal says what to do.
	Unnamed []string `json:"unnamedWorkloadClusters,omitempty"`
	// ClaimsUnknown and RegistryUnknown say why a list could not be read;
	// WorkloadsUnknown why the running workload clusters could not be.
	ClaimsUnknown    string `json:"claimsUnknown,omitempty"`
	RegistryUnknown  string `json:"registryUnknown,omitempty"`
	WorkloadsUnknown string `json:"workloadClustersUnknown,omitempty"`
}

// Empty: nothing known would be lost.
func (l *Losses) Empty() bool {
	return len(l.Claims) == 0 && len(l.Repositories) == 0 && len(l.Workloads) == 0 && len(l.Unnamed) == 0
}

// Summary is the list in one line, as the journal records it.
func (l *Losses) Summary() string {
	var parts []string
	for _, w := range l.Workloads {
		parts = append(parts, "workload cluster "+w)
	}
	for _, w := range l.Unnamed {
		parts = append(parts, "workload cluster "+w+" (not named by workloadClusters: left running)")
	}
	for _, c := range l.Claims {
		parts = append(parts, fmt.Sprintf("pvc %s/%s %s", c.Namespace, c.Name, c.Size))
	}
	for _, r := range l.Repositories {
		parts = append(parts, "registry "+r)
	}
	if len(parts) == 0 {
		parts = append(parts, "nothing")
	}
	s := strings.Join(parts, ", ")
	if l.ClaimsUnknown != "" {
		s += "; claims unknown: " + l.ClaimsUnknown
	}
	if l.RegistryUnknown != "" {
		s += "; registry unknown: " + l.RegistryUnknown
	}
	if l.WorkloadsUnknown != "" {
		s += "; workload clusters unknown: " + l.WorkloadsUnknown
	}
	return s
}

// Losses lists what discarding slotName loses, best effort, and records
// the list in the journal's history.
func (m *Manager) Losses(ctx context.Context, slotName string) (*Losses, error) {
	l := &Losses{Slot: slotName, Claims: []Claim{}, Repositories: []string{}}
	rec, err := Load(m.Dir, slotName)
	var nf *NotFoundError
	switch {
	case errors.As(err, &nf):
		return l, nil // no slot: nothing to lose
	case err != nil:
		// Damage is for the command that discards the slot to report;
		// here it only means the lists are unknown, but its workload
		// clusters that run are found by their names all the same.
		l.ClaimsUnknown, l.RegistryUnknown = err.Error(), err.Error()
		m.addRunningWorkloads(ctx, l)
		return l, m.recordLosses(l)
	}
	l.Workloads = append(l.Workloads, rec.OwnsWorkloads...)
	m.addRunningWorkloads(ctx, l)
	if claims, err := m.claims(ctx, rec); err != nil {
		l.ClaimsUnknown = err.Error()
	} else {
		l.Claims = claims
		if rec.Provider == ProviderKind {
			m.addUnnamed(ctx, rec, l)
		}
	}
	if rec.RegistryPort > 0 {
		base := "http://" + m.registryHost(rec.RegistryPort)
		if repos, err := m.catalog(ctx, base); err != nil {
			l.RegistryUnknown = err.Error()
		} else {
			l.Repositories, l.Seeded = withoutSeeded(ctx, base, repos, rec.Seeded)
		}
	}
	return l, m.recordLosses(l)
}

// addRunningWorkloads adds to l the workload clusters of its slot that run.
func (m *Manager) addRunningWorkloads(ctx context.Context, l *Losses) {
	running, err := m.RunningWorkloads(ctx, l.Slot)
	if err != nil {
		l.WorkloadsUnknown = err.Error()
		return
	}
	for _, w := range running {
		if !slices.Contains(l.Workloads, w) {
			l.Workloads = append(l.Workloads, w)
		}
	}
}

// Refusal is the error that stops the discard of the slot (exit 3)
// while its management cluster holds Clusters that are not its workload
// clusters (Unnamed); nil when it holds none. --yes does not pass it.
func (l *Losses) Refusal() error {
	if len(l.Unnamed) == 0 {
		return nil
	}
	return &UnnamedError{Slot: l.Slot, Clusters: l.Unnamed}
}

// UnnamedError: the slot's management cluster holds Clusters that its
// destroy would leave running, owned by nothing.
type UnnamedError struct {
	Slot     string
	Clusters []string
}

func (e *UnnamedError) Error() string {
	return fmt.Sprintf("slot %s's management cluster holds workload clusters that config.yaml's workloadClusters does not name: %s. "+
		"Destroying the slot removes only the containers of the workload clusters it names, so theirs would keep running, owned by nothing, "+
		"and a management cluster built again with the same package does not adopt them: it starts a second control plane beside them behind the same load balancer "+
		"(docs/experiments.md, experiments (a) and (e)); nothing was changed. Name them in workloadClusters (the base name: the slot's workload clusters are BASE-%s, "+
		"so a package names them from its SLOT variable), or delete them through the management cluster first (kubectl delete cluster.cluster.x-k8s.io NAME -n NAMESPACE), then run again",
		e.Slot, strings.Join(e.Clusters, ", "), e.Slot)
}

// ErrorKind: a precondition of the discard is missing.
func (e *UnnamedError) ErrorKind() errkind.Kind { return errkind.Environment }

// clusterGroupVersions are the Cluster API versions whose Clusters are
// listed, newest first.
var clusterGroupVersions = []string{"v1beta2", "v1beta1"}

// addUnnamed adds to l.Unnamed the Clusters of rec's management cluster
// that are not among the slot's workload clusters (best effort: what
// cannot be listed is said in WorkloadsUnknown; no Cluster API, nothing).
func (m *Manager) addUnnamed(ctx context.Context, rec *Record, l *Losses) {
	n, err := m.NamesOf(rec.Name)
	if err != nil {
		return
	}
	cfg, err := restConfig(rec.Kubeconfig, rec.Context)
	if err != nil {
		l.WorkloadsUnknown = err.Error()
		return
	}
	cfg.Timeout = LossTimeout
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		l.WorkloadsUnknown = err.Error()
		return
	}
	ctx, cancel := context.WithTimeout(ctx, LossTimeout)
	defer cancel()
	for _, v := range clusterGroupVersions {
		list, err := dc.Resource(schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: v, Resource: "clusters"}).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			l.WorkloadsUnknown = fmt.Sprintf("listing the Cluster API Clusters in context %s: %v", rec.Context, err)
			return
		}
		for _, c := range list.Items {
			if name := c.GetName(); !slices.Contains(n.Workloads, name) && !slices.Contains(l.Unnamed, name) {
				l.Unnamed = append(l.Unnamed, name)
			}
		}
		sort.Strings(l.Unnamed)
		return
	}
}

func (m *Manager) recordLosses(l *Losses) error {
	if m.Journal == nil {
		return nil
	}
	return m.Journal.Record(journal.Event{Type: "slot", Slot: l.Slot, Detail: "discards: " + l.Summary()})
}

func (m *Manager) claims(ctx context.Context, rec *Record) ([]Claim, error) {
	if rec.Context == "" {
		return nil, fmt.Errorf("slot %s has no kube context", rec.Name)
	}
	cfg, err := restConfig(rec.Kubeconfig, rec.Context)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = LossTimeout
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, LossTimeout)
	defer cancel()
	list, err := cs.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing PersistentVolumeClaims in context %s: %w", rec.Context, err)
	}
	out := []Claim{}
	for _, p := range list.Items {
		out = append(out, Claim{Namespace: p.Namespace, Name: p.Name, Size: claimSize(&p)})
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name
	})
	return out, nil
}

// claimSize is the bound capacity, else the request.
func claimSize(p *corev1.PersistentVolumeClaim) string {
	if q, ok := p.Status.Capacity[corev1.ResourceStorage]; ok {
		return q.String()
	}
	if q, ok := p.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
		return q.String()
	}
	return "unknown size"
}

// maxRepositories caps what is asked of a registry being discarded.
const maxRepositories = 200

// catalog lists the registry's repositories with their tags
// (repo:tag1,tag2) through the distribution API.
func (m *Manager) catalog(ctx context.Context, base string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, LossTimeout)
	defer cancel()
	var cat struct {
		Repositories []string `json:"repositories"`
	}
	if err := getJSON(ctx, base+"/v2/_catalog?n="+strconv.Itoa(maxRepositories), &cat); err != nil {
		return nil, err
	}
	out := []string{}
	for _, r := range cat.Repositories {
		var tags struct {
			Tags []string `json:"tags"`
		}
		entry := r
		if err := getJSON(ctx, base+"/v2/"+(&url.URL{Path: r}).EscapedPath()+"/tags/list", &tags); err == nil && len(tags.Tags) > 0 {
			sort.Strings(tags.Tags)
			entry += ":" + strings.Join(tags.Tags, ",")
		}
		out = append(out, entry)
	}
	sort.Strings(out)
	return out, nil
}

func getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 4<<20)).Decode(v)
}

// withoutSeeded takes out of repos (repo:tag1,tag2 entries) the tags that
// still hold the digest create seeded there: the archives have them. A
// tag whose digest changed since, or that cannot be asked, stays listed.
func withoutSeeded(ctx context.Context, base string, repos []string, seeded []seed.Result) (kept, dropped []string) {
	same := map[string]bool{}
	for _, sd := range seeded {
		repo, tag, ok := strings.Cut(sd.Ref, ":")
		if ok && manifestDigest(ctx, base, repo, tag) == sd.Digest {
			same[sd.Ref] = true
		}
	}
	kept = []string{}
	for _, entry := range repos {
		repo, tags, ok := strings.Cut(entry, ":")
		if !ok {
			kept = append(kept, entry)
			continue
		}
		var left []string
		for _, t := range strings.Split(tags, ",") {
			if same[repo+":"+t] {
				dropped = append(dropped, repo+":"+t)
			} else {
				left = append(left, t)
			}
		}
		if len(left) > 0 {
			kept = append(kept, repo+":"+strings.Join(left, ","))
		}
	}
	return kept, dropped
}

// manifestDigest is the digest the registry names for repo:tag ("" when
// it cannot be asked).
func manifestDigest(ctx context.Context, base, repo, tag string) string {
	ctx, cancel := context.WithTimeout(ctx, LossTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, base+"/v2/"+(&url.URL{Path: repo}).EscapedPath()+"/manifests/"+url.PathEscape(tag), nil)
	if err != nil {
		return ""
	}
	req.Header.Set("Accept", strings.Join([]string{
		"application/vnd.oci.image.manifest.v1+json", "application/vnd.oci.image.index.v1+json",
		"application/vnd.docker.distribution.manifest.v2+json", "application/vnd.docker.distribution.manifest.list.v2+json",
	}, ", "))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	return resp.Header.Get("Docker-Content-Digest")
}
