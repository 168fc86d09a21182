package capture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// kube captures what the API server holds. Secrets are never listed or
// read: no item asks for them, environment variables are shown by name
// only, and fields that carry data (data, stringData, content, value) are
// redacted from the Cluster API objects.
func (c *capturer) kube() {
	if c.o.Config == nil {
		err := c.o.ConfigErr
		if err == nil {
			err = errors.New("no kubeconfig for the slot")
		}
		_ = c.item("kubernetes", "kube/error.txt", func(context.Context, io.Writer) error { return err })
		return
	}
	cfg := rest.CopyConfig(c.o.Config)
	cfg.Timeout = c.o.Timeout
	cfg.QPS, cfg.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		_ = c.item("kubernetes", "kube/error.txt", func(context.Context, io.Writer) error { return err })
		return
	}
	var pods []corev1.Pod
	c.api("nodes", "kube/nodes.txt", func(ctx context.Context, w io.Writer) error { return nodes(ctx, cs, w) })
	c.api("pods", "kube/pods.txt", func(ctx context.Context, w io.Writer) error {
		list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		pods = list.Items
		return podTable(w, pods)
	})
	c.api("events", "kube/events.txt", func(ctx context.Context, w io.Writer) error { return events(ctx, cs, w) })
	failing := failingPods(pods)
	c.api("describe failing pods", "kube/describe-pods.txt", func(ctx context.Context, w io.Writer) error {
		for i, p := range failing {
			if i >= MaxPods {
				fmt.Fprintf(w, "(%d more failing pods not described)\n", len(failing)-i)
				break
			}
			describePod(ctx, cs, w, &p)
		}
		if len(failing) == 0 {
			fmt.Fprintln(w, "no failing pods")
		}
		return nil
	})
	for i, p := range failing {
		if i >= MaxPods {
			break
		}
		c.podLogs(cs, "kube/logs", &p)
	}
	dyn, derr := dynamic.NewForConfig(cfg)
	dc, dcerr := discovery.NewDiscoveryClientForConfig(cfg)
	if derr == nil && dcerr == nil {
		c.clusterAPI(dc, dyn)
	}
	for _, p := range pods {
		if isController(&p) {
			c.podLogs(cs, "kube/controllers", &p)
		}
	}
}

// api runs one API item, or records it as skipped once the API server is
// known to be unreachable.
func (c *capturer) api(name, file string, fn func(ctx context.Context, w io.Writer) error) {
	if c.apiDown != nil {
		down := c.apiDown
		_ = c.item(name, file, func(context.Context, io.Writer) error {
			return fmt.Errorf("skipped: the API server is unreachable (%v)", down)
		})
		return
	}
	err := c.item(name, file, fn)
	var status apierrors.APIStatus
	if err != nil && !errors.As(err, &status) {
		c.apiDown = err
	}
}

