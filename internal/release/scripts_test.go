package release

import (
	"archive/tar"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeScriptsArchive(t *testing.T, dir string, modes map[string]int64) string {
	t.Helper()
	p := filepath.Join(dir, ScriptsArchivePrefix+"1.2.3.tar.gz")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	for name, mode := range modes {
		body := "#!/usr/bin/env bash\n"
		if err := tw.WriteHeader(&tar.Header{Name: "kubectl-bundle-scripts/" + name, Mode: mode, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []interface{ Close() error }{tw, zw, f} {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// The release check knows the strategy scripts' archive: listed, holding
// every script executable, lib.sh, README.md and LICENSE.
func TestCheckScripts(t *testing.T) {
	good := map[string]int64{"blue-green.sh": 0o755, "in-place.sh": 0o755, "recreate.sh": 0o755, "lib.sh": 0o644, "README.md": 0o644, "LICENSE": 0o644}
	dir := t.TempDir()
	p := writeScriptsArchive(t, dir, good)
	listed := map[string]string{filepath.Base(p): "x", "kubectl-bundle-gate_1.2.3_linux_amd64.tar.gz": "y"}
	if name, err := checkScripts(dir, listed); err != nil || name != filepath.Base(p) {
		t.Fatalf("a good archive: %q, %v", name, err)
	}
	if _, err := checkScripts(dir, map[string]string{"kubectl-bundle-gate_1.2.3_linux_amd64.tar.gz": "y"}); err == nil ||
		!strings.Contains(err.Error(), "checksums.txt lists 0 strategy script archives") {
		t.Errorf("no scripts archive: %v", err)
	}
	for _, tc := range []struct {
		change func(map[string]int64)
		want   string
	}{
		{func(m map[string]int64) { delete(m, "lib.sh") }, "no kubectl-bundle-scripts/lib.sh"},
		{func(m map[string]int64) { delete(m, "LICENSE") }, "no kubectl-bundle-scripts/LICENSE"},
		{func(m map[string]int64) { m["recreate.sh"] = 0o644 }, "kubectl-bundle-scripts/recreate.sh is not executable"},
	} {
		m := map[string]int64{}
		for k, v := range good {
			m[k] = v
		}
		tc.change(m)
		d := t.TempDir()
		writeScriptsArchive(t, d, m)
		if _, err := checkScripts(d, listed); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want %q, got %v", tc.want, err)
		}
	}
}
