package pivot

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/version"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
)

// Plan is what a pivot would move and whether both sides serve it.
type Plan struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Types are the kinds with objects to move, at the version the mover
	// reads them in (the source's storage version), with their counts.
	Types []TypeCount `json:"types"`
	// MissingOnTarget are the moved group/version/kinds the target does
	// not serve: the pivot is refused.
	MissingOnTarget []schema.GroupVersionKind `json:"missingOnTarget,omitempty"`
	// MissingOnSource are the group/version/kinds the target would hand
	// back (its storage versions) that the source does not serve.
	MissingOnSource []schema.GroupVersionKind `json:"missingOnSource,omitempty"`
	// Unmoved are what a moved object needs on the target and the mover
	// does not move: a ConfigMap that a DockerCluster names as its load
	// balancer's configuration template, owned by nothing that moves and
	// not on the target. The pivot is refused.
	Unmoved []string `json:"unmoved,omitempty"`
	// Revertible says whether a revert could move the objects back.
	Revertible bool `json:"revertible"`
	// Unfit says what clusterctl's mover needs and one side lacks: its
	// provider inventory, or a provider of the source at the same or a
	// newer version on the target. The pivot is refused.
	Unfit []string `json:"unfit,omitempty"`
}

// TypeCount is one moved kind and how many objects of it there are.
type TypeCount struct {
	schema.GroupVersionKind
	Count int `json:"count"`
}

// Summary says in one sentence what will move and whether it can go back.
func (p *Plan) Summary() string {
	var kinds []string
	for _, t := range p.Types {
		kinds = append(kinds, fmt.Sprintf("%d %s", t.Count, t.Kind))
	}
	what := "no Cluster API objects"
	if len(kinds) > 0 {
		what = strings.Join(kinds, ", ")
	}
	rev := "revertible: slot " + p.From + " serves every version slot " + p.To + " would hand back"
	if !p.Revertible {
		rev = "NOT revertible: slot " + p.From + " does not serve " + joinTypes(p.MissingOnSource)
	}
	return fmt.Sprintf("pivot from slot %s to slot %s: %s (and their secrets); %s", p.From, p.To, what, rev)
}

// Check refuses a plan the target cannot take, and one that cannot be
// reverted unless yes.
func (p *Plan) Check(yes bool) error {
	if len(p.Unfit) > 0 {
		return &UnfitError{Plan: p}
	}
	if len(p.MissingOnTarget) > 0 {
		return &UnservedError{Plan: p}
	}
	if len(p.Unmoved) > 0 {
		return &UnmovedError{Plan: p}
	}
	if !p.Revertible && !yes {
		return &NotRevertibleError{Plan: p}
	}
	return nil
}

// UnservedError is a pivot refused before anything moved: the target's
// providers do not serve a version of the objects to move.
type UnservedError struct{ Plan *Plan }

func (e *UnservedError) Error() string {
	return fmt.Sprintf("slot %s cannot take the Cluster API objects of slot %s: its providers do not serve %s; nothing was moved. Deploy a package whose providers serve these versions into slot %s, or keep the workload clusters on slot %s (S2 rebuild, S1 repoint, in-place)",
		e.Plan.To, e.Plan.From, joinTypes(e.Plan.MissingOnTarget), e.Plan.To, e.Plan.From)
}

// ErrorKind: a precondition of the strategy is missing.
func (e *UnservedError) ErrorKind() errkind.Kind { return errkind.Environment }

// UnfitError is a pivot refused before anything was paused, moved or
// switched: a management cluster lacks what clusterctl's mover checks
// first (both sides' provider inventory, the source's providers on the
// target), so the move would fail on every attempt.
type UnfitError struct{ Plan *Plan }

func (e *UnfitError) Error() string {
	return fmt.Sprintf("a pivot from slot %s to slot %s cannot run: %s; nothing was paused, moved or switched. A pivot moves the Cluster API objects between two management clusters that run the same Cluster API providers (installed by clusterctl init or by the package); without them, switch without moving the workload clusters (--mode s2 or repoint)",
		e.Plan.From, e.Plan.To, strings.Join(e.Plan.Unfit, "; "))
}

// ErrorKind: a precondition of the strategy is missing.
func (e *UnfitError) ErrorKind() errkind.Kind { return errkind.Environment }

// UnmovedError is a pivot refused before anything was paused or moved: a
// moved object names something the mover leaves behind.
type UnmovedError struct{ Plan *Plan }

func (e *UnmovedError) Error() string {
	return fmt.Sprintf("a pivot from slot %s to slot %s would leave behind what the moved objects need: %s; nothing was paused, moved or switched. "+
		"clusterctl's mover moves a ConfigMap only when an object that moves owns it; without it on slot %s, slot %s's CAPD fails every load balancer update, "+
		"so no control-plane machine of that cluster could be created or deleted (docs/experiments.md, experiment (d)). "+
		"Give the ConfigMap an ownerReference to its Cluster (the package can), or create it on slot %s too, then switch again",
		e.Plan.From, e.Plan.To, strings.Join(e.Plan.Unmoved, "; "), e.Plan.To, e.Plan.To, e.Plan.To)
}

