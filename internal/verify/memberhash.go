package verify

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"sync"
)

// memberHasher hashes member bodies on a goroutine of its own, so that
// decompression (on the caller's goroutine), member hashing and the raw
// archive hash (on the fanout's) share the cores instead of queueing on one.
type memberHasher struct {
	jobs chan hashJob
	done chan struct{}
	h    hash.Hash
	once sync.Once
}

type hashJob struct {
	c   *chunk  // data to hash, or nil
	end *member // when set, the member is complete: store its digest here
}

func newMemberHasher() *memberHasher {
	mh := &memberHasher{jobs: make(chan hashJob, chunkDepth), done: make(chan struct{}), h: sha256.New()}
	go mh.run()
	return mh
}

func (mh *memberHasher) run() {
	defer close(mh.done)
	for j := range mh.jobs {
		if j.c != nil {
			mh.h.Write(j.c.buf[:j.c.n])
			j.c.release()
		}
		if j.end != nil {
			j.end.sha256 = hex.EncodeToString(mh.h.Sum(nil))
			mh.h.Reset()
		}
	}
}

// Write copies p and queues it for hashing into the current member.
func (mh *memberHasher) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		c := chunkPool.Get().(*chunk)
		c.n = copy(c.buf, p)
		c.refs.Store(1)
		p = p[c.n:]
		mh.jobs <- hashJob{c: c}
	}
	return n, nil
}

// End completes the current member: its digest lands in m.sha256 once Close returns.
func (mh *memberHasher) End(m *member) { mh.jobs <- hashJob{end: m} }

// Close waits for every queued digest.
func (mh *memberHasher) Close() {
	mh.once.Do(func() { close(mh.jobs) })
	<-mh.done
}
