package checkout

import (
	"os"
	"path/filepath"
	"testing"
)

func TestAround(t *testing.T) {
	root := t.TempDir()
	mod := func(dir, path string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("// a comment\nmodule "+path+"\n\ngo 1.26\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	repo := filepath.Join(root, "repo")
	mod(repo, Module)
	// A module of its own inside the checkout (hack/tools) is passed over.
	mod(filepath.Join(repo, "hack", "tools"), "example.com/tools")
	deep := filepath.Join(repo, "hack", "tools", "node")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	mod(filepath.Join(root, "other"), `"example.com/other"`)
	for _, c := range []struct{ dir, want string }{
		{repo, repo},
		{deep, repo},
		{filepath.Join(root, "other"), ""},
		{root, ""},
	} {
		if got := Around(c.dir); got != c.want {
			t.Errorf("Around(%s) = %q, want %q", c.dir, got, c.want)
		}
	}
}