func nodes(ctx context.Context, cs kubernetes.Interface, w io.Writer) error {
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, n := range list.Items {
		fmt.Fprintf(w, "Node %s (kubelet %s)\n", n.Name, n.Status.NodeInfo.KubeletVersion)
		for _, cond := range n.Status.Conditions {
			fmt.Fprintf(w, "  %-20s %-7s %s %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
		for _, t := range n.Spec.Taints {
			fmt.Fprintf(w, "  taint %s=%s:%s\n", t.Key, t.Value, t.Effect)
		}
		for _, a := range n.Status.Addresses {
			fmt.Fprintf(w, "  %s %s\n", a.Type, a.Address)
		}
	}
	if len(list.Items) == 0 {
		fmt.Fprintln(w, "no nodes")
	}
	return nil
}

func podTable(w io.Writer, pods []corev1.Pod) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tPHASE\tREADY\tRESTARTS\tAGE\tNODE")
	for _, p := range pods {
		ready, restarts := 0, int32(0)
		for _, s := range p.Status.ContainerStatuses {
			if s.Ready {
				ready++
			}
			restarts += s.RestartCount
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%d\t%s\t%s\n", p.Namespace, p.Name, p.Status.Phase, ready, len(p.Spec.Containers),
			restarts, time.Since(p.CreationTimestamp.Time).Round(time.Second), p.Spec.NodeName)
	}
	return tw.Flush()
}

func events(ctx context.Context, cs kubernetes.Interface, w io.Writer) error {
	list, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	evs := list.Items
	sort.Slice(evs, func(i, j int) bool { return eventTime(&evs[i]).Before(eventTime(&evs[j])) })
	const maxEvents = 2000
	if len(evs) > maxEvents {
		fmt.Fprintf(w, "(%d older events left out)\n", len(evs)-maxEvents)
		evs = evs[len(evs)-maxEvents:]
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LAST SEEN\tTYPE\tREASON\tOBJECT\tCOUNT\tMESSAGE")
	for _, e := range evs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s/%s/%s\t%d\t%s\n", eventTime(&e).UTC().Format(time.RFC3339), e.Type, e.Reason,
			e.InvolvedObject.Namespace, strings.ToLower(e.InvolvedObject.Kind), e.InvolvedObject.Name, e.Count, oneLine(e.Message))
	}
	return tw.Flush()
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

func oneLine(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", " ") }

// failingPods are pods that have not succeeded and are not running with
// every container ready.
func failingPods(pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded {
			continue
		}
		ok := p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) > 0
		for _, s := range p.Status.ContainerStatuses {
			ok = ok && s.Ready
		}
		if !ok {
			out = append(out, p)
		}
	}
	return out
}

// describePod writes what kubectl describe pod says that matters here.
// Environment variables are named, never valued.
func describePod(ctx context.Context, cs kubernetes.Interface, w io.Writer, p *corev1.Pod) {
	fmt.Fprintf(w, "Name:       %s\nNamespace:  %s\nNode:       %s\nPhase:      %s\n", p.Name, p.Namespace, p.Spec.NodeName, p.Status.Phase)
	if p.Status.Reason != "" || p.Status.Message != "" {
		fmt.Fprintf(w, "Reason:     %s %s\n", p.Status.Reason, oneLine(p.Status.Message))
	}
	fmt.Fprintln(w, "Conditions:")
	for _, cond := range p.Status.Conditions {
		fmt.Fprintf(w, "  %-16s %-6s %s %s\n", cond.Type, cond.Status, cond.Reason, oneLine(cond.Message))
	}
	statuses := map[string]corev1.ContainerStatus{}
	for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		statuses[s.Name] = s
	}
	fmt.Fprintln(w, "Containers:")
	for _, ct := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		s := statuses[ct.Name]
		fmt.Fprintf(w, "  %s:\n    Image:     %s\n    State:     %s\n    Last:      %s\n    Ready:     %v\n    Restarts:  %d\n",
			ct.Name, ct.Image, stateString(s.State), stateString(s.LastTerminationState), s.Ready, s.RestartCount)
		var env []string
		for _, e := range ct.Env {
			switch {
			case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
				env = append(env, e.Name+" (from secret "+e.ValueFrom.SecretKeyRef.Name+")")
			default:
				env = append(env, e.Name)
			}
		}
		if len(env) > 0 {
			fmt.Fprintf(w, "    Env (names only): %s\n", strings.Join(env, ", "))
		}
	}
	list, err := cs.CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + p.Name})
	fmt.Fprintln(w, "Events:")
	if err != nil {
		fmt.Fprintf(w, "  error: %v\n", err)
	}
	if list != nil {
		for _, e := range list.Items {
			fmt.Fprintf(w, "  %s  %s  %s  %s\n", eventTime(&e).UTC().Format(time.RFC3339), e.Type, e.Reason, oneLine(e.Message))
		}
	}
	fmt.Fprintln(w)
}

func stateString(s corev1.ContainerState) string {
	switch {
	case s.Waiting != nil:
		return fmt.Sprintf("Waiting (%s) %s", s.Waiting.Reason, oneLine(s.Waiting.Message))
	case s.Running != nil:
		return "Running since " + s.Running.StartedAt.UTC().Format(time.RFC3339)
	case s.Terminated != nil:
		return fmt.Sprintf("Terminated (%s, exit %d) %s", s.Terminated.Reason, s.Terminated.ExitCode, oneLine(s.Terminated.Message))
	}
	return "-"
}

