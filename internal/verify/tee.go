package verify

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"sync"
)

const teeChunk = 1 << 20

var chunkPool = sync.Pool{New: func() any { b := make([]byte, teeChunk); return &b }}

// asyncTee hashes the archive's raw bytes (and copies them to a staging
// writer) on a second goroutine while the caller decompresses and hashes the
// members on its own: the two sha256 passes run on two cores, so verifying
// costs about one hash pass of wall time, not two.
type asyncTee struct {
	src      io.Reader
	ch       chan *[]byte
	done     chan struct{}
	h        hash.Hash
	copy     io.Writer
	copyErr  error
	read     int64
	total    int64
	progress func(read, total int64)
}

func newAsyncTee(src io.Reader, copyTo io.Writer, total int64, progress func(read, total int64)) *asyncTee {
	t := &asyncTee{src: src, ch: make(chan *[]byte, 8), done: make(chan struct{}), h: sha256.New(),
		copy: copyTo, total: total, progress: progress}
	go t.run()
	return t
}

func (t *asyncTee) run() {
	defer close(t.done)
	for bp := range t.ch {
		b := *bp
		t.h.Write(b)
		if t.copy != nil && t.copyErr == nil {
			if _, err := t.copy.Write(b); err != nil {
				t.copyErr = fmt.Errorf("writing staged copy: %w", err)
			}
		}
		*bp = b[:cap(b)]
		chunkPool.Put(bp)
	}
}

func (t *asyncTee) Read(p []byte) (int, error) {
	if len(p) > teeChunk {
		p = p[:teeChunk]
	}
	n, err := t.src.Read(p)
	if n > 0 {
		bp := chunkPool.Get().(*[]byte)
		b := (*bp)[:n]
		copy(b, p[:n])
		*bp = b
		t.ch <- bp
		t.read += int64(n)
		if t.progress != nil {
			t.progress(t.read, t.total)
		}
	}
	return n, err
}

// finish waits for the hasher and returns the archive's sha256 and any
// error writing the staged copy.
func (t *asyncTee) finish() (string, int64, error) {
	close(t.ch)
	<-t.done
	return hex.EncodeToString(t.h.Sum(nil)), t.read, t.copyErr
}
