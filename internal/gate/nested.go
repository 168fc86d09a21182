package gate

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubectl-bundle/kubectl-bundle/internal/runner"
)

// workload evaluates a workload check: its own row, then one row per
// nested check, named <check>/<nested>.
func (e *evaluator) workload(ctx context.Context, c *Cluster, check *Check) []Result {
	wc := check.Workload
	ns := wc.Namespace
	if ns == "" {
		ns = c.Namespace()
	}
	secret := wc.Secret
	if secret == "" {
		secret = wc.Cluster + "-kubeconfig"
	}
	obj := "Cluster " + ns + "/" + wc.Cluster
	nested := func(head Result) []Result {
		out := []Result{head}
		for _, n := range wc.Checks {
			out = append(out, Result{Name: n.Name, Cluster: wc.Cluster, Object: "-", Status: Fail, Reason: "NotEvaluated", Message: "the workload cluster is not reachable yet"})
		}
		return out
	}
	e.w.ensure(c, secretsGVR, ns)
	u, err := c.dyn.Resource(secretsGVR).Namespace(ns).Get(ctx, secret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nested(fail(obj, "KubeconfigMissing", "secret %s/%s not found (Cluster API writes it once the control plane is up)", ns, secret))
	}
	if err != nil {
		return nested(fail(obj, "Error", "reading secret %s/%s: %v", ns, secret, err))
	}
	enc, _, _ := unstructured.NestedString(u.Object, "data", "value")
	kubeconfig, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || len(kubeconfig) == 0 {
		return nested(fail(obj, "KubeconfigInvalid", "secret %s/%s has no kubeconfig under data.value", ns, secret))
	}
	server := ""
	if wc.UseDockerPort {
		lb := wc.LoadBalancer
		if lb == "" {
			lb = wc.Cluster + "-lb"
		}
		port, err := e.dockerPort(ctx, lb)
		if err != nil {
			return nested(fail(obj, "LoadBalancerPortUnknown", "%v", err))
		}
		server = "https://" + net.JoinHostPort("127.0.0.1", port)
	}
	wl, err := e.workloadCluster(wc.Cluster, kubeconfig, server)
	if err != nil {
		return nested(fail(obj, "KubeconfigInvalid", "%v", err))
	}
	if err := wl.Ping(ctx, 5*time.Second); err != nil {
		return nested(fail(obj, "Unreachable", "%v", err))
	}
	results := e.evalChecks(ctx, wl, wc.Checks)
	passed := 0
	for i := range results {
		results[i].Cluster = wc.Cluster
		if results[i].Status == Pass {
			passed++
		}
	}
	head := pass(obj, fmt.Sprintf("all %d checks pass in %s (%s)", len(results), wc.Cluster, wl.Host()))
	if passed < len(results) {
		head = fail(obj, "ChecksFailing", "%d of %d checks pass in %s (%s)", passed, len(results), wc.Cluster, wl.Host())
	}
	return append([]Result{head}, results...)
}

// workloadCluster returns the client for a workload kubeconfig, reusing it
// (and its watches) while the kubeconfig and server stay the same.
func (e *evaluator) workloadCluster(name string, kubeconfig []byte, server string) (*Cluster, error) {
	sum := sha256.Sum256(append(append([]byte(server), 0), kubeconfig...))
	key := name + "/" + fmt.Sprintf("%x", sum[:8])
	if c, ok := e.workloads[key]; ok {
		return c, nil
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig of %s does not load: %w", name, err)
	}
	if server != "" {
		cfg.Host = server
	}
	c, err := NewCluster(name, cfg)
	if err != nil {
		return nil, err
	}
	e.workloads[key] = c
	return c, nil
}

// dockerPort is the host port Docker published for port 6443 of
// container (runner.PublishedPort).
func (e *evaluator) dockerPort(ctx context.Context, container string) (string, error) {
	if e.run == nil {
		return "", fmt.Errorf("useDockerPort needs docker, and this gate runs without a command runner")
	}
	return runner.PublishedPort(ctx, e.run, container, "6443/tcp")
}

