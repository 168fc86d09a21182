// Package gate evaluates declarative health gates (kind Gate) against a
// cluster, waiting on watches until every check passes or time runs out.
package gate

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/jsonpath"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
)

// APIVersion and Kind identify a gate document.
const (
	APIVersion = "kubectl-bundle.dev/v1alpha1"
	Kind       = "Gate"
)

// DefaultPollInterval is how often checks are re-evaluated when no watch
// event arrives (a fallback: watches normally wake the gate).
const DefaultPollInterval = 30 * time.Second

// Gate is a named list of checks that must all pass.
type Gate struct {
	APIVersion string   `yaml:"apiVersion" json:"apiVersion"`
	Kind       string   `yaml:"kind" json:"kind"`
	Metadata   Metadata `yaml:"metadata" json:"metadata"`
	Spec       Spec     `yaml:"spec" json:"spec"`
}

// Metadata names a gate.
type Metadata struct {
	Name string `yaml:"name" json:"name"`
}

// Spec holds the checks.
type Spec struct {
	// PollInterval is the fallback re-evaluation interval (default 30s).
	PollInterval string  `yaml:"pollInterval,omitempty" json:"pollInterval,omitempty"`
	Checks       []Check `yaml:"checks" json:"checks"`
}

// Check is one named check; exactly one of its type fields is set.
type Check struct {
	Name string `yaml:"name" json:"name"`
	// Timeout is how long this check may take to pass, from the start of
	// the gate (default the gate's own timeout); a check still failing at
	// its timeout fails the gate then. Top-level checks only.
	Timeout  string         `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	Resource *ResourceCheck `yaml:"resource,omitempty" json:"resource,omitempty"`
	Field    *FieldCheck    `yaml:"field,omitempty" json:"field,omitempty"`
	Images   *ImagesCheck   `yaml:"images,omitempty" json:"images,omitempty"`
	Pods     *PodsCheck     `yaml:"pods,omitempty" json:"pods,omitempty"`
	Nodes    *NodesCheck    `yaml:"nodes,omitempty" json:"nodes,omitempty"`
	Workload *WorkloadCheck `yaml:"workload,omitempty" json:"workload,omitempty"`
	Zarf     *ZarfCheck     `yaml:"zarf,omitempty" json:"zarf,omitempty"`
}

// ObjectRef selects objects by name or by label selector.
type ObjectRef struct {
	APIVersion string `yaml:"apiVersion" json:"apiVersion"`
	Kind       string `yaml:"kind" json:"kind"`
	Namespace  string `yaml:"namespace,omitempty" json:"namespace,omitempty"`
	Name       string `yaml:"name,omitempty" json:"name,omitempty"`
	Selector   string `yaml:"selector,omitempty" json:"selector,omitempty"`
}

// ResourceCheck passes when every selected object has Condition True, or,
// without Condition, when kstatus computes Current for it.
type ResourceCheck struct {
	ObjectRef `yaml:",inline" json:",inline"`
	Condition string `yaml:"condition,omitempty" json:"condition,omitempty"`
}

// FieldCheck passes when a JSONPath of every selected object equals,
// contains or matches a value.
type FieldCheck struct {
	ObjectRef `yaml:",inline" json:",inline"`
	Path      string  `yaml:"path" json:"path"`
	Equals    *string `yaml:"equals,omitempty" json:"equals,omitempty"`
	Contains  string  `yaml:"contains,omitempty" json:"contains,omitempty"`
	Matches   string  `yaml:"matches,omitempty" json:"matches,omitempty"`
}

// ImagesCheck passes when every container image (init and ephemeral too) of
// every pod in Namespaces (all when empty) comes from an allowed registry,
// except images matching an Ignore pattern (* matches any run of characters).
type ImagesCheck struct {
	Namespaces        []string `yaml:"namespaces,omitempty" json:"namespaces,omitempty"`
	AllowedRegistries []string `yaml:"allowedRegistries" json:"allowedRegistries"`
	Ignore            []string `yaml:"ignore,omitempty" json:"ignore,omitempty"`
}

// PodsCheck passes when at least Min pods are Running and Ready; without
// Namespace, in the namespace of -n or the context.
type PodsCheck struct {
	Namespace string `yaml:"namespace" json:"namespace"`
	Selector  string `yaml:"selector,omitempty" json:"selector,omitempty"`
	Min       int    `yaml:"min,omitempty" json:"min,omitempty"`
}

// NodesCheck passes when at least Min nodes are Ready.
type NodesCheck struct {
	Selector string `yaml:"selector,omitempty" json:"selector,omitempty"`
	Min      int    `yaml:"min,omitempty" json:"min,omitempty"`
}

// WorkloadCheck runs nested checks against a Cluster API workload cluster,
// reached through the kubeconfig in the <cluster>-kubeconfig secret.
type WorkloadCheck struct {
	Cluster   string `yaml:"cluster" json:"cluster"`
	Namespace string `yaml:"namespace,omitempty" json:"namespace,omitempty"`
	// Secret defaults to <cluster>-kubeconfig (key "value", as CAPI writes it).
	Secret string `yaml:"secret,omitempty" json:"secret,omitempty"`
	// UseDockerPort points the kubeconfig at the host port Docker published
	// for port 6443 of LoadBalancer (default <cluster>-lb): CAPD's address is
	// on the kind network, which the host may not route to.
	UseDockerPort bool    `yaml:"useDockerPort,omitempty" json:"useDockerPort,omitempty"`
	LoadBalancer  string  `yaml:"loadBalancer,omitempty" json:"loadBalancer,omitempty"`
	Checks        []Check `yaml:"checks" json:"checks"`
}

// ZarfCheck evaluates the healthChecks of every deployed component of every
// Zarf package in the cluster (the zarf-package-* secrets in namespace zarf).
type ZarfCheck struct {
	// Packages, when set, must all be deployed.
	Packages []string `yaml:"packages,omitempty" json:"packages,omitempty"`
}

//go:embed default.yaml
var defaultYAML []byte

// DefaultYAML returns the built-in gate as YAML, for --print-default.
func DefaultYAML() []byte { return bytes.Clone(defaultYAML) }

// Default returns the built-in gate: offline-run.sh's checks 5-9 and the
// zarf check.
func Default() *Gate {
	g, _, err := Parse(bytes.NewReader(defaultYAML))
	if err != nil {
		panic("the built-in gate does not parse: " + err.Error())
	}
	return g
}

// SpecError is a gate document that does not parse or validate. Field
// names the offending field, as a path from the document's root.
type SpecError struct {
	Field string
	Err   error
}

func (e *SpecError) Error() string {
	if e.Field == "" {
		return e.Err.Error()
	}
	return e.Field + ": " + e.Err.Error()
}

func (e *SpecError) Unwrap() error { return e.Err }

// ErrorKind: a bad gate file is a usage error.
func (e *SpecError) ErrorKind() errkind.Kind { return errkind.Usage }

// MaxFileSize caps a gate file: the gate and journal status, which tells
// whether a run's recorded gate file can still be used, read it with
// ReadAll and refuse a larger one alike.
const MaxFileSize = 4 << 20

// ReadAll reads a gate file whole, refusing one larger than MaxFileSize
// (a SpecError); other errors are the reader's.
func ReadAll(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, &SpecError{Err: fmt.Errorf("larger than %d bytes", MaxFileSize)}
	}
	return data, nil
}

// Parse reads one gate document, rejecting unknown fields, and validates it.
// Warnings are things that are legal but probably not meant.
func Parse(r io.Reader) (*Gate, []string, error) {
	dec := yaml.NewDecoder(io.LimitReader(r, MaxFileSize))
	dec.KnownFields(true)
	var g Gate
	if err := dec.Decode(&g); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil, &SpecError{Err: errors.New("the gate file is empty")}
		}
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		var te *yaml.TypeError
		if errors.As(err, &te) {
			msg = strings.Join(te.Errors, "; ")
		}
		return nil, nil, &SpecError{Err: fmt.Errorf("parsing: %s", goTypeRE.ReplaceAllString(msg, ""))}
	}
	warnings, err := g.Validate()
	if err != nil {
		return nil, nil, err
	}
	return &g, warnings, nil
}

// Poll returns the fallback poll interval.
func (g *Gate) Poll() time.Duration {
	d, err := time.ParseDuration(g.Spec.PollInterval)
	if err != nil || d <= 0 {
		return DefaultPollInterval
	}
	return d
}

// goTypeRE strips the Go type names yaml puts in its messages.
var goTypeRE = regexp.MustCompile(` (in|into) (type )?[\[\]*]*gate\.\w+`)

var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$`)

