package nbd

import (
	"math/bits"
	"sync"
	"unsafe"
)

// buffer is a pooled, 4 KiB-aligned payload buffer.
type buffer struct {
	b     []byte // len = requested size
	full  []byte
	class int
}

const (
	minBufShift = 12 // 4 KiB
	maxBufShift = 26 // 64 MiB
	bufAlign    = 4096
)

var bufPools [maxBufShift - minBufShift + 1]sync.Pool

func bufClass(n int) int {
	if n <= 1<<minBufShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minBufShift
}

func alignedBytes(n int) []byte {
	raw := make([]byte, n+bufAlign)
	skip := int(-uintptr(unsafe.Pointer(unsafe.SliceData(raw)))) & (bufAlign - 1)
	return raw[skip : skip+n : skip+n]
}

// getBuffer returns a buffer of n bytes with undefined contents.
func getBuffer(n int) *buffer {
	c := bufClass(n)
	if c >= len(bufPools) {
		full := alignedBytes(n)
		return &buffer{b: full, full: full, class: -1}
	}
	if v := bufPools[c].Get(); v != nil {
		b := v.(*buffer)
		b.b = b.full[:n]
		return b
	}
	full := alignedBytes(1 << (c + minBufShift))
	return &buffer{b: full[:n], full: full, class: c}
}

func putBuffer(b *buffer) {
	if b == nil || b.class < 0 {
		return
	}
	b.b = nil
	bufPools[b.class].Put(b)
}

// budget bounds the payload bytes one connection holds in flight.
type budget struct {
	mu    sync.Mutex
	cond  sync.Cond
	avail int64
	max   int64
}

func newBudget(max int64) *budget {
	b := &budget{avail: max, max: max}
	b.cond.L = &b.mu
	return b
}

// acquire takes n bytes (at most the whole budget), waiting for releases.
func (b *budget) acquire(n int64) int64 {
	n = min(n, b.max)
	b.mu.Lock()
	for b.avail < n {
		b.cond.Wait()
	}
	b.avail -= n
	b.mu.Unlock()
	return n
}

func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.avail += n
	b.mu.Unlock()
	b.cond.Signal()
}
