package slot

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
)

// TestKindConfigGolden: the management cluster matches
// stage-and-create-cluster.sh (UPDATE=1 rewrites the golden file).
func TestKindConfigGolden(t *testing.T) {
	c := Defaults()
	n, err := c.NamesFor("b")
	if err != nil {
		t.Fatal(err)
	}
	got, err := KindConfigYAML(KindConfig(&c, n))
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "kind-config-b.yaml")
	if os.Getenv("UPDATE") != "" {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("kind config:\n%s\nwant:\n%s", got, want)
	}
}

func TestNames(t *testing.T) {
	c := Defaults()
	a, _ := c.NamesFor("a")
	b, _ := c.NamesFor("b")
	for _, tc := range []struct{ got, want string }{
		{a.Cluster, "airgap-mgmt-a"}, {a.Context, "kind-airgap-mgmt-a"}, {a.Registry, "krops-registry-airgap-a"},
		{b.Cluster, "airgap-mgmt-b"}, {b.Context, "kind-airgap-mgmt-b"}, {b.Registry, "krops-registry-airgap-b"},
		{a.Workloads[0], "airgap-wl-a"}, {b.Workloads[0], "airgap-wl-b"},
		{a.Variables["SLOT"], "a"}, {b.Variables["SLOT"], "b"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	if a.RegistryPort != 5002 || b.RegistryPort != 5003 {
		t.Errorf("ports %d %d", a.RegistryPort, b.RegistryPort)
	}
	// No container of one slot is ever taken for the other's.
	for _, name := range []string{"airgap-mgmt-a-control-plane", "krops-registry-airgap-a", "airgap-wl-a-lb", "airgap-wl-a-control-plane-7x2"} {
		if !owned(name, a) || owned(name, b) {
			t.Errorf("%s: owned by a %v, by b %v", name, owned(name, a), owned(name, b))
		}
	}
	c.Slots = []string{"a", "ab"}
	ab, _ := c.NamesFor("ab")
	if owned("airgap-wl-ab-lb", a) || !owned("airgap-wl-ab-lb", ab) {
		t.Error("slot a claims slot ab's container")
	}
	if _, err := c.NamesFor("c"); err == nil || !strings.Contains(err.Error(), "add it to slots:") {
		t.Errorf("unknown slot: %v", err)
	}
	if _, err := c.NamesFor("Bad"); err == nil {
		t.Error("bad name accepted")
	}
}

// TestConfigPrecedence: flag > environment > file > default.
func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, []byte("kind: Config\nclusterPrefix: from-file\nregistryName: file-registry\nregistryPortBase: 7000\nslots: [blue, green]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"KUBECTL_BUNDLE_REGISTRY_NAME": "env-registry", "KUBECTL_BUNDLE_REGISTRY_PORT_BASE": "7100"}
	c, err := LoadConfig(file, func(k string) string { return env[k] }, map[string]string{"registryPortBase": "7200"})
	if err != nil {
		t.Fatal(err)
	}
	if c.ClusterPrefix != "from-file" || c.RegistryName != "env-registry" || c.RegistryPortBase != 7200 || c.NodeImage != Defaults().NodeImage {
		t.Errorf("config %+v", c)
	}
	n, err := c.NamesFor("green")
	if err != nil || n.RegistryPort != 7201 || n.Cluster != "from-file-green" {
		t.Errorf("names %+v %v", n, err)
	}
	for _, tc := range []struct{ file, env, want string }{
		{"kind: Config\nregistyName: typo\n", "", "field registyName not found"},
		{"kind: Other\n", "", "want Config"},
		{"", "KUBECTL_BUNDLE_REGISTRY_PORT_BASE=abc", "$KUBECTL_BUNDLE_REGISTRY_PORT_BASE: \"abc\" is not a port number"},
		{"", "KUBECTL_BUNDLE_PROVIDER=docker", "provider \"docker\": use kind or existing"},
		{"registryPortBase: 80\n", "", "use a port from 1024"},
	} {
		if err := os.WriteFile(file, []byte(tc.file), 0o600); err != nil {
			t.Fatal(err)
		}
		k, v, _ := strings.Cut(tc.env, "=")
		_, err := LoadConfig(file, func(s string) string {
			if s == k {
				return v
			}
			return ""
		}, nil)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.ErrorKind() != errkind.Usage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q %q: %v, want %q", tc.file, tc.env, err, tc.want)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"1.5GiB": 3 << 29, "300MiB": 300 << 20, "12kB": 12000, "512B": 512} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := parseBytes("12"); err == nil {
		t.Error("size without a unit accepted")
	}
	if !publishes("127.0.0.1:5002->5000/tcp, [::]:5002->5000/tcp", "5002") || publishes("127.0.0.1:15002->5000/tcp", "5002") {
		t.Error("publishes")
	}
}

// TestOfflineConfig: config.yaml's offline: section is read (an explicit 0
// is kept apart from unset) and checked.
func TestOfflineConfig(t *testing.T) {
	load := func(body string) (*Config, error) {
		p := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return LoadConfig(p, func(string) string { return "" }, nil)
	}
	c, err := load("offline:\n  waitSeconds: 0\n  endpoints: [https://ghcr.io, 127.0.0.1:5000]\n  probeTimeout: 2s\n")
	if err != nil {
		t.Fatal(err)
	}
	if c.Offline.WaitSeconds == nil || *c.Offline.WaitSeconds != 0 || len(c.Offline.Endpoints) != 2 || c.Offline.ProbeTimeout != "2s" {
		t.Errorf("offline = %+v", c.Offline)
	}
	if c, err := load("kind: Config\n"); err != nil || c.Offline.WaitSeconds != nil {
		t.Errorf("no offline: section: %+v, %v; want the check off", c.Offline, err)
	}
	for body, want := range map[string]string{
		"offline: {waitSeconds: -1}":       "offline.waitSeconds -1",
		"offline: {endpoints: [ghcr.io]}":  `offline.endpoints: endpoint "ghcr.io"`,
		"offline: {probeTimeout: 0s}":      "offline.probeTimeout",
		"offline: {waitSecond: 3}":         "field waitSecond not found",
		"offline: {probeTimeout: quickly}": "not a positive duration",
	} {
		_, err := load(body)
		if err == nil || !strings.Contains(err.Error(), want) || errkind.Of(err) != errkind.Usage {
			t.Errorf("%s: err %v, want a usage error with %q", body, err, want)
		}
	}
}
