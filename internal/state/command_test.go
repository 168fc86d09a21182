package state

import (
	"os"
	"path/filepath"
	"testing"
)

// A command printed for a state dir named by a relative variable (or
// flag) names that dir, absolute: pasted elsewhere it opens the same one.
func TestCommandPrefix(t *testing.T) {
	work := t.TempDir()
	t.Chdir(work)
	t.Setenv("XDG_STATE_HOME", filepath.Join(work, "xdg"))
	abs := filepath.Join(work, "site", "state")
	if err := os.MkdirAll(abs, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ env, flag, want string }{
		{"site/state", "", "KUBECTL_BUNDLE_STATE_DIR=" + abs + " "},
		{"./site/../site/state", "", "KUBECTL_BUNDLE_STATE_DIR=" + abs + " "},
		{abs, "", ""},
		{abs + "/", "", ""},
		{"", "site/state", "KUBECTL_BUNDLE_STATE_DIR=" + abs + " "},
		{abs, "site/state", ""},
		{"", "", ""},
	} {
		t.Setenv(EnvStateDir, c.env)
		d, err := Open(c.flag)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.CommandPrefix(); got != c.want {
			t.Errorf("env %q, flag %q: %q, want %q", c.env, c.flag, got, c.want)
		}
	}
	t.Setenv(EnvStateDir, "it's here")
	d, err := Open("")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := d.CommandPrefix(), "KUBECTL_BUNDLE_STATE_DIR='"+work+"/it'\\''s here' "; got != want {
		t.Errorf("quoted: %q, want %q", got, want)
	}
}
