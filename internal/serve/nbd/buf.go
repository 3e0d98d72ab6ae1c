package nbd

import (
	"sync"
	"sync/atomic"

	"mdtool/engine"
)

// buffer is a request's payload: a buffer of the engine's aligned pool.
type buffer = engine.Buf

func getBuffer(n int) *buffer { return engine.GetBuf(n) }

func putBuffer(b *buffer) { engine.PutBuf(b) }

// bufCap is the memory getBuffer(n) takes: its size class.
func bufCap(n int) int64 { return engine.BufCap(n) }

// budget bounds bytes in flight: those of one connection, or those of all
// the connections that share Limits. Taking and returning bytes is one
// atomic operation while nobody waits; the mutex is only taken by requests
// that have to wait and by the releases that wake them (in FIFO order, so
// that a large request is not starved by small ones).
type budget struct {
	max     int64
	used    atomic.Int64
	waiting atomic.Int64 // goroutines in the slow path
	mu      sync.Mutex
	q       []*waiter
}

// waiter is a request waiting for budget; each request has its own, so
// waiting allocates nothing after a request slot's first wait.
type waiter struct {
	n     int64
	ready chan struct{}
}

func newBudget(max int64) *budget { return &budget{max: max} }

// take takes n bytes if they fit, or if nothing is in flight (a request
// larger than the whole budget proceeds alone).
func (b *budget) take(n int64) bool {
	for {
		u := b.used.Load()
		if u != 0 && u+n > b.max {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// acquire takes n bytes (at most the whole budget), waiting for releases;
// it returns the bytes to release.
func (b *budget) acquire(n int64, w *waiter) int64 {
	n = min(n, b.max)
	if b.waiting.Load() == 0 && b.take(n) {
		return n
	}
	b.mu.Lock()
	// A release that does not see this count has already returned its
	// bytes, so the retry below sees them.
	b.waiting.Add(1)
	if len(b.q) == 0 && b.take(n) {
		b.waiting.Add(-1)
		b.mu.Unlock()
		return n
	}
	if w.ready == nil {
		w.ready = make(chan struct{}, 1)
	}
	w.n = n
	b.q = append(b.q, w)
	b.mu.Unlock()
	<-w.ready
	return n
}

// tryAcquire takes n bytes if nobody waits and they fit, without waiting.
func (b *budget) tryAcquire(n int64) bool {
	return n <= b.max && b.waiting.Load() == 0 && b.take(n)
}

func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.used.Add(-n)
	if b.waiting.Load() != 0 {
		b.mu.Lock()
		for len(b.q) > 0 && b.take(b.q[0].n) {
			w := b.q[0]
			copy(b.q, b.q[1:])
			b.q[len(b.q)-1] = nil
			b.q = b.q[:len(b.q)-1]
			b.waiting.Add(-1)
			w.ready <- struct{}{}
		}
		b.mu.Unlock()
	}
}

// inUse is the number of bytes taken.
func (b *budget) inUse() int64 { return b.used.Load() }
