// Package sitesim writes the objects and statuses the controllers of a
// healthy krops site would write (Flux, Cluster API, kubelet, Zarf) into
// real API servers that run no controllers, so gates, demos and end-to-end
// tests see a site they can judge.
package sitesim

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Site names what the simulated site holds; the zero value is the krops site.
type Site struct {
	WorkloadCluster string // CAPI Cluster name (default airgap-wl)
	Registry        string // the Zarf registry (default 127.0.0.1:31999)
	Package         string // the deployed Zarf package (default krops-airgap)
	// WorkloadServer, when set, replaces the server in the kubeconfig
	// secret (to stand for CAPD's address on the kind network).
	WorkloadServer string
}

func (s *Site) defaults() {
	if s.WorkloadCluster == "" {
		s.WorkloadCluster = "airgap-wl"
	}
	if s.Registry == "" {
		s.Registry = "127.0.0.1:31999"
	}
	if s.Package == "" {
		s.Package = "krops-airgap"
	}
}

var (
	nsGVR     = gvr("", "v1", "namespaces")
	podsGVR   = gvr("", "v1", "pods")
	nodesGVR  = gvr("", "v1", "nodes")
	secretGVR = gvr("", "v1", "secrets")
	deployGVR = gvr("apps", "v1", "deployments")
	ociGVR    = gvr("source.toolkit.fluxcd.io", "v1", "ocirepositories")
	ksGVR     = gvr("kustomize.toolkit.fluxcd.io", "v1", "kustomizations")
	capiGVR   = gvr("cluster.x-k8s.io", "v1beta2", "clusters")
)

func gvr(g, v, r string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: g, Version: v, Resource: r}
}

type writer struct {
	ctx context.Context
	dyn dynamic.Interface
}

// Healthy makes mgmt and workload look like a fully healthy site: every
// check of the built-in gate passes against them.
func Healthy(ctx context.Context, mgmt, workload *rest.Config, site Site) error {
	site.defaults()
	m, err := newWriter(ctx, mgmt)
	if err != nil {
		return err
	}
	w, err := newWriter(ctx, workload)
	if err != nil {
		return err
	}
	reg := site.Registry
	steps := []func() error{
		func() error { return m.namespaces("flux-system", "zarf", "kube-system", "capd-system") },
		// zarf deploys only into a cluster with a Ready node.
		func() error { return m.readyNode("airgap-mgmt-control-plane") },
		// kind's own images, ignored by the default gate, and the rest from the Zarf registry.
		func() error {
			return m.runningPod("kube-system", "coredns", "registry.k8s.io/coredns/coredns:v1.12.1")
		},
		func() error { return m.runningPod("kube-system", "kindnet", "docker.io/kindest/kindnetd:v20250512") },
		func() error {
			return m.runningPod("flux-system", "source-controller", reg+"/fluxcd/source-controller:v1.7.0")
		},
		func() error { return m.runningPod("capd-system", "capd-controller", reg+"/capi/capd-manager:v1.14.2") },
		func() error {
			return m.ready(ociGVR, obj("source.toolkit.fluxcd.io/v1", "OCIRepository", "flux-system", "flux-system", map[string]any{
				"spec": map[string]any{"url": "oci://zarf-docker-registry.zarf.svc.cluster.local:5000/krops/config", "interval": "1m"}}), "Ready")
		},
		func() error {
			return m.ready(ksGVR, obj("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "flux-system", "flux-system", map[string]any{
				"spec": map[string]any{"interval": "10m", "prune": true, "sourceRef": map[string]any{"kind": "OCIRepository", "name": "flux-system"}}}), "Ready")
		},
		func() error {
			return m.ready(capiGVR, obj("cluster.x-k8s.io/v1beta2", "Cluster", "default", site.WorkloadCluster, map[string]any{
				"spec": map[string]any{"controlPlaneEndpoint": map[string]any{"host": "172.18.0.3", "port": int64(6443)}}}), "Available")
		},
		func() error { return m.kubeconfigSecret(site, workload) },
		func() error {
			return m.availableDeployment("zarf", "zarf-docker-registry", reg+"/library/registry:3.0.0")
		},
		func() error { return m.zarfPackage(site.Package, "zarf", "zarf-docker-registry") },
		// The workload cluster: two Ready nodes, its Flux source, podinfo.
		func() error { return w.namespaces("flux-system", "podinfo") },
		func() error { return w.readyNode(site.WorkloadCluster + "-control-plane") },
		func() error { return w.readyNode(site.WorkloadCluster + "-md-0") },
		func() error {
			return w.ready(ociGVR, obj("source.toolkit.fluxcd.io/v1", "OCIRepository", "flux-system", "flux-system", map[string]any{
				"spec": map[string]any{"url": "oci://krops-registry:5000/krops/workload", "interval": "1m"}}), "Ready")
		},
		func() error { return w.runningPod("podinfo", "podinfo", reg+"/stefanprodan/podinfo:6.9.0") },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

func newWriter(ctx context.Context, cfg *rest.Config) (*writer, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = rest.NoWarnings{}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &writer{ctx: ctx, dyn: dyn}, nil
}

func obj(apiVersion, kind, ns, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind}}
	for k, v := range fields {
		u.Object[k] = v
	}
	u.SetName(name)
	u.SetNamespace(ns)
	return u
}