// deployedPackage is the part of Zarf's deployed-package secret the gate
// reads (state.DeployedPackage in zarf v0.84.0).
type deployedPackage struct {
	Name string `json:"name"`
	Data struct {
		Components []struct {
			Name         string `json:"name"`
			HealthChecks []struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Namespace  string `json:"namespace"`
				Name       string `json:"name"`
			} `json:"healthChecks"`
		} `json:"components"`
	} `json:"data"`
	DeployedComponents []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
	} `json:"deployedComponents"`
}

const zarfNamespace = "zarf"

// zarf evaluates the healthChecks of every deployed Zarf package: its own
// row, then one row per package.
func (e *evaluator) zarf(ctx context.Context, c *Cluster, zc *ZarfCheck) []Result {
	obj := "zarf packages"
	e.w.ensure(c, secretsGVR, zarfNamespace)
	l, err := c.dyn.Resource(secretsGVR).Namespace(zarfNamespace).List(ctx, metav1.ListOptions{LabelSelector: "package-deploy-info"})
	if err != nil {
		return []Result{fail(obj, "Error", "listing Zarf package secrets: %v", err)}
	}
	var pkgs []deployedPackage
	for _, u := range l.Items {
		if !strings.HasPrefix(u.GetName(), "zarf-package-") {
			continue
		}
		enc, _, _ := unstructured.NestedString(u.Object, "data", "data")
		raw, err := base64.StdEncoding.DecodeString(enc)
		var p deployedPackage
		if err == nil {
			err = json.Unmarshal(raw, &p)
		}
		if err != nil {
			return []Result{fail(obj, "Error", "secret zarf/%s does not hold a deployed package: %v", u.GetName(), err)}
		}
		pkgs = append(pkgs, p)
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].Name < pkgs[j].Name })
	present := map[string]bool{}
	var rows []Result
	failed := 0
	for _, p := range pkgs {
		present[p.Name] = true
		r := e.zarfPackage(ctx, c, &p)
		r.Name = p.Name
		if r.Status != Pass {
			failed++
		}
		rows = append(rows, r)
	}
	var missing []string
	for _, want := range zc.Packages {
		if !present[want] {
			missing = append(missing, want)
		}
	}
	head := pass(obj, fmt.Sprintf("%d package(s) deployed and healthy", len(pkgs)))
	switch {
	case len(missing) > 0:
		head = fail(obj, "PackageMissing", "not deployed: %s", strings.Join(missing, ", "))
	case len(pkgs) == 0:
		head = fail(obj, "NoPackages", "no Zarf package is deployed (no zarf-package-* secret in namespace zarf)")
	case failed > 0:
		head = fail(obj, "Unhealthy", "%d of %d package(s) unhealthy", failed, len(pkgs))
	}
	return append([]Result{head}, rows...)
}

func (e *evaluator) zarfPackage(ctx context.Context, c *Cluster, p *deployedPackage) Result {
	obj := "package " + p.Name
	deployed := map[string]bool{}
	for _, dc := range p.DeployedComponents {
		if dc.Status != "" && dc.Status != "Succeeded" {
			return fail(obj, "Component"+dc.Status, "component %s is %s", dc.Name, dc.Status)
		}
		deployed[dc.Name] = true
	}
	n := 0
	for _, comp := range p.Data.Components {
		if !deployed[comp.Name] {
			continue
		}
		for _, hc := range comp.HealthChecks {
			n++
			r := e.resource(ctx, c, &ResourceCheck{ObjectRef: ObjectRef{APIVersion: hc.APIVersion, Kind: hc.Kind, Namespace: hc.Namespace, Name: hc.Name}})
			if r.Status != Pass {
				return fail(obj, r.Reason, "component %s: %s: %s", comp.Name, r.Object, r.Message)
			}
		}
	}
	return pass(obj, fmt.Sprintf("%d component(s), %d healthCheck(s) Current", len(p.DeployedComponents), n))
}
