package daemon

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"mdtool/engine"
	"mdtool/internal/serve/export"
	"mdtool/internal/serve/metrics"
)

// Backend serves an engine.Array as an export.Backend: the block sizes are
// the array's logical block (minimum), full stripe (preferred; a page for
// levels without one) and at least 1 MiB (maximum).
type Backend struct {
	a              *engine.Array
	min, pref, max uint32
	m              *metrics.Array // nil: no metrics
	// ro is md's read-only mode set on the running array (mdadm -o):
	// writes fail with EROFS. Shared by the copies WithoutMetrics makes.
	ro *atomic.Bool
}

var _ export.Backend = (*Backend)(nil)

// NewBackend returns the Backend of a; m, if not nil, receives every
// request.
func NewBackend(a *engine.Array, m *metrics.Array) *Backend {
	min := uint32(a.BlockSize())
	pref := uint32(a.IOOpt())
	if pref == 0 {
		pref = max(min, 4096)
	}
	if pref%min != 0 {
		pref = (pref/min + 1) * min
	}
	mx := max(uint32(1<<20), pref)
	return &Backend{a: a, min: min, pref: pref, max: mx, m: m, ro: new(atomic.Bool)}
}

// WithoutMetrics returns a Backend on the same array that records nothing
// (for exports that record their own metrics).
func (b *Backend) WithoutMetrics() *Backend {
	c := *b
	c.m = nil
	return &c
}

// start returns the time a request starts, when metrics are recorded
// (reading the clock is a noticeable part of a 4 KiB request on tmpfs).
func (b *Backend) start() time.Time {
	if b.m == nil {
		return time.Time{}
	}
	return time.Now()
}

func (b *Backend) observe(op metrics.Op, n int64, t0 time.Time, err error) {
	if b.m == nil {
		return
	}
	if err != nil {
		b.m.IOError(op)
		return
	}
	b.m.ObserveIO(op, n, time.Since(t0))
}

// ReadAt reads from the array.
func (b *Backend) ReadAt(p []byte, off int64) (int, error) {
	t0 := b.start()
	n, err := b.a.ReadAt(p, off)
	b.observe(metrics.OpRead, int64(len(p)), t0, err)
	return n, err
}

// WriteAt writes to the array.
func (b *Backend) WriteAt(p []byte, off int64) (int, error) {
	if b.ro.Load() {
		return 0, syscall.EROFS
	}
	t0 := b.start()
	n, err := b.a.WriteAt(p, off)
	b.observe(metrics.OpWrite, int64(len(p)), t0, err)
	return n, err
}

// WriteAtFUA writes durably.
func (b *Backend) WriteAtFUA(p []byte, off int64) (int, error) {
	if b.ro.Load() {
		return 0, syscall.EROFS
	}
	t0 := b.start()
	n, err := b.a.WriteAtFUA(p, off)
	b.observe(metrics.OpWrite, int64(len(p)), t0, err)
	return n, err
}

// Flush makes acknowledged writes durable.
func (b *Backend) Flush() error {
	t0 := b.start()
	err := b.a.Flush()
	b.observe(metrics.OpFlush, 0, t0, err)
	return err
}

// Discard passes a discard to the array.
func (b *Backend) Discard(off, length int64) error {
	if b.ro.Load() {
		return syscall.EROFS
	}
	t0 := b.start()
	err := b.a.Discard(off, length)
	b.observe(metrics.OpDiscard, length, t0, err)
	return err
}

// WriteZeroes zeroes a range. The engine decides how (it never leaves a
// range unprovisioned that the members cannot read back as zeroes), so
// mayTrim makes no difference.
func (b *Backend) WriteZeroes(off, length int64, mayTrim bool) error {
	if b.ro.Load() {
		return syscall.EROFS
	}
	t0 := b.start()
	err := b.a.WriteZeroes(off, length)
	b.observe(metrics.OpWriteZeroes, length, t0, err)
	return err
}

// Size is the array size.
func (b *Backend) Size() int64 { return b.a.Size() }

// BlockSizes returns the export block sizes.
func (b *Backend) BlockSizes() (min, preferred, max uint32) { return b.min, b.pref, b.max }

// countingListener counts the connections it accepted that are still open.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.n.Add(1)
	cc := &countedConn{Conn: c, n: l.n}
	openConns.Store(cc, struct{}{})
	return cc, nil
}

type countedConn struct {
	net.Conn
	n    *atomic.Int64
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		openConns.Delete(c)
		c.n.Add(-1)
	})
	return err
}
