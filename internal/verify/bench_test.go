package verify

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// benchPackage writes a package with size bytes of incompressible data,
// zstd-compressed as zarf writes it, and returns its path.
func benchPackage(b *testing.B, size int) string {
	b.Helper()
	if p := os.Getenv("BENCH_PACKAGE"); p != "" {
		return p
	}
	a := synthetic(b)
	data := make([]byte, size)
	if _, err := rand.Read(data); err != nil {
		b.Fatal(err)
	}
	a.Set("components/app.tar", data)
	if err := a.Rechecksum("components/app.tar"); err != nil {
		b.Fatal(err)
	}
	p := filepath.Join(b.TempDir(), "bench.tar.zst")
	if err := a.WriteFile(p); err != nil {
		b.Fatal(err)
	}
	return p
}

func hashFile(b *testing.B, p string) {
	f, err := os.Open(p)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyBuffer(h, f, make([]byte, 1<<20)); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkVerify measures one verification pass against the floor, one
// sha256 pass over the same file, in the same run, and reports the ratio
// (goal: at most 1.3).
func BenchmarkVerify(b *testing.B) {
	p := benchPackage(b, 256<<20)
	fi, err := os.Stat(p)
	if err != nil {
		b.Fatal(err)
	}
	v, err := New(Options{Signature: SignatureOptions{InsecureSkip: true}, SBOM: SBOMSkip})
	if err != nil {
		b.Fatal(err)
	}
	hashFile(b, p) // warm the page cache
	var floor, verify time.Duration
	b.SetBytes(fi.Size())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		hashFile(b, p)
		t1 := time.Now()
		r, err := v.Verify(context.Background(), p)
		if err != nil || !r.Verified {
			b.Fatalf("%v %+v", err, r)
		}
		floor += t1.Sub(t0)
		verify += time.Since(t1)
	}
	b.ReportMetric(float64(verify)/float64(floor), "x-sha256-pass")
	b.ReportMetric(float64(fi.Size())/verify.Seconds()*float64(b.N)/1e6, "verify-MB/s")
}
