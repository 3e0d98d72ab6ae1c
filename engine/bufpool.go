package engine

import (
	"math/bits"
	"sync"
)

// Buf is a pooled, 4 KiB-aligned buffer: mdtool's one aligned buffer
// pool, for the array's member I/O and stripe work and for the NBD
// server's request payloads (GetBuf, PutBuf).
type Buf struct {
	b     []byte // len = requested size
	full  []byte
	class int
}

const (
	minBufShift = 12 // 4 KiB
	maxBufShift = 26 // 64 MiB
)

type buf = Buf

var bufPools [maxBufShift - minBufShift + 1]sync.Pool

func bufClass(n int) int {
	if n <= 1<<minBufShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minBufShift
}

// getBuf returns a 4 KiB-aligned buffer of n bytes, contents undefined.
func getBuf(n int) *buf {
	c := bufClass(n)
	if c >= len(bufPools) {
		full := alignedSlice(n, 4096)
		return &buf{b: full, full: full, class: -1}
	}
	if v := bufPools[c].Get(); v != nil {
		b := v.(*buf)
		b.b = b.full[:n]
		return b
	}
	full := alignedSlice(1<<(c+minBufShift), 4096)
	return &buf{b: full[:n], full: full, class: c}
}

// getZeroBuf is getBuf with the buffer zeroed.
func getZeroBuf(n int) *buf {
	b := getBuf(n)
	clear(b.b)
	return b
}

func putBuf(b *buf) {
	if b == nil || b.class < 0 {
		return
	}
	bufPools[b.class].Put(b)
}

// GetBuf returns a 4 KiB-aligned buffer of n bytes from the pool,
// contents undefined; PutBuf gives it back.
func GetBuf(n int) *Buf { return getBuf(n) }

// PutBuf returns a buffer from GetBuf to the pool; b must not be used
// afterwards. nil is ignored.
func PutBuf(b *Buf) { putBuf(b) }

// Bytes is the buffer: n bytes for GetBuf(n).
func (b *Buf) Bytes() []byte { return b.b }

// BufCap is the memory GetBuf(n) takes: its size class (n itself beyond
// the largest class).
func BufCap(n int) int64 {
	c := bufClass(n)
	if c >= len(bufPools) {
		return int64(n)
	}
	return 1 << (c + minBufShift)
}