// Validate checks the document and returns warnings for legal but doubtful
// checks.
func (g *Gate) Validate() ([]string, error) {
	bad := func(field, format string, args ...any) error {
		return &SpecError{Field: field, Err: fmt.Errorf(format, args...)}
	}
	if g.APIVersion != APIVersion {
		return nil, bad("apiVersion", "is %q, want %s", g.APIVersion, APIVersion)
	}
	if g.Kind != Kind {
		return nil, bad("kind", "is %q, want %s", g.Kind, Kind)
	}
	if g.Spec.PollInterval != "" {
		if d, err := time.ParseDuration(g.Spec.PollInterval); err != nil || d <= 0 {
			return nil, bad("spec.pollInterval", "%q is not a positive duration (e.g. 30s)", g.Spec.PollInterval)
		}
	}
	var warnings []string
	if err := validateChecks("spec.checks", g.Spec.Checks, false, &warnings); err != nil {
		return nil, err
	}
	return warnings, nil
}

func validateChecks(path string, checks []Check, nested bool, warnings *[]string) error {
	if len(checks) == 0 {
		return &SpecError{Field: path, Err: errors.New("no checks: a gate needs at least one")}
	}
	seen := map[string]bool{}
	for i := range checks {
		c := &checks[i]
		p := fmt.Sprintf("%s[%d]", path, i)
		if c.Name != "" {
			p = fmt.Sprintf("%s[%d](%s)", path, i, c.Name)
		}
		if err := validateCheck(p, c, nested, warnings); err != nil {
			return err
		}
		if seen[c.Name] {
			return &SpecError{Field: p + ".name", Err: fmt.Errorf("%q is used by two checks; names must be unique", c.Name)}
		}
		seen[c.Name] = true
	}
	return nil
}

