package gate

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
)

func TestDefaultGateParses(t *testing.T) {
	g := Default()
	var names []string
	for _, c := range g.Spec.Checks {
		names = append(names, c.Name)
	}
	want := "mgmt-images flux-source flux-source-url flux-kustomization workload-cluster workload zarf-packages"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("default checks %q, want %q", got, want)
	}
	if g.Poll() != DefaultPollInterval {
		t.Errorf("poll %s", g.Poll())
	}
}

func TestParseRejects(t *testing.T) {
	head := "apiVersion: kubectl-bundle.dev/v1alpha1\nkind: Gate\nmetadata: {name: t}\nspec:\n  checks:\n"
	for _, tc := range []struct{ name, doc, field, msg string }{
		{"empty", "", "", "empty"},
		{"not yaml", "{{", "", "parsing"},
		{"wrong kind", "apiVersion: kubectl-bundle.dev/v1alpha1\nkind: Gait\n", "kind", `"Gait"`},
		{"wrong apiVersion", "apiVersion: v1\nkind: Gate\n", "apiVersion", "want kubectl-bundle.dev/v1alpha1"},
		{"no checks", "apiVersion: kubectl-bundle.dev/v1alpha1\nkind: Gate\nspec: {}\n", "spec.checks", "at least one"},
		{"unknown field", head + "  - name: a\n    resource: {apiVersion: v1, kind: ConfigMap, name: x, condtion: Ready}\n", "", "line 7: field condtion not found"},
		{"no name", head + "  - nodes: {}\n", "spec.checks[0].name", "required"},
		{"bad name", head + "  - name: Bad_Name\n    nodes: {}\n", "spec.checks[0](Bad_Name).name", "lower-case"},
		{"two types", head + "  - name: a\n    nodes: {}\n    pods: {namespace: x}\n", "spec.checks[0](a)", "exactly one"},
		{"no type", head + "  - name: a\n", "spec.checks[0](a)", "found 0"},
		{"duplicate", head + "  - name: a\n    nodes: {}\n  - name: a\n    nodes: {}\n", "spec.checks[1](a).name", "unique"},
		{"no kind", head + "  - name: a\n    resource: {apiVersion: v1, name: x}\n", "spec.checks[0](a).resource.kind", "required"},
		{"name and selector", head + "  - name: a\n    resource: {apiVersion: v1, kind: Pod, name: x, selector: a=b}\n", "spec.checks[0](a).resource", "exactly one of name and selector"},
		{"bad selector", head + "  - name: a\n    pods: {namespace: x, selector: 'a in (('}\n", "spec.checks[0](a).pods.selector", ""},
		{"bad jsonpath", head + "  - name: a\n    field: {apiVersion: v1, kind: Pod, name: x, path: '{.spec', equals: y}\n", "spec.checks[0](a).field.path", "not a JSONPath"},
		{"two ops", head + "  - name: a\n    field: {apiVersion: v1, kind: Pod, name: x, path: '{.a}', equals: y, contains: z}\n", "spec.checks[0](a).field", "exactly one of equals"},
		{"bad regexp", head + "  - name: a\n    field: {apiVersion: v1, kind: Pod, name: x, path: '{.a}', matches: '('}\n", "spec.checks[0](a).field.matches", "missing closing"},
		{"no registries", head + "  - name: a\n    images: {}\n", "spec.checks[0](a).images.allowedRegistries", "required"},
		{"negative", head + "  - name: a\n    nodes: {min: -1}\n", "spec.checks[0](a).nodes.min", "negative"},
		{"workload no cluster", head + "  - name: a\n    workload: {checks: [{name: n, nodes: {}}]}\n", "spec.checks[0](a).workload.cluster", "required"},
		{"workload nested", head + "  - name: a\n    workload:\n      cluster: c\n      checks:\n      - name: b\n        workload: {cluster: d, checks: [{name: n, nodes: {}}]}\n", "spec.checks[0](a).workload.checks[0](b).workload", "cannot hold"},
		{"bad poll", "apiVersion: kubectl-bundle.dev/v1alpha1\nkind: Gate\nspec:\n  pollInterval: soon\n", "spec.pollInterval", "positive duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Parse(strings.NewReader(tc.doc))
			var se *SpecError
			if !errors.As(err, &se) {
				t.Fatalf("want *SpecError, got %v", err)
			}
			if se.Field != tc.field {
				t.Errorf("field %q, want %q (%v)", se.Field, tc.field, err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q lacks %q", err, tc.msg)
			}
			if se.ErrorKind() != errkind.Usage {
				t.Errorf("kind %v", se.ErrorKind())
			}
		})
	}
}

func TestParseWarnsOnClusterWithoutCondition(t *testing.T) {
	doc := "apiVersion: kubectl-bundle.dev/v1alpha1\nkind: Gate\nspec:\n  checks:\n  - name: wl\n    resource: {apiVersion: cluster.x-k8s.io/v1beta2, kind: Cluster, name: x}\n"
	_, warnings, err := Parse(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "condition: Available") {
		t.Errorf("warnings %q", warnings)
	}
}

func TestImageRegistry(t *testing.T) {
	for img, want := range map[string]string{
		"nginx":                                  "docker.io",
		"library/nginx:1":                        "docker.io",
		"127.0.0.1:31999/stefanprodan/podinfo:6": "127.0.0.1:31999",
		"registry.k8s.io/pause:3.10":             "registry.k8s.io",
		"localhost/x":                            "localhost",
		"kindest/kindnetd:v2":                    "docker.io",
	} {
		if got := registryOf(img); got != want {
			t.Errorf("registryOf(%q) = %q, want %q", img, got, want)
		}
	}
	ign := []string{"registry.k8s.io/kube-*", "docker.io/kindest/*", "docker.io/library/busybox*"}
	var pats []*regexp.Regexp
	for _, p := range ign {
		pats = append(pats, globRE(p))
	}
	for img, want := range map[string]bool{
		"registry.k8s.io/kube-proxy:v1.36.4": true,
		"registry.k8s.io/etcd:3.6":           false,
		"kindest/kindnetd:v2":                true,
		"busybox:1.36":                       true,
		"docker.io/evil/kindest/x":           false,
	} {
		if got := ignored(img, pats); got != want {
			t.Errorf("ignored(%q) = %v, want %v", img, got, want)
		}
	}
}