// apply creates u, or replaces the existing object's spec-level fields.
func (w *writer) apply(r schema.GroupVersionResource, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ri := w.dyn.Resource(r).Namespace(u.GetNamespace())
	out, err := ri.Create(w.ctx, u, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		cur, gerr := ri.Get(w.ctx, u.GetName(), metav1.GetOptions{})
		if gerr != nil {
			return nil, gerr
		}
		u.SetResourceVersion(cur.GetResourceVersion())
		out, err = ri.Update(w.ctx, u, metav1.UpdateOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("writing %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return out, nil
}

func (w *writer) status(r schema.GroupVersionResource, u *unstructured.Unstructured, status map[string]any) error {
	u.Object["status"] = status
	if _, err := w.dyn.Resource(r).Namespace(u.GetNamespace()).UpdateStatus(w.ctx, u, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("writing the status of %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

func cond(typ, reason string, gen int64) map[string]any {
	c := map[string]any{"type": typ, "status": "True", "reason": reason, "message": "simulated",
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
	if gen > 0 {
		c["observedGeneration"] = gen
	}
	return c
}

func (w *writer) namespaces(names ...string) error {
	for _, n := range names {
		if _, err := w.apply(nsGVR, obj("v1", "Namespace", "", n, nil)); err != nil {
			return err
		}
	}
	return nil
}

// ready writes u and a True condition typ for its generation.
func (w *writer) ready(r schema.GroupVersionResource, u *unstructured.Unstructured, typ string) error {
	out, err := w.apply(r, u)
	if err != nil {
		return err
	}
	return w.status(r, out, map[string]any{"observedGeneration": out.GetGeneration(),
		"conditions": []any{cond(typ, "Succeeded", out.GetGeneration())}})
}

func (w *writer) runningPod(ns, name, image string) error {
	out, err := w.apply(podsGVR, obj("v1", "Pod", ns, name, map[string]any{"spec": map[string]any{
		"containers": []any{map[string]any{"name": "main", "image": image}}}}))
	if err != nil {
		return err
	}
	return w.status(podsGVR, out, map[string]any{"phase": "Running", "conditions": []any{
		map[string]any{"type": "Ready", "status": "True", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}})
}

func (w *writer) readyNode(name string) error {
	out, err := w.apply(nodesGVR, obj("v1", "Node", "", name, nil))
	if err != nil {
		return err
	}
	return w.status(nodesGVR, out, map[string]any{"conditions": []any{
		map[string]any{"type": "Ready", "status": "True", "reason": "KubeletReady"}}})
}

func (w *writer) availableDeployment(ns, name, image string) error {
	out, err := w.apply(deployGVR, obj("apps/v1", "Deployment", ns, name, map[string]any{"spec": map[string]any{
		"replicas": int64(1),
		"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
		"template": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"app": name}},
			"spec":     map[string]any{"containers": []any{map[string]any{"name": "main", "image": image}}},
		}}}))
	if err != nil {
		return err
	}
	if err := w.runningPod(ns, name+"-0", image); err != nil {
		return err
	}
	return w.status(deployGVR, out, map[string]any{"observedGeneration": out.GetGeneration(), "replicas": int64(1),
		"updatedReplicas": int64(1), "readyReplicas": int64(1), "availableReplicas": int64(1), "conditions": []any{
			map[string]any{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
			map[string]any{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}}})
}

// kubeconfigSecret writes <cluster>-kubeconfig as Cluster API does.
func (w *writer) kubeconfigSecret(site Site, workload *rest.Config) error {
	server := workload.Host
	if site.WorkloadServer != "" {
		server = site.WorkloadServer
	}
	name := site.WorkloadCluster
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: workload.CAData}
	kc.AuthInfos[name+"-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: workload.CertData, ClientKeyData: workload.KeyData, Token: workload.BearerToken}
	kc.Contexts[name+"-admin@"+name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name + "-admin"}
	kc.CurrentContext = name + "-admin@" + name
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	_, err = w.apply(secretGVR, obj("v1", "Secret", "default", name+"-kubeconfig", map[string]any{
		"metadata": map[string]any{"name": name + "-kubeconfig", "namespace": "default", "labels": map[string]any{"cluster.x-k8s.io/cluster-name": name}},
		"type":     "cluster.x-k8s.io/secret",
		"data":     map[string]any{"value": base64.StdEncoding.EncodeToString(raw)}}))
	return err
}

// zarfPackage writes the deployed-package secret zarf v0.84.0 writes, with
// one component whose healthCheck is the deployment ns/name.
func (w *writer) zarfPackage(pkg, ns, deployment string) error {
	data, err := json.Marshal(map[string]any{
		"name": pkg, "cliVersion": "v0.84.0", "generation": 1,
		"data": map[string]any{"kind": "ZarfPackageConfig", "metadata": map[string]any{"name": pkg},
			"components": []any{map[string]any{"name": "substrate", "required": true, "healthChecks": []any{
				map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": ns, "name": deployment}}}}},
		"deployedComponents": []any{map[string]any{"name": "substrate", "status": "Succeeded", "observedGeneration": 1}},
	})
	if err != nil {
		return err
	}
	name := "zarf-package-" + pkg
	_, err = w.apply(secretGVR, obj("v1", "Secret", "zarf", name, map[string]any{
		"metadata": map[string]any{"name": name, "namespace": "zarf", "labels": map[string]any{"package-deploy-info": pkg, "app.kubernetes.io/managed-by": "zarf"}},
		"data":     map[string]any{"data": base64.StdEncoding.EncodeToString(data)}}))
	return err
}
