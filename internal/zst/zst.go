// Package zst hands out zstd decoders for package archives and takes them
// back: a decoder keeps its window's buffer (up to the frame's window, a
// few MB for a package) between uses, so that a process that reads
// several archives, or one archive several times (verify, the SBOMs, the
// blue-green package's parts), zeroes it once, not at each reading.
package zst

import (
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Magic is the first four bytes of a zstd frame.
const Magic = "\x28\xb5\x2f\xfd"

// pools holds one pool of decoders per largest window accepted.
var pools sync.Map // uint64 -> *sync.Pool

// Reader decodes one zstd stream; Close gives its decoder back.
type Reader struct {
	*zstd.Decoder
	pool *sync.Pool
}

// NewReader decodes r, refusing a frame whose window is over maxWindow
// bytes (0: the library's default, 512 MB). Decoding runs in the calling
// goroutine.
func NewReader(r io.Reader, maxWindow uint64) (*Reader, error) {
	p, _ := pools.LoadOrStore(maxWindow, &sync.Pool{})
	pool := p.(*sync.Pool)
	if d, ok := pool.Get().(*zstd.Decoder); ok {
		if err := d.Reset(r); err == nil {
			return &Reader{d, pool}, nil
		}
		d.Close()
	}
	opts := []zstd.DOption{zstd.WithDecoderConcurrency(1)}
	if maxWindow > 0 {
		opts = append(opts, zstd.WithDecoderMaxWindow(maxWindow))
	}
	d, err := zstd.NewReader(r, opts...)
	if err != nil {
		return nil, err
	}
	return &Reader{d, pool}, nil
}

// Close gives the decoder back for the next reading; r is not read again.
// A second Close does nothing.
func (r *Reader) Close() {
	if r.Decoder == nil {
		return
	}
	d := r.Decoder
	r.Decoder = nil
	if d.Reset(nil) == nil {
		r.pool.Put(d)
		return
	}
	d.Close()
}
