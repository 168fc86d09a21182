package slot

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestInputsUnchanged: the inputs digest of slots created before providers
// were an interface is the same, so that create stays a no-op for them.
func TestInputsUnchanged(t *testing.T) {
	c := Defaults()
	c.Archives = "/nonexistent"
	// The images those slots were created with (the defaults then).
	c.RegistryImage = "registry:2@sha256:a3d8aaa63ed8681a604f1dea0aa03f100d5895b6a58ace528858a7b332415373"
	c.NodeImage = "kindest/node:v1.36.4@sha256:099e049362a1526b2db71494e1947aae99bd16290d7c895f2b7ea312e3cbfaed"
	m := &Manager{Config: &c, Kubeconfig: "/k"}
	n, err := c.NamesFor("a")
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.provider()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.inputs(p, n), "b0c85c121838264b"; got != want {
		t.Errorf("kind inputs = %s, want %s (the digest recorded by earlier versions)", got, want)
	}
	c.Provider = ProviderExisting
	c.Existing = map[string]ExistingSlot{"a": {Context: "ctx", Kubeconfig: "/kc", Init: true}}
	if p, err = m.provider(); err != nil {
		t.Fatal(err)
	}
	if got, want := m.inputs(p, n), "7dd249fed96170d0"; got != want {
		t.Errorf("existing inputs = %s, want %s (the digest recorded by earlier versions)", got, want)
	}
}

func TestProviderRegistry(t *testing.T) {
	if got := strings.Join(ProviderNames(), ","); got != "kind,existing" {
		t.Errorf("ProviderNames = %s, want kind,existing (the default first)", got)
	}
	for _, name := range ProviderNames() {
		p, err := ProviderNamed(name)
		if err != nil || p.Name() != name {
			t.Errorf("ProviderNamed(%s) = %v, %v", name, p, err)
		}
	}
	_, err := LoadConfig(filepath.Join(t.TempDir(), "none.yaml"), func(string) string { return "" }, map[string]string{"provider": "vsphere"})
	if err == nil || err.Error() != `--provider: provider "vsphere": use kind or existing` && err.Error() != `provider "vsphere": use kind or existing` {
		t.Errorf("unknown provider: err = %v", err)
	}
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Errorf("unknown provider: %T is not a ConfigError", err)
	}
	// A record naming a provider that is not registered cannot be summarised as another's.
	if got := Summary(&Record{Name: "a", Provider: "vsphere", Context: "x"}); !strings.Contains(got, "vsphere provider (unknown)") {
		t.Errorf("Summary of an unknown provider = %q", got)
	}
}

// TestProviderNamesStayInProviderFiles: a provider's name is spelled only
// in its own file (and the config parser's default), so that a new
// provider is a local change. Everywhere else code asks the provider.
func TestProviderNamesStayInProviderFiles(t *testing.T) {
	allowed := map[string]bool{
		"internal/slot/provider_kind.go":     true,
		"internal/slot/provider_existing.go": true,
		"internal/slot/config.go":            true,
	}
	// Test-support packages imitate the tools (a fake kind's Docker network is "kind").
	testSupport := map[string]bool{"fakes": true, "testenv": true, "sitesim": true, "testpkg": true, "demo": true, "invariant": true}
	// Files where "kind" is a field of a document, not the slot provider.
	kindIsAField := map[string]bool{"internal/gate/spec.go": true}
	var files []string
	for _, pattern := range []string{"../../internal/*/*.go", "../../cmd/*/*.go"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 20 {
		t.Fatalf("found only %d source files: is the test run from internal/slot?", len(files))
	}
	for _, f := range files {
		rel := strings.TrimPrefix(filepath.ToSlash(f), "../../")
		if strings.HasSuffix(f, "_test.go") || allowed[rel] || testSupport[strings.Split(rel, "/")[1]] {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Field:
				return false // struct tags name JSON keys
			case *ast.KeyValueExpr:
				// "kind": ... in a map literal is an object's kind.
				if lit, ok := n.Key.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					ast.Inspect(n.Value, func(v ast.Node) bool { checkLit(t, rel, v, "existing"); return true })
					return false
				}
			case *ast.BasicLit:
				if kindIsAField[rel] {
					checkLit(t, rel, n, "existing")
				} else {
					checkLit(t, rel, n, "existing", "kind")
				}
			}
			return true
		})
	}
}

func checkLit(t *testing.T, file string, n ast.Node, names ...string) {
	lit, ok := n.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return
	}
	v, err := strconv.Unquote(lit.Value)
	if err != nil {
		return
	}
	for _, name := range names {
		if v == name {
			t.Errorf("%s spells the provider name %q: use slot.Provider%s or ask the provider", file, v, strings.ToUpper(name[:1])+name[1:])
		}
	}
}
