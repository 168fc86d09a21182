package gate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// Status is a check's verdict.
type Status string

// Verdicts.
const (
	Pass Status = "Pass"
	Fail Status = "Fail"
)

// Result is the last observed state of one check. Checks nested in a
// workload or zarf check are reported as <parent>/<child>.
type Result struct {
	Name    string `json:"name"`
	Cluster string `json:"cluster,omitempty"`
	Object  string `json:"object"`
	Status  Status `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

func pass(object, msg string) Result { return Result{Object: object, Status: Pass, Message: msg} }

func fail(object, reason, format string, args ...any) Result {
	return Result{Object: object, Status: Fail, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

var (
	podsGVR    = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	nodesGVR   = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	secretsGVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

func refString(r ObjectRef, ns string) string {
	target := r.Name
	if target == "" {
		target = "-l " + r.Selector
	}
	if ns != "" {
		target = ns + "/" + target
	}
	return r.Kind + " " + target
}

// objects reads the objects r selects and watches their resource.
func (e *evaluator) objects(ctx context.Context, c *Cluster, r ObjectRef) ([]unstructured.Unstructured, string, Result, bool) {
	gvr, namespaced, err := c.resolve(r.APIVersion, r.Kind)
	ns := ""
	if namespaced {
		ns = r.Namespace
		if ns == "" {
			ns = c.Namespace()
		}
	}
	obj := refString(r, ns)
	var nf *kindNotFound
	if errors.As(err, &nf) {
		e.w.ensure(c, crdGVR, "")
		e.staleMappers = true
		return nil, obj, fail(obj, "KindNotFound", "%v", err), false
	}
	if err != nil {
		return nil, obj, fail(obj, "Error", "%v", err), false
	}
	e.w.ensure(c, gvr, ns)
	ri := c.dyn.Resource(gvr).Namespace(ns)
	if r.Name != "" {
		u, err := ri.Get(ctx, r.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, obj, fail(obj, "NotFound", "%s not found", obj), false
		}
		if err != nil {
			return nil, obj, fail(obj, "Error", "reading %s: %v", obj, err), false
		}
		return []unstructured.Unstructured{*u}, obj, Result{}, true
	}
	l, err := ri.List(ctx, metav1.ListOptions{LabelSelector: r.Selector})
	if err != nil {
		return nil, obj, fail(obj, "Error", "listing %s: %v", obj, err), false
	}
	if len(l.Items) == 0 {
		return nil, obj, fail(obj, "NotFound", "no %s matches %q", r.Kind, r.Selector), false
	}
	return l.Items, obj, Result{}, true
}

// eachObject applies test to every selected object; the check passes when
// all do, and reports the first that does not.
func (e *evaluator) eachObject(ctx context.Context, c *Cluster, r ObjectRef, test func(u *unstructured.Unstructured) (reason, msg string)) Result {
	items, obj, res, ok := e.objects(ctx, c, r)
	if !ok {
		return res
	}
	var lastMsg string
	for i := range items {
		reason, msg := test(&items[i])
		if reason != "" {
			if len(items) > 1 {
				msg = items[i].GetName() + ": " + msg
			}
			return fail(obj, reason, "%s", msg)
		}
		lastMsg = msg
	}
	if len(items) > 1 {
		lastMsg = fmt.Sprintf("all %d objects pass", len(items))
	}
	return pass(obj, lastMsg)
}

func (e *evaluator) resource(ctx context.Context, c *Cluster, rc *ResourceCheck) Result {
	return e.eachObject(ctx, c, rc.ObjectRef, func(u *unstructured.Unstructured) (string, string) {
		if rc.Condition != "" {
			return conditionTrue(u, rc.Condition)
		}
		res, err := status.Compute(u)
		if err != nil {
			return "Error", fmt.Sprintf("computing status: %v", err)
		}
		if res.Status != status.CurrentStatus {
			return string(res.Status), res.Message
		}
		return "", "Current: " + res.Message
	})
}

// conditionTrue checks status.conditions[type=cond]. A condition observed
// for an older generation than the object's is stale and does not count.
func conditionTrue(u *unstructured.Unstructured, cond string) (string, string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, ci := range conds {
		m, ok := ci.(map[string]any)
		if !ok || m["type"] != cond {
			continue
		}
		msg, _ := m["message"].(string)
		reason, _ := m["reason"].(string)
		if og, ok := m["observedGeneration"].(int64); ok && og > 0 && og < u.GetGeneration() {
			return "Stale", fmt.Sprintf("%s is for generation %d, the object is at %d", cond, og, u.GetGeneration())
		}
		if m["status"] != "True" {
			if reason == "" {
				reason = cond + "Not" + "True"
			}
			return reason, fmt.Sprintf("%s=%v: %s", cond, m["status"], msg)
		}
		return "", fmt.Sprintf("%s=True: %s", cond, msg)
	}
	return "ConditionMissing", fmt.Sprintf("no %s condition yet", cond)
}

func (e *evaluator) field(ctx context.Context, c *Cluster, fc *FieldCheck) Result {
	jp := jsonpath.New(fc.Path)
	if err := jp.Parse(fc.Path); err != nil {
		return fail("", "Error", "%v", err)
	}
	var re *regexp.Regexp
	if fc.Matches != "" {
		re = regexp.MustCompile(fc.Matches)
	}
	return e.eachObject(ctx, c, fc.ObjectRef, func(u *unstructured.Unstructured) (string, string) {
		var buf bytes.Buffer
		if err := jp.Execute(&buf, u.Object); err != nil {
			return "FieldMissing", fmt.Sprintf("%s: %v", fc.Path, err)
		}
		got := buf.String()
		switch {
		case fc.Equals != nil && got != *fc.Equals:
			return "Mismatch", fmt.Sprintf("%s is %q, want %q", fc.Path, got, *fc.Equals)
		case fc.Contains != "" && !strings.Contains(got, fc.Contains):
			return "Mismatch", fmt.Sprintf("%s is %q, want it to contain %q", fc.Path, got, fc.Contains)
		case re != nil && !re.MatchString(got):
			return "Mismatch", fmt.Sprintf("%s is %q, want it to match %s", fc.Path, got, fc.Matches)
		}
		return "", fmt.Sprintf("%s is %q", fc.Path, got)
	})
}

// pods lists pods in ns matching selector, watching them.
func (e *evaluator) pods(ctx context.Context, c *Cluster, ns, selector string) ([]corev1.Pod, error) {
	e.w.ensure(c, podsGVR, ns)
	l, err := c.dyn.Resource(podsGVR).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	out := make([]corev1.Pod, len(l.Items))
	for i := range l.Items {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(l.Items[i].Object, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (e *evaluator) images(ctx context.Context, c *Cluster, ic *ImagesCheck) Result {
	namespaces := ic.Namespaces
	obj := "pods " + strings.Join(namespaces, ",")
	if len(namespaces) == 0 {
		namespaces, obj = []string{""}, "pods (all namespaces)"
	}
	var ignore []*regexp.Regexp
	for _, p := range ic.Ignore {
		ignore = append(ignore, globRE(p))
	}
	registries := e.allowedRegistries(ic.AllowedRegistries)
	allowed := map[string]bool{}
	for _, r := range registries {
		allowed[r] = true
	}
	var foreign []string
	seen := map[string]bool{}
	total := 0
	for _, ns := range namespaces {
		pods, err := e.pods(ctx, c, ns, "")
		if err != nil {
			return fail(obj, "Error", "listing pods: %v", err)
		}
		for _, p := range pods {
			for _, img := range podImages(&p) {
				total++
				if allowed[registryOf(img)] || ignored(img, ignore) || seen[img] {
					continue
				}
				seen[img] = true
				foreign = append(foreign, fmt.Sprintf("%s (%s/%s)", img, p.Namespace, p.Name))
			}
		}
	}
	if len(foreign) > 0 {
		sort.Strings(foreign)
		return fail(obj, "ForeignImage", "%d image(s) not from %s: %s", len(foreign), strings.Join(registries, ", "), strings.Join(foreign, ", "))
	}
	return pass(obj, fmt.Sprintf("%d container images, all from %s or ignored", total, strings.Join(registries, ", ")))
}

// SlotRegistry in an images check's allowedRegistries stands for the
// registries of the slot under gate: zarf's in-cluster registry
// (ZarfRegistry) and, with --slot, the slot's own registry
// (127.0.0.1:PORT, where a slot created with zarfRegistry: slot has
// zarf push its images). So one gate file serves every slot, and a pod
// that pulls from another slot's registry fails it.
const SlotRegistry = "@slot"

// ZarfRegistry is the address of zarf's in-cluster registry as the nodes
// pull from it (zarf init --registry-mode=nodeport).
const ZarfRegistry = "127.0.0.1:31999"

func (e *evaluator) allowedRegistries(in []string) []string {
	var out []string
	for _, r := range in {
		if r != SlotRegistry {
			out = append(out, r)
			continue
		}
		out = append(out, ZarfRegistry)
		out = append(out, e.slotRegistries...)
	}
	return out
}

func podImages(p *corev1.Pod) []string {
	var out []string
	for _, c := range p.Spec.InitContainers {
		out = append(out, c.Image)
	}
	for _, c := range p.Spec.Containers {
		out = append(out, c.Image)
	}
	for _, c := range p.Spec.EphemeralContainers {
		out = append(out, c.Image)
	}
	return out
}

// registryOf returns the registry host of an image reference, as the
// container runtime resolves it (no host part means docker.io).
func registryOf(image string) string {
	i := strings.IndexByte(image, '/')
	if i < 0 {
		return "docker.io"
	}
	host := image[:i]
	if strings.ContainsAny(host, ".:") || host == "localhost" {
		return host
	}
	return "docker.io"
}

// normalized spells a reference with its registry (docker.io/library/x).
func normalized(image string) string {
	if registryOf(image) != "docker.io" || strings.HasPrefix(image, "docker.io/") {
		return image
	}
	if !strings.Contains(image, "/") {
		return "docker.io/library/" + image
	}
	return "docker.io/" + image
}

func ignored(image string, patterns []*regexp.Regexp) bool {
	n := normalized(image)
	for _, re := range patterns {
		if re.MatchString(image) || re.MatchString(n) {
			return true
		}
	}
	return false
}

// globRE compiles a pattern in which * matches any run of characters.
func globRE(p string) *regexp.Regexp {
	return regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(p), `\*`, ".*") + "$")
}

func minOf(n int) int {
	if n == 0 {
		return 1
	}
	return n
}

func (e *evaluator) podsCheck(ctx context.Context, c *Cluster, pc *PodsCheck) Result {
	ns := pc.Namespace
	if ns == "" {
		ns = c.Namespace()
	}
	obj := "pods " + ns
	if pc.Selector != "" {
		obj += " -l " + pc.Selector
	}
	want := minOf(pc.Min)
	pods, err := e.pods(ctx, c, ns, pc.Selector)
	if err != nil {
		return fail(obj, "Error", "listing pods: %v", err)
	}
	ready := 0
	var notReady []string
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning && podReady(&p) {
			ready++
			continue
		}
		notReady = append(notReady, fmt.Sprintf("%s %s", p.Name, p.Status.Phase))
	}
	if ready < want {
		msg := fmt.Sprintf("%d of %d pods Running and Ready, want at least %d", ready, len(pods), want)
		if len(notReady) > 0 {
			sort.Strings(notReady)
			msg += "; not ready: " + strings.Join(notReady, ", ")
		}
		return fail(obj, "TooFewReady", "%s", msg)
	}
	return pass(obj, fmt.Sprintf("%d of %d pods Running and Ready", ready, len(pods)))
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (e *evaluator) nodesCheck(ctx context.Context, c *Cluster, nc *NodesCheck) Result {
	obj := "nodes"
	if nc.Selector != "" {
		obj += " -l " + nc.Selector
	}
	want := minOf(nc.Min)
	e.w.ensure(c, nodesGVR, "")
	l, err := c.dyn.Resource(nodesGVR).List(ctx, metav1.ListOptions{LabelSelector: nc.Selector})
	if err != nil {
		return fail(obj, "Error", "listing nodes: %v", err)
	}
	ready := 0
	for _, u := range l.Items {
		var n corev1.Node
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &n); err != nil {
			return fail(obj, "Error", "%v", err)
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	if ready < want {
		return fail(obj, "TooFewReady", "%d of %d nodes Ready, want at least %d", ready, len(l.Items), want)
	}
	return pass(obj, fmt.Sprintf("%d of %d nodes Ready", ready, len(l.Items)))
}
