package stage_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/stage"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

func openState(t *testing.T) *state.Dir {
	t.Helper()
	d, err := state.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// stageBytes runs one whole staging of data under name.
func stageBytes(t *testing.T, d *state.Dir, name, data string) (*stage.Result, string) {
	t.Helper()
	s, err := stage.Begin(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Writer().Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(data))
	digest := hex.EncodeToString(sum[:])
	res, err := s.Commit(digest, name, stage.Record{Report: stage.Report{Verified: true}, ToolVersion: "test", Key: "/keys/cosign.pub"})
	if err != nil {
		t.Fatal(err)
	}
	return res, digest
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestCommit: the archive, its sha256sum sidecar and verification.json,
// under packages/<sha256>/, private to the owner, and nothing else.
func TestCommit(t *testing.T) {
	d := openState(t)
	name := "zarf-package-demo-amd64-1.0.0.tar.zst"
	res, digest := stageBytes(t, d, name, "package bytes")
	if res.AlreadyStaged || res.Dir != d.Join(stage.PackagesDir, digest) || res.Path != filepath.Join(res.Dir, name) {
		t.Errorf("result: %+v", res)
	}
	if got := strings.Join(entries(t, d.Join(stage.PackagesDir)), " "); got != digest {
		t.Errorf("packages/ holds %s, want only %s", got, digest)
	}
	if got := strings.Join(entries(t, res.Dir), " "); got != "verification.json "+name+" "+name+".sha256" {
		t.Errorf("package dir holds %s", got)
	}
	if b, _ := os.ReadFile(res.Path); string(b) != "package bytes" {
		t.Errorf("archive: %q", b)
	}
	if b, _ := os.ReadFile(res.Path + ".sha256"); string(b) != digest+"  "+name+"\n" {
		t.Errorf("sidecar: %q", b)
	}
	var rec struct {
		Report      map[string]any `json:"report"`
		ToolVersion string         `json:"toolVersion"`
		StagedAt    string         `json:"stagedAt"`
		Key         string         `json:"key"`
	}
	b, err := os.ReadFile(filepath.Join(res.Dir, "verification.json"))
	if err != nil || json.Unmarshal(b, &rec) != nil {
		t.Fatalf("verification.json: %s (%v)", b, err)
	}
	if rec.Report["verified"] != true || rec.ToolVersion != "test" || rec.StagedAt == "" || rec.Key != "/keys/cosign.pub" {
		t.Errorf("verification.json: %+v", rec)
	}
	fi, err := os.Stat(res.Dir)
	if err != nil || fi.Mode().Perm() != state.DirMode {
		t.Errorf("package dir mode: %v (%v)", fi.Mode(), err)
	}
}

// TestCommitTwiceKeepsTheFirst: the same digest staged again is reported
// as already staged, the first copy kept and the second thrown away.
func TestCommitTwiceKeepsTheFirst(t *testing.T) {
	d := openState(t)
	first, _ := stageBytes(t, d, "a.tar.zst", "same")
	second, digest := stageBytes(t, d, "b.tar.zst", "same")
	if !second.AlreadyStaged || second.Dir != first.Dir {
		t.Errorf("second commit: %+v", second)
	}
	if got := strings.Join(entries(t, d.Join(stage.PackagesDir)), " "); got != digest {
		t.Errorf("packages/ holds %s: the second staging dir was not removed", got)
	}
	if got := strings.Join(entries(t, first.Dir), " "); got != "a.tar.zst a.tar.zst.sha256 verification.json" {
		t.Errorf("the first copy was replaced: %s", got)
	}
}

// TestAbortAndLeftovers: an aborted staging leaves nothing, and a staging
// dir left by a killed run is removed by the next Begin.
func TestAbortAndLeftovers(t *testing.T) {
	d := openState(t)
	s, err := stage.Begin(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Writer().Write([]byte("half")); err != nil {
		t.Fatal(err)
	}
	s.Abort()
	s.Abort() // twice is harmless
	if got := entries(t, d.Join(stage.PackagesDir)); len(got) != 0 {
		t.Errorf("after abort: %v", got)
	}
	// A killed run's staging dir.
	dead := d.Join(stage.PackagesDir, ".staging-12345")
	if err := os.MkdirAll(dead, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dead, "archive.partial"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, digest := stageBytes(t, d, "p.tar.zst", "whole")
	if got := strings.Join(entries(t, d.Join(stage.PackagesDir)), " "); got != digest {
		t.Errorf("packages/ holds %s, want the leftover removed", got)
	}
}

// TestRefusesBadNames: a name that would escape or hide in packages/ is
// refused at commit, and nothing is staged.
func TestRefusesBadNames(t *testing.T) {
	for _, name := range []string{"", ".", "..", "../escape.tar.zst", "a/b.tar.zst", ".hidden.tar.zst", "new\nline"} {
		if err := stage.ValidName(name); err == nil {
			t.Errorf("ValidName(%q) accepted it", name)
		}
	}
	d := openState(t)
	s, err := stage.Begin(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(strings.Repeat("ab", 32), "../escape.tar.zst", stage.Record{}); err == nil || !strings.Contains(err.Error(), "cannot be staged") {
		t.Errorf("commit with a bad name: %v", err)
	}
	if got := entries(t, d.Join(stage.PackagesDir)); len(got) != 0 {
		t.Errorf("a refused commit left %v", got)
	}
	if err := stage.ValidName("zarf-package-demo-amd64-1.0.0.tar.zst.part000"); err != nil {
		t.Errorf("a split part's name: %v", err)
	}
}