func validateCheck(p string, c *Check, nested bool, warnings *[]string) error {
	bad := func(field, format string, args ...any) error {
		return &SpecError{Field: p + field, Err: fmt.Errorf(format, args...)}
	}
	if c.Name == "" {
		return bad(".name", "required")
	}
	if !nameRE.MatchString(c.Name) {
		return bad(".name", "%q: use lower-case letters, digits, '-' and '.'", c.Name)
	}
	if c.Timeout != "" {
		if nested {
			return bad(".timeout", "a nested check shares the timeout of its workload check: set it there")
		}
		if d, err := time.ParseDuration(c.Timeout); err != nil || d <= 0 {
			return bad(".timeout", "%q is not a positive duration (e.g. 10m)", c.Timeout)
		}
	}
	var set []string
	for name, ok := range map[string]bool{"resource": c.Resource != nil, "field": c.Field != nil, "images": c.Images != nil,
		"pods": c.Pods != nil, "nodes": c.Nodes != nil, "workload": c.Workload != nil, "zarf": c.Zarf != nil} {
		if ok {
			set = append(set, name)
		}
	}
	if len(set) != 1 {
		return bad("", "set exactly one of resource, field, images, pods, nodes, workload, zarf (found %d)", len(set))
	}
	switch {
	case c.Resource != nil:
		if err := validateRef(p+".resource", c.Resource.ObjectRef); err != nil {
			return err
		}
		if c.Resource.Condition == "" && c.Resource.Kind == "Cluster" && c.Resource.APIVersion == "cluster.x-k8s.io/v1beta2" {
			*warnings = append(*warnings, fmt.Sprintf("%s.resource: kstatus calls a v1beta2 Cluster Current before it is usable; add condition: Available", p))
		}
	case c.Field != nil:
		f := c.Field
		if err := validateRef(p+".field", f.ObjectRef); err != nil {
			return err
		}
		if f.Path == "" {
			return bad(".field.path", "required (a JSONPath such as {.spec.url})")
		}
		if err := jsonpath.New("x").Parse(f.Path); err != nil {
			return bad(".field.path", "%q is not a JSONPath: %v", f.Path, err)
		}
		n := 0
		for _, ok := range []bool{f.Equals != nil, f.Contains != "", f.Matches != ""} {
			if ok {
				n++
			}
		}
		if n != 1 {
			return bad(".field", "set exactly one of equals, contains, matches")
		}
		if f.Matches != "" {
			if _, err := regexp.Compile(f.Matches); err != nil {
				return bad(".field.matches", "%v", err)
			}
		}
	case c.Images != nil:
		if len(c.Images.AllowedRegistries) == 0 {
			return bad(".images.allowedRegistries", "required: name at least one registry (e.g. 127.0.0.1:31999)")
		}
	case c.Pods != nil:
		if err := validateSelector(p+".pods.selector", c.Pods.Selector); err != nil {
			return err
		}
		if c.Pods.Min < 0 {
			return bad(".pods.min", "must not be negative")
		}
	case c.Nodes != nil:
		if err := validateSelector(p+".nodes.selector", c.Nodes.Selector); err != nil {
			return err
		}
		if c.Nodes.Min < 0 {
			return bad(".nodes.min", "must not be negative")
		}
	case c.Workload != nil:
		if nested {
			return bad(".workload", "a workload check cannot hold another workload check")
		}
		if c.Workload.Cluster == "" {
			return bad(".workload.cluster", "required: the Cluster API Cluster's name")
		}
		return validateChecks(p+".workload.checks", c.Workload.Checks, true, warnings)
	}
	return nil
}

