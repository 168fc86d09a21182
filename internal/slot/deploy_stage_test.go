package slot_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
)

const stagedName = "zarf-package-demo-amd64-1.0.0.tar.zst"

// TestDeployStagedCopies: deploy resolves the package through the one
// resolver and refuses, before zarf runs, a staged copy that is not what
// was verified or that nobody signed (issue 14, defects 5 and 9).
func TestDeployStagedCopies(t *testing.T) {
	m, fm := newManager(t)
	ctx := context.Background()
	if _, err := m.Create(ctx, "a", slot.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deploys := func() int {
		st, err := fm.State()
		if err != nil {
			t.Fatal(err)
		}
		return len(st.Deploys)
	}

	t.Run("a changed staged copy is refused with the command to stage it again", func(t *testing.T) {
		digest := stagePackage(t, m.Dir, "changed", true)
		if err := os.WriteFile(filepath.Join(m.Dir.Join("packages", digest), stagedName), []byte("chAnged"), 0o600); err != nil {
			t.Fatal(err)
		}
		before := deploys()
		_, err := m.Deploy(ctx, "a", digest, slot.DeployOptions{})
		if errkind.Of(err) != errkind.Negative || !strings.Contains(err.Error(), "changed since it was verified") || !strings.Contains(err.Error(), "stage it again: kubectl bundle-verify --stage") {
			t.Errorf("deploy of a changed copy: %v (kind %v)", err, errkind.Of(err))
		}
		if deploys() != before {
			t.Error("zarf ran on a changed copy")
		}
	})

	t.Run("a deleted staged copy is incomplete, not a loop", func(t *testing.T) {
		digest := stagePackage(t, m.Dir, "deleted", true)
		if err := os.Remove(filepath.Join(m.Dir.Join("packages", digest), stagedName)); err != nil {
			t.Fatal(err)
		}
		_, err := m.Deploy(ctx, "a", digest, slot.DeployOptions{})
		if errkind.Of(err) != errkind.Environment || !strings.Contains(err.Error(), "is incomplete (the archive is missing") || !strings.Contains(err.Error(), "stage it again: kubectl bundle-verify --stage") {
			t.Errorf("deploy of a deleted copy: %v", err)
		}
	})

	t.Run("an unsigned package needs --insecure", func(t *testing.T) {
		digest := stagePackage(t, m.Dir, "unsigned", true)
		rec := `{"report":{"verified":true,"signatureSkipped":true,"package":{"name":"demo","version":"1.0.0"},"signer":{"method":"none"}},"unsigned":true}`
		if err := os.WriteFile(filepath.Join(m.Dir.Join("packages", digest), "verification.json"), []byte(rec), 0o600); err != nil {
			t.Fatal(err)
		}
		before := deploys()
		_, err := m.Deploy(ctx, "a", digest, slot.DeployOptions{})
		if errkind.Of(err) != errkind.Negative || !strings.Contains(err.Error(), "--insecure-skip-signature") ||
			!strings.Contains(err.Error(), "kubectl bundle-slot deploy a "+digest+" --insecure") {
			t.Errorf("deploy of an unsigned package without --insecure: %v", err)
		}
		if deploys() != before {
			t.Error("zarf ran on an unsigned package without --insecure")
		}
		if r, err := m.Deploy(ctx, "a", digest, slot.DeployOptions{Insecure: true}); err != nil || r.Package.Digest != digest {
			t.Errorf("deploy of an unsigned package with --insecure: %v", err)
		}
	})

	t.Run("a split package deploys by its .part000", func(t *testing.T) {
		digest := stagePackage(t, m.Dir, "split", true)
		part0 := filepath.Join(t.TempDir(), stagedName+".part000")
		if err := os.WriteFile(part0, []byte(`{"Sha256Sum":"`+digest+`","Bytes":5,"Count":1}`), 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := m.Deploy(ctx, "a", part0, slot.DeployOptions{})
		if err != nil || r.Package.Digest != digest {
			t.Fatalf("deploy by .part000: %v", err)
		}
		st, _ := fm.State()
		if last := st.Deploys[len(st.Deploys)-1]; last.Package != stagedName {
			t.Errorf("zarf deployed %+v, want the staged archive %s, not the .part000", last, stagedName)
		}
	})

	t.Run("an unstaged file is unverified", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "loose.tar.zst")
		if err := os.WriteFile(f, []byte("loose"), 0o600); err != nil {
			t.Fatal(err)
		}
		var nv *slot.NotVerifiedError
		if _, err := m.Deploy(ctx, "a", f, slot.DeployOptions{}); !errors.As(err, &nv) {
			t.Errorf("deploy of an unstaged file: %v", err)
		}
	})
}
