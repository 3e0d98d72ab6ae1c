package engine

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

func addrOf(b []byte) uintptr {
	if cap(b) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))
}

const (
	memPageSize  = 64 << 10
	memLockShift = 12 // one lock per 4 KiB
)

type memPage struct {
	mu   [memPageSize >> memLockShift]sync.RWMutex
	data [memPageSize]byte
}

// MemDevice is a sparse in-memory device for tests and benchmarks. Pages
// are allocated on first write; unwritten space reads as zeroes. Each
// 64 KiB page has its own lock, so concurrent I/O on different pages does
// not contend and the race detector sees no races.
type MemDevice struct {
	pages  []atomic.Pointer[memPage]
	geom   DeviceGeometry
	closed atomic.Bool
}

// NewMemDevice returns a zeroed device of size bytes with 512-byte logical
// and 4 KiB physical blocks.
func NewMemDevice(size int64) *MemDevice {
	return NewMemDeviceGeometry(DeviceGeometry{Size: size, LogicalBlock: 512, PhysicalBlock: 4096})
}

// NewMemDeviceGeometry returns a zeroed device with the given geometry
// (Memory and DiscardZeroes are forced on).
func NewMemDeviceGeometry(g DeviceGeometry) *MemDevice {
	if g.LogicalBlock == 0 {
		g.LogicalBlock = 512
	}
	if g.PhysicalBlock == 0 {
		g.PhysicalBlock = g.LogicalBlock
	}
	g.Memory = true
	g.DiscardZeroes = true
	n := (g.Size + memPageSize - 1) / memPageSize
	return &MemDevice{pages: make([]atomic.Pointer[memPage], n), geom: g}
}

// Geometry returns the device geometry.
func (m *MemDevice) Geometry() DeviceGeometry { return m.geom }

// ReadAt copies from the device.
func (m *MemDevice) ReadAt(p []byte, off int64) (int, error) {
	if m.closed.Load() {
		return 0, ErrClosed
	}
	if err := checkRange(off, int64(len(p)), m.geom.Size); err != nil {
		return 0, err
	}
	done := 0
	for done < len(p) {
		pi := off / memPageSize
		po := int(off % memPageSize)
		n := min(len(p)-done, 1<<memLockShift-po%(1<<memLockShift))
		pg := m.pages[pi].Load()
		if pg == nil {
			clear(p[done : done+n])
		} else {
			l := &pg.mu[po>>memLockShift]
			l.RLock()
			copy(p[done:done+n], pg.data[po:po+n])
			l.RUnlock()
		}
		done += n
		off += int64(n)
	}
	return done, nil
}

func (m *MemDevice) page(i int64) *memPage {
	pg := m.pages[i].Load()
	if pg != nil {
		return pg
	}
	pg = new(memPage)
	if m.pages[i].CompareAndSwap(nil, pg) {
		return pg
	}
	return m.pages[i].Load()
}

// WriteAt copies into the device.
func (m *MemDevice) WriteAt(p []byte, off int64) (int, error) {
	if m.closed.Load() {
		return 0, ErrClosed
	}
	if err := checkRange(off, int64(len(p)), m.geom.Size); err != nil {
		return 0, err
	}
	done := 0
	for done < len(p) {
		pi := off / memPageSize
		po := int(off % memPageSize)
		n := min(len(p)-done, 1<<memLockShift-po%(1<<memLockShift))
		pg := m.page(pi)
		l := &pg.mu[po>>memLockShift]
		l.Lock()
		copy(pg.data[po:po+n], p[done:done+n])
		l.Unlock()
		done += n
		off += int64(n)
	}
	return done, nil
}

// WriteZeroes zeroes a range; whole pages are dropped.
func (m *MemDevice) WriteZeroes(off, n int64) error {
	if m.closed.Load() {
		return ErrClosed
	}
	if err := checkRange(off, n, m.geom.Size); err != nil {
		return err
	}
	for n > 0 {
		pi := off / memPageSize
		po := off % memPageSize
		c := min(n, memPageSize-po)
		if po == 0 && c == memPageSize {
			m.pages[pi].Store(nil)
		} else if pg := m.pages[pi].Load(); pg != nil {
			for o := po; o < po+c; {
				e := min(po+c, (o>>memLockShift+1)<<memLockShift)
				l := &pg.mu[o>>memLockShift]
				l.Lock()
				clear(pg.data[o:e])
				l.Unlock()
				o = e
			}
		}
		off += c
		n -= c
	}
	return nil
}

// Discard zeroes the range (a MemDevice always discards to zeroes).
func (m *MemDevice) Discard(off, n int64) error { return m.WriteZeroes(off, n) }

// Flush does nothing: memory is as durable as it gets.
func (m *MemDevice) Flush() error {
	if m.closed.Load() {
		return ErrClosed
	}
	return nil
}

// Close makes further I/O fail. The contents stay readable through Reopen.
func (m *MemDevice) Close() error {
	m.closed.Store(true)
	return nil
}

// Reopen returns a new handle to the same contents, open.
func (m *MemDevice) Reopen() *MemDevice {
	m.closed.Store(false)
	return m
}
