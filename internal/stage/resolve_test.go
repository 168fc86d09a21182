package stage_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/stage"
)

// TestRestageRenamedReportsTheCopyKept: staging an already staged digest
// under another file name reports the staged copy that exists, not a path
// under the new name (issue 14, defect 5).
func TestRestageRenamedReportsTheCopyKept(t *testing.T) {
	d := openState(t)
	first, _ := stageBytes(t, d, "pkg.tar.zst", "same bytes")
	second, _ := stageBytes(t, d, "renamed.tar.zst", "same bytes")
	if !second.AlreadyStaged || second.Path != first.Path {
		t.Errorf("second staging reports %+v, want the kept copy %s", second, first.Path)
	}
	if _, err := os.Stat(second.Path); err != nil {
		t.Errorf("the reported path does not exist: %v", err)
	}
}

// TestDeletedCopyIsRestaged: a staged package whose archive was deleted is
// incomplete, the error names the command that stages it again, and that
// command (a new Commit) replaces it instead of calling it already staged.
func TestDeletedCopyIsRestaged(t *testing.T) {
	d := openState(t)
	res, digest := stageBytes(t, d, "pkg.tar.zst", "package bytes")
	if err := os.Remove(res.Path); err != nil {
		t.Fatal(err)
	}
	_, err := stage.Resolve(d, digest)
	var ie *stage.IncompleteError
	if !errors.As(err, &ie) || errkind.Of(err) != errkind.Environment || !strings.Contains(err.Error(), "stage it again: kubectl bundle-verify --stage") ||
		!strings.Contains(err.Error(), "--key /keys/cosign.pub") {
		t.Fatalf("resolve of a deleted copy: %v", err)
	}
	again, _ := stageBytes(t, d, "pkg.tar.zst", "package bytes")
	if again.AlreadyStaged || !strings.HasPrefix(again.Replaced, "incomplete: ") {
		t.Fatalf("staging again: %+v, want the incomplete copy replaced", again)
	}
	p, err := stage.Resolve(d, digest)
	if err != nil || p.Path != res.Path {
		t.Fatalf("resolve after staging again: %+v, %v", p, err)
	}
	if got := strings.Join(entries(t, d.Join(stage.PackagesDir)), " "); got != digest {
		t.Errorf("packages/ holds %s: the replaced copy was not removed", got)
	}
}

