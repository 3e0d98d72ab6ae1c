package wib

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"mdtool/bitmap"
)

// rec is one recorded bitmap write.
type rec struct {
	member int
	off    int64 // storage offset
	data   []byte
}

// recTarget is a Target that keeps an image of every member's device in
// memory and records the writes it gets, in order. Writes that are
// misaligned for the member, start before the bitmap or cross its limit
// are test failures.
type recTarget struct {
	t  testing.TB
	mu sync.Mutex

	geoms []MemberGeom
	disks map[int][]byte
	log   []rec

	// gate, when set, is received from before each write (to hold a
	// flush in progress).
	gate chan struct{}
	// fail, when set, decides whether a write fails.
	fail func(member int, off int64, n int) error
	// check, when set, runs after each write with the member's image
	// (t.mu held).
	check func(member int, off int64, n int, disk []byte)
}

func newRecTarget(t testing.TB, geoms ...MemberGeom) *recTarget {
	r := &recTarget{t: t, geoms: geoms, disks: make(map[int][]byte)}
	for _, g := range geoms {
		size := g.Limit
		if size == 0 {
			size = g.BitmapStart + 1<<20
		}
		r.disks[g.Index] = make([]byte, size)
	}
	return r
}

func (r *recTarget) Members() []MemberGeom {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]MemberGeom(nil), r.geoms...)
}

func (r *recTarget) setMembers(geoms ...MemberGeom) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.geoms = geoms
	for _, g := range geoms {
		if r.disks[g.Index] == nil {
			size := g.Limit
			if size == 0 {
				size = g.BitmapStart + 1<<20
			}
			r.disks[g.Index] = make([]byte, size)
		}
	}
}

func (r *recTarget) geom(member int) (MemberGeom, bool) {
	for _, g := range r.geoms {
		if g.Index == member {
			return g, true
		}
	}
	return MemberGeom{}, false
}

func (r *recTarget) WriteBitmap(member int, off int64, p []byte) error {
	if r.gate != nil {
		<-r.gate
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	g, ok := r.geom(member)
	if !ok {
		r.t.Errorf("write to member %d which is not in Members()", member)
		return errors.New("no such member")
	}
	abs := g.BitmapStart + off
	lbs := int64(g.LogicalBlock)
	switch {
	case off < 0:
		r.t.Errorf("member %d: write at storage offset %d, before the bitmap", member, off)
	case abs%lbs != 0 || int64(len(p))%lbs != 0 || len(p) == 0:
		r.t.Errorf("member %d: write [%d,+%d) not aligned to the logical block %d", member, abs, len(p), lbs)
	case g.Limit > 0 && abs+int64(len(p)) > g.Limit:
		r.t.Errorf("member %d: write [%d,%d) crosses the limit %d", member, abs, abs+int64(len(p)), g.Limit)
	}
	if r.fail != nil {
		if err := r.fail(member, off, len(p)); err != nil {
			return err
		}
	}
	d := r.disks[member]
	if abs < 0 || abs+int64(len(p)) > int64(len(d)) {
		return fmt.Errorf("write beyond the device")
	}
	copy(d[abs:], p)
	r.log = append(r.log, rec{member, off, append([]byte(nil), p...)})
	if r.check != nil {
		r.check(member, off, len(p), d)
	}
	return nil
}

// area returns a copy of the member's bitmap storage (n bytes).
func (r *recTarget) area(member int, n uint64) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	g, _ := r.geom(member)
	d := r.disks[member]
	return append([]byte(nil), d[g.BitmapStart:g.BitmapStart+int64(n)]...)
}

// diskBit reports the on-disk bit of chunk c on member.
func (r *recTarget) diskBit(member int, g MemberGeom, c uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.disks[member]
	return bitmap.BitsOf(d[g.BitmapStart:]).Test(c)
}

// diskHeader decodes the member's on-disk header.
func (r *recTarget) diskHeader(member int, g MemberGeom) *bitmap.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, err := bitmap.Parse(r.disks[member][g.BitmapStart:])
	if err != nil {
		r.t.Fatalf("member %d: on-disk header: %v", member, err)
	}
	return h
}

func (r *recTarget) writes() []rec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]rec(nil), r.log...)
}

func (r *recTarget) resetLog() {
	r.mu.Lock()
	r.log = nil
	r.mu.Unlock()
}

// install writes header and bits onto every member, as mdadm would have.
func (r *recTarget) install(h bitmap.Header, bits []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range r.geoms {
		d := r.disks[g.Index]
		copy(d[g.BitmapStart:], h.Marshal())
		copy(d[g.BitmapStart+bitmap.HeaderSize:], bits)
	}
}

// testHeader is a version-4 header for syncSize sectors and chunk bytes.
func testHeader(syncSize uint64, chunk uint32) bitmap.Header {
	return bitmap.Header{
		Magic:         bitmap.Magic,
		Version:       bitmap.Version,
		UUID:          [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		Events:        10,
		EventsCleared: 10,
		SyncSize:      syncSize,
		ChunkSize:     chunk,
		DaemonSleep:   5,
	}
}

// fakeClock is a manually advanced clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// setup builds a runtime over a recording target with clean bits.
type setup struct {
	h     bitmap.Header
	geoms []MemberGeom
	sub   bool
	bits  []byte // nil: all clear
}

func (s setup) build(t testing.TB) (*Bitmap, *recTarget, *fakeClock) {
	t.Helper()
	r := newRecTarget(t, s.geoms...)
	bits := s.bits
	if bits == nil {
		bits = make([]byte, (s.h.Chunks()+7)/8)
	}
	r.install(s.h, bits)
	clk := newFakeClock()
	b, err := New(Config{Header: s.h, Bits: bits, SubPage: s.sub, Clock: clk.Now}, r)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b, r, clk
}

// chunkSector returns the first sync-space sector of chunk c.
func (b *Bitmap) chunkSector(c uint64) uint64 { return c << b.shift }
