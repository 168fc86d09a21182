package zst

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func compress(t testing.TB, s string, opts ...zstd.EOption) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := zstd.NewWriter(&b, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(w, s); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func readAll(r io.Reader, maxWindow uint64) (string, error) {
	d, err := NewReader(r, maxWindow)
	if err != nil {
		return "", err
	}
	defer d.Close()
	b, err := io.ReadAll(d)
	return string(b), err
}

// A decoder given back after a stream, a truncated stream, or one it
// refused decodes the next stream whole: nothing of an earlier stream
// leaks into a later one.
func TestReusedDecoderReadsEachStreamWhole(t *testing.T) {
	one := strings.Repeat("first stream ", 50000)
	two := strings.Repeat("second ", 70000)
	a, b := compress(t, one), compress(t, two)
	if got, err := readAll(bytes.NewReader(a), 16<<20); err != nil || got != one {
		t.Fatalf("first stream: %d bytes, %v", len(got), err)
	}
	if _, err := readAll(bytes.NewReader(a[:len(a)/2]), 16<<20); err == nil {
		t.Fatal("a truncated stream read without error")
	}
	if got, err := readAll(bytes.NewReader(b), 16<<20); err != nil || got != two {
		t.Fatalf("second stream after a truncated one: %d bytes, %v", len(got), err)
	}
	if got, err := readAll(bytes.NewReader(a), 16<<20); err != nil || got != one {
		t.Fatalf("first stream again: %d bytes, %v", len(got), err)
	}
}

// The window bound is each pool's own: a frame that declares a window over
// it is refused, and the same frame reads under a pool with a larger one.
func TestWindowBoundPerPool(t *testing.T) {
	big := strings.Repeat("x", 1<<10) + strings.Repeat("yz", 1<<20)
	c := compress(t, big, zstd.WithWindowSize(4<<20), zstd.WithSingleSegment(false))
	if _, err := readAll(bytes.NewReader(c), 1<<20); !errors.Is(err, zstd.ErrWindowSizeExceeded) {
		t.Fatalf("a 4 MB window under a 1 MB bound: %v, want %v", err, zstd.ErrWindowSizeExceeded)
	}
	if got, err := readAll(bytes.NewReader(c), 8<<20); err != nil || got != big {
		t.Fatalf("a 4 MB window under an 8 MB bound: %d bytes, %v", len(got), err)
	}
	if _, err := readAll(bytes.NewReader(c), 1<<20); !errors.Is(err, zstd.ErrWindowSizeExceeded) {
		t.Fatalf("the 1 MB pool after the 8 MB one read: %v, want %v", err, zstd.ErrWindowSizeExceeded)
	}
}

// Close twice gives the decoder back once.
func TestCloseTwice(t *testing.T) {
	d, err := NewReader(bytes.NewReader(compress(t, "x")), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	d.Close()
	e, _ := NewReader(bytes.NewReader(compress(t, "y")), 1<<20)
	f, _ := NewReader(bytes.NewReader(compress(t, "z")), 1<<20)
	if e.Decoder == f.Decoder {
		t.Fatal("one decoder handed out twice after a double Close")
	}
}

// BenchmarkReuse: reading a small archive-sized stream with a fresh
// decoder each time against one from the pool, in the same run.
func BenchmarkReuse(b *testing.B) {
	c := compress(b, strings.Repeat("member header and content ", 4000), zstd.WithWindowSize(8<<20), zstd.WithSingleSegment(false))
	b.Run("fresh", func(b *testing.B) {
		for b.Loop() {
			d, _ := zstd.NewReader(bytes.NewReader(c), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(128<<20))
			_, _ = io.Copy(io.Discard, d)
			d.Close()
		}
	})
	b.Run("pooled", func(b *testing.B) {
		for b.Loop() {
			_, _ = readAll(bytes.NewReader(c), 128<<20)
		}
	})
}
