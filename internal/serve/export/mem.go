package export

import (
	"fmt"
	"sync"
)

const memPageShift = 16 // 64 KiB pages

const memPageSize = 1 << memPageShift

// memPage is one lazily allocated page with its own lock; data is nil while
// the page reads as zeroes.
type memPage struct {
	mu   sync.RWMutex
	data []byte
}

// Mem is a sparse in-memory Backend. Pages of 64 KiB are allocated on first
// write and released by Discard and WriteZeroes with mayTrim; each page has
// its own lock, so concurrent requests on different pages do not contend and
// overlapping requests are race-free (each page is copied atomically).
// Flush and FUA are no-ops: memory is as durable as it gets.
type Mem struct {
	size           int64
	min, pref, max uint32
	pages          []memPage
}

// NewMem returns a zeroed Mem of size bytes with the given block sizes
// (checked with CheckBlockSizes; size must be a multiple of min).
func NewMem(size int64, min, preferred, max uint32) (*Mem, error) {
	if err := CheckBlockSizes(min, preferred, max); err != nil {
		return nil, err
	}
	if size < 0 || size%int64(min) != 0 {
		return nil, fmt.Errorf("%w: size %d is not a multiple of the minimum block %d", ErrBlockSizes, size, min)
	}
	n := (size + memPageSize - 1) >> memPageShift
	return &Mem{size: size, min: min, pref: preferred, max: max, pages: make([]memPage, n)}, nil
}

// Size returns the device size.
func (m *Mem) Size() int64 { return m.size }

// BlockSizes returns the block sizes given to NewMem.
func (m *Mem) BlockSizes() (min, preferred, max uint32) { return m.min, m.pref, m.max }

// each calls fn for every page piece of [off, off+n): page index, offset in
// the page, and the matching piece of a caller buffer range [done, done+l).
func (m *Mem) each(off, n int64, fn func(pg *memPage, po, done, l int)) {
	done := 0
	for n > 0 {
		pi := off >> memPageShift
		po := int(off & (memPageSize - 1))
		l := int(min(n, int64(memPageSize-po)))
		fn(&m.pages[pi], po, done, l)
		done += l
		off += int64(l)
		n -= int64(l)
	}
}

// ReadAt copies from the device.
func (m *Mem) ReadAt(p []byte, off int64) (int, error) {
	if err := checkRange(off, int64(len(p)), m.size); err != nil {
		return 0, err
	}
	m.each(off, int64(len(p)), func(pg *memPage, po, done, l int) {
		pg.mu.RLock()
		if pg.data == nil {
			clear(p[done : done+l])
		} else {
			copy(p[done:done+l], pg.data[po:po+l])
		}
		pg.mu.RUnlock()
	})
	return len(p), nil
}

// WriteAt copies into the device.
func (m *Mem) WriteAt(p []byte, off int64) (int, error) {
	if err := checkRange(off, int64(len(p)), m.size); err != nil {
		return 0, err
	}
	m.each(off, int64(len(p)), func(pg *memPage, po, done, l int) {
		pg.mu.Lock()
		if pg.data == nil {
			pg.data = make([]byte, memPageSize)
		}
		copy(pg.data[po:po+l], p[done:done+l])
		pg.mu.Unlock()
	})
	return len(p), nil
}

// WriteAtFUA is WriteAt.
func (m *Mem) WriteAtFUA(p []byte, off int64) (int, error) { return m.WriteAt(p, off) }

// Flush does nothing.
func (m *Mem) Flush() error { return nil }

// Discard zeroes the range, releasing whole pages.
func (m *Mem) Discard(off, length int64) error { return m.zero(off, length, true) }

// WriteZeroes zeroes the range; with mayTrim whole pages are released,
// without it they stay allocated.
func (m *Mem) WriteZeroes(off, length int64, mayTrim bool) error {
	return m.zero(off, length, mayTrim)
}

func (m *Mem) zero(off, n int64, release bool) error {
	if err := checkRange(off, n, m.size); err != nil {
		return err
	}
	m.each(off, n, func(pg *memPage, po, _, l int) {
		pg.mu.Lock()
		switch {
		case release && l == memPageSize:
			pg.data = nil
		case pg.data != nil:
			clear(pg.data[po : po+l])
		case !release:
			pg.data = make([]byte, memPageSize)
		}
		pg.mu.Unlock()
	})
	return nil
}

// Allocated returns the number of bytes of allocated pages.
func (m *Mem) Allocated() int64 {
	var n int64
	for i := range m.pages {
		pg := &m.pages[i]
		pg.mu.RLock()
		if pg.data != nil {
			n += memPageSize
		}
		pg.mu.RUnlock()
	}
	return n
}