// ErrorKind: a precondition of the strategy is missing.
func (e *UnmovedError) ErrorKind() errkind.Kind { return errkind.Environment }

// dockerClusterGK is CAPD's DockerCluster.
var dockerClusterGK = schema.GroupKind{Group: "infrastructure.cluster.x-k8s.io", Kind: "DockerCluster"}

// checkUnmoved adds to plan.Unmoved each ConfigMap that a DockerCluster
// to move names as its load balancer's configuration template
// (spec.loadBalancer.customHAProxyConfigTemplateRef) when no owner
// reference makes the mover take it and the target has none of that name.
// Measured: the template was left on the source, and the Cluster served
// on the target only until its next load balancer update.
func checkUnmoved(ctx context.Context, plan *Plan, fromC, toC client.Client, version, namespace string) error {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(dockerClusterGK.WithVersion(version).GroupVersion().WithKind("DockerClusterList"))
	var opts []client.ListOption
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	if err := fromC.List(ctx, list, opts...); err != nil {
		return fmt.Errorf("listing the DockerClusters on slot %s: %w", plan.From, err)
	}
	for _, dc := range list.Items {
		name, _, _ := unstructured.NestedString(dc.Object, "spec", "loadBalancer", "customHAProxyConfigTemplateRef", "name")
		if name == "" {
			continue
		}
		key := client.ObjectKey{Namespace: dc.GetNamespace(), Name: name}
		cm := &corev1.ConfigMap{}
		if err := fromC.Get(ctx, key, cm); err != nil || len(cm.OwnerReferences) > 0 {
			continue // missing on the source too (nothing to lose), or owned: moved with its owner
		}
		if err := toC.Get(ctx, key, &corev1.ConfigMap{}); err == nil {
			continue
		} else if !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading ConfigMap %s on slot %s: %w", key, plan.To, err)
		}
		plan.Unmoved = append(plan.Unmoved, fmt.Sprintf("ConfigMap %s, the load balancer template of DockerCluster %s/%s, is owned by nothing and is not on slot %s",
			key, dc.GetNamespace(), dc.GetName(), plan.To))
	}
	return nil
}

// inventoryGK is clusterctl's provider inventory (providers.clusterctl.cluster.x-k8s.io).
var inventoryGK = schema.GroupKind{Group: clusterctlv1.GroupVersion.Group, Kind: "Provider"}

// checkProviders adds to plan.Unfit what clusterctl's mover would refuse
// first (its checkTargetProviders): a side without the provider
// inventory, a provider of the source missing on the target or older
// there. It reads both inventories; it changes nothing.
func checkProviders(ctx context.Context, plan *Plan, fromC, toC client.Client, fromCRDs, toCRDs map[schema.GroupKind]crdInfo) error {
	for _, side := range []struct {
		slot string
		crds map[schema.GroupKind]crdInfo
	}{{plan.From, fromCRDs}, {plan.To, toCRDs}} {
		if info, ok := side.crds[inventoryGK]; !ok || !info.served[clusterctlv1.GroupVersion.Version] {
			plan.Unfit = append(plan.Unfit, fmt.Sprintf("slot %s has no Cluster API provider inventory (%s %s is not served: no clusterctl-installed providers)", side.slot, inventoryGK.Kind, clusterctlv1.GroupVersion))
		}
	}
	if len(plan.Unfit) > 0 {
		return nil
	}
	var fromP, toP clusterctlv1.ProviderList
	if err := fromC.List(ctx, &fromP); err != nil {
		return fmt.Errorf("listing the Cluster API providers on slot %s: %w", plan.From, err)
	}
	if err := toC.List(ctx, &toP); err != nil {
		return fmt.Errorf("listing the Cluster API providers on slot %s: %w", plan.To, err)
	}
	if len(fromP.Items) == 0 {
		plan.Unfit = append(plan.Unfit, fmt.Sprintf("slot %s runs no Cluster API provider (its inventory is empty)", plan.From))
	}
	for _, sp := range fromP.Items {
		sv, err := version.ParseSemantic(sp.Version)
		if err != nil {
			plan.Unfit = append(plan.Unfit, fmt.Sprintf("provider %s on slot %s has version %q, which is not a semantic version", sp.InstanceName(), plan.From, sp.Version))
			continue
		}
		var best *version.Version
		for _, tp := range toP.Items {
			if !sp.SameAs(tp) {
				continue
			}
			if tv, err := version.ParseSemantic(tp.Version); err == nil && (best == nil || best.LessThan(tv)) {
				best = tv
			}
		}
		switch {
		case best == nil:
			plan.Unfit = append(plan.Unfit, fmt.Sprintf("provider %s (%s %s) of slot %s is not installed on slot %s", sp.ProviderName, sp.Type, sp.Version, plan.From, plan.To))
		case !best.AtLeast(sv):
			// ManifestLabel (bootstrap-kubeadm, control-plane-kubeadm) tells apart
			// two providers of one name, which a real refusal listed as kubeadm twice.
			plan.Unfit = append(plan.Unfit, fmt.Sprintf("provider %s is older on slot %s (%s) than on slot %s (%s)", sp.ManifestLabel(), plan.To, best, plan.From, sv))
		}
	}
	return nil
}