func validateRef(p string, r ObjectRef) error {
	if r.APIVersion == "" {
		return &SpecError{Field: p + ".apiVersion", Err: errors.New("required (e.g. source.toolkit.fluxcd.io/v1)")}
	}
	if r.Kind == "" {
		return &SpecError{Field: p + ".kind", Err: errors.New("required")}
	}
	if (r.Name == "") == (r.Selector == "") {
		return &SpecError{Field: p, Err: errors.New("set exactly one of name and selector")}
	}
	return validateSelector(p+".selector", r.Selector)
}

func validateSelector(p, s string) error {
	if s == "" {
		return nil
	}
	if _, err := labels.Parse(s); err != nil {
		return &SpecError{Field: p, Err: err}
	}
	return nil
}

// CheckTimeouts returns the timeout of each top-level check that has one:
// its own, or the one overrides gives its name. An override naming no
// check is an error.
func (g *Gate) CheckTimeouts(overrides map[string]time.Duration) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	names := map[string]bool{}
	for _, c := range g.Spec.Checks {
		names[c.Name] = true
		if d, err := time.ParseDuration(c.Timeout); err == nil && d > 0 {
			out[c.Name] = d
		}
	}
	for name, d := range overrides {
		if !names[name] {
			return nil, &SpecError{Field: "check timeout " + name, Err: fmt.Errorf("gate %s has no check %q", g.Metadata.Name, name)}
		}
		out[name] = d
	}
	return out, nil
}

// LongestTimeout returns the largest of timeouts (0 when there is none):
// the gate's default timeout, so that every check gets its own.
func LongestTimeout(timeouts map[string]time.Duration) time.Duration {
	var m time.Duration
	for _, d := range timeouts {
		m = max(m, d)
	}
	return m
}
