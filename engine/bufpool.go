package engine

import (
	"math/bits"
	"sync"
)

// buf is a pooled, 4 KiB-aligned buffer.
type buf struct {
	b     []byte // len = requested size
	full  []byte
	class int
}

const (
	minBufShift = 12 // 4 KiB
	maxBufShift = 26 // 64 MiB
)

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