// podLogs captures the last lines of each container of p (and of its
// previous run when it restarted).
func (c *capturer) podLogs(cs kubernetes.Interface, dir string, p *corev1.Pod) {
	restarts := map[string]int32{}
	for _, s := range p.Status.ContainerStatuses {
		restarts[s.Name] = s.RestartCount
	}
	tail := int64(TailLines)
	for _, ct := range p.Spec.Containers {
		for _, previous := range []bool{false, true} {
			if previous && restarts[ct.Name] == 0 {
				continue
			}
			file := fmt.Sprintf("%s/%s_%s_%s.log", dir, p.Namespace, p.Name, ct.Name)
			if previous {
				file = strings.TrimSuffix(file, ".log") + ".previous.log"
			}
			c.api("logs "+p.Namespace+"/"+p.Name+"/"+ct.Name, file, func(ctx context.Context, w io.Writer) error {
				limit := c.o.MaxBytes
				rc, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: ct.Name, Previous: previous,
					TailLines: &tail, LimitBytes: &limit}).Stream(ctx)
				if err != nil {
					return err
				}
				defer rc.Close()
				_, err = io.Copy(w, rc)
				return err
			})
		}
	}
}

// isController is a Cluster API or CAPD controller pod.
func isController(p *corev1.Pod) bool {
	if _, ok := p.Labels["cluster.x-k8s.io/provider"]; ok {
		return true
	}
	return strings.HasPrefix(p.Namespace, "capi-") || strings.HasPrefix(p.Namespace, "capd-")
}

// clusterAPI dumps every object of the Cluster API groups the server
// serves (clusters, machines, CAPD's Docker* objects, ...).
func (c *capturer) clusterAPI(dc discovery.DiscoveryInterface, dyn dynamic.Interface) {
	var resources []schema.GroupVersionResource
	c.api("Cluster API resources", "kube/capi/resources.txt", func(ctx context.Context, w io.Writer) error {
		lists, err := dc.ServerPreferredResources()
		for _, l := range lists {
			gv, perr := schema.ParseGroupVersion(l.GroupVersion)
			if perr != nil || !strings.HasSuffix(gv.Group, "cluster.x-k8s.io") {
				continue
			}
			for _, r := range l.APIResources {
				if strings.Contains(r.Name, "/") || !contains(r.Verbs, "list") {
					continue
				}
				resources = append(resources, gv.WithResource(r.Name))
				fmt.Fprintf(w, "%s.%s (%s)\n", r.Name, gv.Group, gv.Version)
			}
		}
		if len(resources) == 0 {
			fmt.Fprintln(w, "no Cluster API resources served")
		}
		if err != nil && len(resources) == 0 {
			return err
		}
		return nil
	})
	for _, gvr := range resources {
		c.api("Cluster API "+gvr.Resource+"."+gvr.Group, "kube/capi/"+gvr.Resource+"."+gvr.Group+".yaml", func(ctx context.Context, w io.Writer) error {
			list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for _, o := range list.Items {
				redact(&o)
				b, err := yaml.Marshal(o.Object)
				if err != nil {
					return err
				}
				fmt.Fprintf(w, "---\n%s", b)
			}
			return nil
		})
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// redactedKeys are fields that may carry secret material (a bootstrap
// config's file contents, a kubeconfig): their values are never written.
var redactedKeys = map[string]bool{"data": true, "stringData": true, "content": true, "value": true}

// redact drops managed fields and the last-applied annotation, and
// replaces the value of every redacted key.
func redact(o *unstructured.Unstructured) {
	o.SetManagedFields(nil)
	if a := o.GetAnnotations(); a != nil {
		delete(a, "kubectl.kubernetes.io/last-applied-configuration")
		o.SetAnnotations(a)
	}
	o.Object = redactMap(o.Object).(map[string]any)
}

func redactMap(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, val := range t {
			if redactedKeys[k] {
				t[k] = "<redacted>"
				continue
			}
			t[k] = redactMap(val)
		}
	case []any:
		for i := range t {
			t[i] = redactMap(t[i])
		}
	}
	return v
}
