package evidence

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/sigblob"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

func stateDir(t *testing.T) *state.Dir {
	t.Helper()
	d, err := state.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Damage where the evidence belongs is refused, never followed.
func TestEnsureRefusesDamage(t *testing.T) {
	d := stateDir(t)
	if err := os.WriteFile(d.Join(Dir), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(d, "20260101-000000-abcdef", SummaryFile, []byte("RESULT: PASS\n")); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a file as transactions/: %v", err)
	}
	os.Remove(d.Join(Dir))
	if err := os.Symlink(t.TempDir(), d.Join(Dir)); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(d, "20260101-000000-abcdef", SummaryFile, nil); err == nil {
		t.Error("followed a symlinked transactions/")
	}
	if _, err := Ensure(d, "../escape"); err == nil {
		t.Error("accepted ../escape as an id")
	}
}

// The export holds every file with its sha256 in SHA256SUMS, and the
// signature verifies over SHA256SUMS with the signer's key only.
func TestExportSigned(t *testing.T) {
	d := stateDir(t)
	id := "20260101-000000-abcdef"
	for name, body := range map[string]string{SummaryFile: "PASS: x\nRESULT: PASS\n", "gate/t-b.json": "{}\n", "debug/t-gate-b/kube/pods.txt": "pods\n"} {
		if err := WriteFile(d, id, name, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	priv, pub, err := sigblob.GenerateKey([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := sigblob.LoadPrivateKey(priv, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	res, err := Export(d, id, ExportOptions{Dir: out, Signer: key})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"debug/t-gate-b/kube/pods.txt", "gate/t-b.json", SummaryFile}
	if !reflect.DeepEqual(res.Files, want) || !res.Signed {
		t.Errorf("exported %v signed %v", res.Files, res.Signed)
	}
	sums, err := os.ReadFile(filepath.Join(out, SumsFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		b, err := os.ReadFile(filepath.Join(out, name))
		got := sha256.Sum256(b)
		if !ok || err != nil || hex.EncodeToString(got[:]) != sum {
			t.Errorf("SHA256SUMS line %q does not check: %v", line, err)
		}
	}
	bundle, err := os.ReadFile(filepath.Join(out, SignatureFile))
	if err != nil {
		t.Fatal(err)
	}
	pk, _ := sigblob.ParsePublicKey(pub)
	if _, err := sigblob.VerifyBlob(sums, bundle, pk); err != nil {
		t.Errorf("the signature does not verify: %v", err)
	}
	if _, err := sigblob.VerifyBlob(append(sums, 'x'), bundle, pk); err == nil {
		t.Error("the signature verifies a changed SHA256SUMS")
	}
	if _, err := Export(d, id, ExportOptions{Dir: out}); err == nil {
		t.Error("exported into a directory that is not empty")
	}
	if _, err := Export(d, "20990101-000000-abcdef", ExportOptions{Dir: t.TempDir()}); err == nil {
		t.Error("exported a transaction with no evidence")
	}
}

// Retention keeps the newest N and the protected ones.
func TestPrune(t *testing.T) {
	d := stateDir(t)
	ids := []string{"20260101-000000-aaaaaa", "20260102-000000-bbbbbb", "20260103-000000-cccccc", "20260104-000000-dddddd"}
	for _, id := range ids {
		if err := WriteFile(d, id, SummaryFile, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := KeepDeployed(d, ids[0], "a", "sha-a"); err != nil {
		t.Fatal(err)
	}
	if err := KeepDeployed(d, ids[1], "a", "sha-old"); err != nil {
		t.Fatal(err)
	}
	made := MadeBy(d, Serving{"a": "sha-a"})
	if !reflect.DeepEqual(made, map[string]bool{ids[0]: true}) {
		t.Errorf("MadeBy %v", made)
	}
	removed, err := Prune(d, 2, made)
	if err != nil || !reflect.DeepEqual(removed, []string{ids[1]}) {
		t.Errorf("removed %v, %v", removed, err)
	}
	left, _ := List(d)
	if !reflect.DeepEqual(left, []string{ids[0], ids[2], ids[3]}) {
		t.Errorf("left %v", left)
	}
	if removed, _ := Prune(d, 0, nil); removed != nil {
		t.Errorf("keep 0 removed %v", removed)
	}
}
