package verify

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"
	"sync/atomic"
)

const (
	chunkSize  = 1 << 20
	chunkDepth = 4 // chunks in flight per consumer: bounds memory at a few MiB
)

// chunk is one read of the input, shared by the consumers that need it and
// returned to the pool when the last one is done with it.
type chunk struct {
	buf  []byte
	n    int
	refs atomic.Int32
}

var chunkPool = sync.Pool{New: func() any { return &chunk{buf: make([]byte, chunkSize)} }}

func (c *chunk) release() {
	if c.refs.Add(-1) == 0 {
		chunkPool.Put(c)
	}
}

// Syncer is a staging writer that writes behind the verifier, so that the
// final fsync does not wait for the whole archive to reach the disk.
type Syncer interface {
	io.Writer
	// StartWriteback is called every writebackEvery bytes with the total written so far.
	StartWriteback(upTo int64)
}

// writebackEvery is how often a Syncer is asked to start writeback.
const writebackEvery = 32 << 20

// fanout reads the input on its own goroutine, hashes the raw archive bytes
// there, and hands the same buffers, without copying, to the decompressing
// reader (Read) and to the staging writer: the sha256 of the archive and the
// sha256 of its members run on two cores, and staging's disk writes overlap both.
type fanout struct {
	out      chan *chunk
	cur      *chunk
	off      int
	srcErr   error // set by the reader goroutine before out is closed
	h        hash.Hash
	copyTo   io.Writer
	copyCh   chan *chunk
	copyDone chan struct{}
	copyErr  error
	read     int64 // written by the reader goroutine, read after done
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

func newFanout(src io.Reader, copyTo io.Writer, total int64, progress func(read, total int64)) *fanout {
	f := &fanout{out: make(chan *chunk, chunkDepth), h: sha256.New(), copyTo: copyTo,
		stop: make(chan struct{}), done: make(chan struct{})}
	if copyTo != nil {
		f.copyCh = make(chan *chunk, chunkDepth)
		f.copyDone = make(chan struct{})
		go f.copyLoop()
	}
	go f.readLoop(src, total, progress)
	return f
}

func (f *fanout) readLoop(src io.Reader, total int64, progress func(read, total int64)) {
	defer close(f.done)
	defer close(f.out)
	if f.copyCh != nil {
		defer close(f.copyCh)
	}
	for {
		c := chunkPool.Get().(*chunk)
		n, err := io.ReadFull(src, c.buf)
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF
		}
		if n > 0 {
			c.n = n
			refs := int32(2)
			if f.copyCh != nil {
				refs++
			}
			c.refs.Store(refs)
			select {
			case f.out <- c:
			case <-f.stop:
				return
			}
			if f.copyCh != nil {
				f.copyCh <- c
			}
			f.h.Write(c.buf[:n])
			c.release()
			f.read += int64(n)
			if progress != nil {
				progress(f.read, total)
			}
		} else {
			chunkPool.Put(c)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				f.srcErr = err
			}
			return
		}
	}
}

func (f *fanout) copyLoop() {
	defer close(f.copyDone)
	syncer, _ := f.copyTo.(Syncer)
	var written, lastWriteback int64
	for c := range f.copyCh {
		if f.copyErr == nil {
			if _, err := f.copyTo.Write(c.buf[:c.n]); err != nil {
				f.copyErr = fmt.Errorf("writing staged copy: %w", err)
			}
			written += int64(c.n)
			if syncer != nil && written-lastWriteback >= writebackEvery {
				syncer.StartWriteback(written)
				lastWriteback = written
			}
		}
		c.release()
	}
}

// Read hands out the chunks in order.
func (f *fanout) Read(p []byte) (int, error) {
	for f.cur == nil || f.off == f.cur.n {
		if f.cur != nil {
			f.cur.release()
			f.cur = nil
		}
		c, ok := <-f.out
		if !ok {
			<-f.done
			if f.srcErr != nil {
				return 0, f.srcErr
			}
			return 0, io.EOF
		}
		f.cur, f.off = c, 0
	}
	n := copy(p, f.cur.buf[f.off:f.cur.n])
	f.off += n
	return n, nil
}

// finish drains what the consumer did not read, waits for the hasher and
// the copy, and returns the archive's sha256, its size, and any error
// reading the input or writing the copy.
func (f *fanout) finish() (sum string, read int64, srcErr, copyErr error) {
	if f.cur != nil {
		f.cur.release()
		f.cur = nil
	}
	for c := range f.out {
		c.release()
	}
	<-f.done
	if f.copyDone != nil {
		<-f.copyDone
	}
	return hex.EncodeToString(f.h.Sum(nil)), f.read, f.srcErr, f.copyErr
}

// abort stops the reader early (cancellation) and releases everything.
func (f *fanout) abort() {
	f.stopOnce.Do(func() { close(f.stop) })
	f.finish()
}