func joinTypes(gvks []schema.GroupVersionKind) string {
	var s []string
	for _, g := range gvks {
		s = append(s, g.GroupVersion().String()+", Kind="+g.Kind)
	}
	return strings.Join(s, "; ")
}

// crdInfo is what the preflight needs of one CRD.
type crdInfo struct {
	storage  string
	served   map[string]bool
	plural   string
	labelled bool
}

func readCRDs(ctx context.Context, c client.Client) (map[schema.GroupKind]crdInfo, error) {
	var list apiextensionsv1.CustomResourceDefinitionList
	if err := c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing the CustomResourceDefinitions: %w", err)
	}
	out := map[schema.GroupKind]crdInfo{}
	for _, crd := range list.Items {
		info := crdInfo{served: map[string]bool{}, plural: crd.Spec.Names.Plural}
		_, info.labelled = crd.Labels[clusterctlv1.ClusterctlLabel]
		for _, v := range crd.Spec.Versions {
			if v.Served {
				info.served[v.Name] = true
			}
			if v.Storage {
				info.storage = v.Name
			}
		}
		out[schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}] = info
	}
	return out, nil
}

// Preflight reads both management clusters: which kinds the mover would
// take from from (the CRDs clusterctl labels, at their storage version,
// with at least one object in namespace), whether to serves each at that
// version, and whether from serves what to would hand back (to's storage
// versions). It changes nothing.
func Preflight(ctx context.Context, from, to Endpoint, namespace string) (*Plan, error) {
	fromC, err := from.Client(ctx)
	if err != nil {
		return nil, fmt.Errorf("reaching slot %s's management cluster (context %s): %w", from.Slot, from.Context, err)
	}
	toC, err := to.Client(ctx)
	if err != nil {
		return nil, fmt.Errorf("reaching slot %s's management cluster (context %s): %w", to.Slot, to.Context, err)
	}
	fromCRDs, err := readCRDs(ctx, fromC)
	if err != nil {
		return nil, fmt.Errorf("slot %s: %w", from.Slot, err)
	}
	toCRDs, err := readCRDs(ctx, toC)
	if err != nil {
		return nil, fmt.Errorf("slot %s: %w", to.Slot, err)
	}
	plan := &Plan{From: from.Slot, To: to.Slot, Revertible: true}
	if err := checkProviders(ctx, plan, fromC, toC, fromCRDs, toCRDs); err != nil {
		return nil, err
	}
	gks := make([]schema.GroupKind, 0, len(fromCRDs))
	for gk, info := range fromCRDs {
		// clusterctl's own inventory stays with each cluster's providers.
		if info.labelled && gk.Group != clusterctlv1.GroupVersion.Group {
			gks = append(gks, gk)
		}
	}
	sort.Slice(gks, func(i, j int) bool { return gks[i].String() < gks[j].String() })
	for _, gk := range gks {
		info := fromCRDs[gk]
		gvk := gk.WithVersion(info.storage)
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		var opts []client.ListOption
		if namespace != "" {
			opts = append(opts, client.InNamespace(namespace))
		}
		if err := fromC.List(ctx, list, opts...); err != nil {
			return nil, fmt.Errorf("listing %s on slot %s: %w", gvk, from.Slot, err)
		}
		if len(list.Items) == 0 {
			continue
		}
		plan.Types = append(plan.Types, TypeCount{GroupVersionKind: gvk, Count: len(list.Items)})
		target, ok := toCRDs[gk]
		if !ok || !target.served[info.storage] {
			plan.MissingOnTarget = append(plan.MissingOnTarget, gvk)
			continue
		}
		if !info.served[target.storage] {
			plan.MissingOnSource = append(plan.MissingOnSource, gk.WithVersion(target.storage))
		}
	}
	if info, ok := fromCRDs[dockerClusterGK]; ok && info.labelled {
		if err := checkUnmoved(ctx, plan, fromC, toC, info.storage, namespace); err != nil {
			return nil, err
		}
	}
	plan.Revertible = len(plan.MissingOnTarget) == 0 && len(plan.MissingOnSource) == 0 && len(plan.Unfit) == 0
	return plan, nil
}