// TestChangedCopyIsRefusedAndRestaged: Check refuses a staged copy whose
// bytes changed (a negative verdict naming the command to stage it
// again), and staging again replaces it.
func TestChangedCopyIsRefusedAndRestaged(t *testing.T) {
	d := openState(t)
	res, digest := stageBytes(t, d, "pkg.tar.zst", "package bytes")
	p, err := stage.Resolve(d, digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Check(); err != nil {
		t.Fatalf("check of an intact copy: %v", err)
	}
	if err := os.WriteFile(res.Path, []byte("package bytEs"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = p.Check()
	var ce *stage.ChangedError
	if !errors.As(err, &ce) || errkind.Of(err) != errkind.Negative || !strings.Contains(err.Error(), "kubectl bundle-verify --stage") {
		t.Fatalf("check of a changed copy: %v", err)
	}
	again, _ := stageBytes(t, d, "pkg.tar.zst", "package bytes")
	if !strings.HasPrefix(again.Replaced, "changed: ") {
		t.Fatalf("staging again: %+v, want the changed copy replaced", again)
	}
	if b, _ := os.ReadFile(res.Path); string(b) != "package bytes" {
		t.Errorf("staged copy after staging again: %q", b)
	}
}

// TestResolveForms: a digest (bare or sha256:-prefixed), the path staged,
// another path with the same bytes, and a split package's .part000 all
// resolve to the one staged package; an unstaged file is NotStaged with
// its digest and size.
func TestResolveForms(t *testing.T) {
	d := openState(t)
	data := "split package bytes"
	res, digest := stageBytes(t, d, "big.tar.zst", data)
	dir := t.TempDir()
	copyPath := filepath.Join(dir, "renamed.tar.zst")
	part0 := filepath.Join(dir, "big.tar.zst.part000")
	other := filepath.Join(dir, "other.tar.zst")
	for f, c := range map[string]string{
		copyPath: data,
		part0:    `{"Sha256Sum":"` + digest + `","Bytes":19,"Count":1}`,
		other:    "other bytes",
	} {
		if err := os.WriteFile(f, []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, arg := range []string{digest, "sha256:" + digest, copyPath, part0} {
		p, err := stage.Resolve(d, arg)
		if err != nil || p.Digest != digest || p.Path != res.Path || p.Record.Key != "/keys/cosign.pub" || !p.Record.Report.Verified {
			t.Errorf("Resolve(%s) = %+v, %v", arg, p, err)
		}
	}
	_, err := stage.Resolve(d, other)
	var ns *stage.NotStagedError
	if !errors.As(err, &ns) || ns.Ref.File != other || ns.Ref.Bytes != int64(len("other bytes")) || errkind.Of(err) != errkind.Usage {
		t.Errorf("Resolve of an unstaged file: %v", err)
	}
	if _, err := stage.Resolve(d, filepath.Join(dir, "missing.tar.zst")); errkind.Of(err) != errkind.Usage {
		t.Errorf("Resolve of a missing file: %v (kind %v)", err, errkind.Of(err))
	}
}

// TestUnsignedRecord: a package staged without a signature check is
// recorded unsigned; staging it again with a signature checked upgrades
// the record, while the copy is kept.
func TestUnsignedRecord(t *testing.T) {
	d := openState(t)
	commit := func(rec stage.Record) *stage.Result {
		s, err := stage.Begin(d)
		if err != nil {
			t.Fatal(err)
		}
		s.Writer().Write([]byte("bytes"))
		res, err := s.Commit("277089d91c0bdf4f2e6862ba7e4a07605119431f5d13f726dd352b06f1b206a9", "p.tar.zst", rec)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	unsigned := stage.Record{Unsigned: true}
	unsigned.Report.Verified = true
	unsigned.Report.SignatureSkipped = true
	commit(unsigned)
	p, err := stage.Resolve(d, "277089d91c0bdf4f2e6862ba7e4a07605119431f5d13f726dd352b06f1b206a9")
	if err != nil || !p.Record.IsUnsigned() || !p.Record.Unsigned {
		t.Fatalf("unsigned record: %+v, %v", p, err)
	}
	if !strings.Contains(p.Restage(), "--insecure-skip-signature") {
		t.Errorf("restage of an unsigned package: %s", p.Restage())
	}
	b, _ := os.ReadFile(filepath.Join(p.Dir, stage.RecordFile))
	if !strings.Contains(string(b), `"unsigned": true`) {
		t.Errorf("verification.json does not say unsigned:\n%s", b)
	}
	signed := stage.Record{Key: "/keys/cosign.pub"}
	signed.Report.Verified = true
	signed.Report.Signer.Method = "key"
	if res := commit(signed); !res.AlreadyStaged {
		t.Errorf("signed staging: %+v", res)
	}
	if p, err = stage.Resolve(d, p.Digest); err != nil || p.Record.IsUnsigned() || p.Record.Key != "/keys/cosign.pub" {
		t.Errorf("record after a signed staging: %+v, %v", p, err)
	}
	// A later unsigned staging does not downgrade it.
	commit(unsigned)
	if p, err = stage.Resolve(d, p.Digest); err != nil || p.Record.IsUnsigned() {
		t.Errorf("record after another unsigned staging: %+v, %v", p.Record, err)
	}
}

// TestReportKeptWhole: the record's report is typed for its readers and
// written back whole, fields the type does not name included.
func TestReportKeptWhole(t *testing.T) {
	r, err := stage.ReportOf(map[string]any{"verified": true, "sha256": "x", "checks": []string{"a"}, "package": map[string]any{"name": "demo"}})
	if err != nil || !r.Verified || r.Package.Name != "demo" {
		t.Fatalf("ReportOf: %+v, %v", r, err)
	}
	b, err := r.MarshalJSON()
	if err != nil || !strings.Contains(string(b), `"checks":["a"]`) {
		t.Errorf("written report: %s, %v", b, err)
	}
}

// TestRestageKeylessEmbeddedRoot: a package verified keyless against the
// embedded trusted root (no --trusted-root recorded) is staged again with
// its identity and issuer, and no --key placeholder.
func TestRestageKeylessEmbeddedRoot(t *testing.T) {
	d := openState(t)
	s, err := stage.Begin(d)
	if err != nil {
		t.Fatal(err)
	}
	s.Writer().Write([]byte("bytes"))
	rec := stage.Record{Source: "/site/pkg.tar.zst"}
	rec.Report.Verified = true
	rec.Report.Signer.Method = "keyless"
	rec.Report.Signer.Identity = "https://github.com/org/repo/.github/workflows/air-gapped.yml@refs/heads/main"
	rec.Report.Signer.Issuer = "https://token.actions.githubusercontent.com"
	const sum = "277089d91c0bdf4f2e6862ba7e4a07605119431f5d13f726dd352b06f1b206a9"
	if _, err := s.Commit(sum, "p.tar.zst", rec); err != nil {
		t.Fatal(err)
	}
	p, err := stage.Resolve(d, sum)
	if err != nil {
		t.Fatal(err)
	}
	want := "kubectl bundle-verify --stage /site/pkg.tar.zst --certificate-identity https://github.com/org/repo/.github/workflows/air-gapped.yml@refs/heads/main --certificate-oidc-issuer https://token.actions.githubusercontent.com"
	if got := p.Restage(); got != want {
		t.Errorf("restage:\n%s\nwant:\n%s", got, want)
	}
}
