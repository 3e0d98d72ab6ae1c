package bitmap

import "fmt"

// Extent is one write of bitmap storage: Len bytes starting Off bytes from
// the start of the bitmap header (so the device byte is
// [WriteGeometry.Start]*512 + Off).
type Extent struct {
	Off uint64
	Len uint64
}

// End returns Off+Len.
func (e Extent) End() uint64 { return e.Off + e.Len }

// FlushMode selects how [DirtyTracker.Flush] turns dirty state into writes.
type FlushMode int

const (
	// SubPage writes only the dirty logical blocks of each changed page,
	// expanded to io_opt alignment where that is safe (mdtool's policy).
	SubPage FlushMode = iota
	// WholePage writes every changed page whole, the last page sized by
	// [WriteGeometry.PageWriteSize]: what the kernel does.
	WholePage
)

// String names the mode.
func (m FlushMode) String() string {
	switch m {
	case SubPage:
		return "sub-page"
	case WholePage:
		return "whole-page"
	}
	return fmt.Sprintf("FlushMode(%d)", int(m))
}

// DirtyTracker records which logical blocks of which 4 KiB bitmap pages
// changed since the last flush, and turns them into write extents.
//
// Blocks are LogicalBlock bytes (512 or 4096 typically; the geometry must
// have 512 <= LogicalBlock <= 4096), so a page has at most 8; one byte of
// mask per page. Marking and flushing allocate nothing; Flush appends to a
// caller-supplied slice. A DirtyTracker is not safe for concurrent use.
type DirtyTracker struct {
	g     WriteGeometry
	lbs   uint64
	io    uint64 // expansion size, 0 = none
	valid uint64 // StorageBytes rounded up to lbs
	mask  []uint8
	n     int // pages with a non-zero mask
}

// NewDirtyTracker returns a tracker for the geometry, with nothing dirty.
// It fails when the geometry is unusable, when LogicalBlock > 4096, or
// when even the logical-block-rounded bitmap crosses the boundary or (for
// DataBitmapMetadata) the data runs into the bitmap: the kernel could not
// write such a bitmap either (*[FitError]).
func NewDirtyTracker(g WriteGeometry) (*DirtyTracker, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	if g.Start() < 0 {
		return nil, fmt.Errorf("%w: bitmap starts before the device (sector %d)", ErrGeometry, g.Start())
	}
	if g.LogicalBlock > PageSize {
		return nil, fmt.Errorf("%w: logical block size %d > page size", ErrGeometry, g.LogicalBlock)
	}
	t := &DirtyTracker{
		g:     g,
		lbs:   uint64(g.LogicalBlock),
		valid: roundUp(g.StorageBytes, uint64(g.LogicalBlock)),
		mask:  make([]uint8, g.FilePages()),
	}
	if io := g.OptimalIO(); io > t.lbs && io%t.lbs == 0 {
		t.io = io
	}
	if g.dataInBitmap() {
		return nil, &FitError{Page: 0, Msg: "data runs in to bitmap"}
	}
	if !t.fits(t.valid) {
		msg := "bitmap runs in to data"
		if g.Placement() == DataBitmapMetadata {
			msg = "bitmap runs in to metadata"
		}
		return nil, &FitError{Page: (t.valid - 1) / PageSize, Msg: msg}
	}
	return t, nil
}

// Geometry returns the geometry the tracker was made for.
func (t *DirtyTracker) Geometry() WriteGeometry { return t.g }

// fits reports whether storage bytes [.., end) end at or before the
// boundary, in bytes.
func (t *DirtyTracker) fits(end uint64) bool {
	b, ok := t.g.Boundary()
	if !ok {
		return true
	}
	return t.g.Start()*512+int64(end) <= b*512
}

// MarkRange marks the blocks holding storage bytes [off, off+n) dirty
// (offsets from the start of the header). Bytes beyond the bitmap are
// ignored; it reports whether anything was marked.
func (t *DirtyTracker) MarkRange(off, n uint64) bool {
	if n == 0 || off >= t.g.StorageBytes {
		return false
	}
	end := off + n
	if end > t.g.StorageBytes || end < off {
		end = t.g.StorageBytes
	}
	for b := off / t.lbs; b*t.lbs < end; b++ {
		pg := b * t.lbs / PageSize
		bit := uint8(1) << (b * t.lbs % PageSize / t.lbs)
		if t.mask[pg] == 0 {
			t.n++
		}
		t.mask[pg] |= bit
	}
	return true
}

// MarkChunk marks the block holding the chunk's bit dirty (after the
// caller set or cleared the bit). It reports false for a chunk beyond the
// bitmap.
func (t *DirtyTracker) MarkChunk(chunk uint64) bool {
	return t.MarkRange(ByteOf(chunk), 1)
}

// MarkHeader marks the header (the first 256 bytes) dirty, e.g. after an
// events update.
func (t *DirtyTracker) MarkHeader() { t.MarkRange(0, HeaderSize) }

// MarkAll marks every block of the bitmap dirty.
func (t *DirtyTracker) MarkAll() { t.MarkRange(0, t.g.StorageBytes) }

// Dirty reports whether anything is waiting for a flush.
func (t *DirtyTracker) Dirty() bool { return t.n != 0 }

// DirtyPages returns the number of pages with changes.
func (t *DirtyTracker) DirtyPages() int { return t.n }

// Reset forgets all dirty state.
func (t *DirtyTracker) Reset() {
	clear(t.mask)
	t.n = 0
}

// Flush appends the writes needed to put the recorded changes on disk to
// dst, in ascending order, and clears the dirty state. On error the dirty
// state is kept and dst is returned unchanged.
//
// WholePage: one extent per changed page, {page*4096,
// [WriteGeometry.PageWriteSize]}: the kernel's behaviour under g.Rule.
//
// SubPage: inside each changed page, each run of dirty logical blocks
// becomes an extent. Where the device has an optimal I/O size io larger
// than the logical block and a multiple of it ([WriteGeometry.OptimalIO],
// independent of g.Rule), the run is widened to io-aligned device offsets when the widened
// extent stays inside its page; its end is then clipped to the bitmap's end
// rounded up to the logical block. Otherwise the run is written at
// logical-block granularity. So no extent covers bytes past the
// lbs-rounded bitmap end, and none crosses the boundary (NewDirtyTracker
// checked that the lbs-rounded bitmap ends before it). Unlike the kernel
// (6.4+), which may write io_opt bytes past the bitmap's end on its last
// page, SubPage never does. Overlapping or touching extents are merged,
// also across pages.
func (t *DirtyTracker) Flush(mode FlushMode, dst []Extent) ([]Extent, error) {
	if t.n == 0 {
		return dst, nil
	}
	start := len(dst)
	for pg, m := range t.mask {
		if m == 0 {
			continue
		}
		var err error
		if mode == WholePage {
			var size uint64
			size, err = t.g.PageWriteSize(uint64(pg))
			if err == nil {
				dst = append(dst, Extent{uint64(pg) * PageSize, size})
			}
		} else {
			dst, err = t.subPage(dst, start, uint64(pg), m)
		}
		if err != nil {
			return dst[:start], err
		}
	}
	t.Reset()
	return dst, nil
}

// subPage appends the extents for page pg with block mask m.
func (t *DirtyTracker) subPage(dst []Extent, first int, pg uint64, m uint8) ([]Extent, error) {
	base := pg * PageSize
	pageEnd := base + PageSize
	dev := uint64(t.g.Start()) * 512 // device byte of storage offset 0
	for blk := uint64(0); m != 0; {
		if m&1 == 0 {
			m >>= 1
			blk++
			continue
		}
		run := uint64(0)
		for m&1 != 0 {
			m >>= 1
			run++
		}
		s, e := base+blk*t.lbs, base+(blk+run)*t.lbs
		blk += run
		if e > t.valid {
			e = t.valid
		}
		if t.io != 0 {
			as := (dev + s) / t.io * t.io
			ae := roundUp(dev+e, t.io)
			if as >= dev+base && ae <= dev+pageEnd {
				s, e = as-dev, min(ae-dev, t.valid)
			}
		}
		if !t.fits(e) {
			msg := "bitmap runs in to data"
			if t.g.Placement() == DataBitmapMetadata {
				msg = "bitmap runs in to metadata"
			}
			return dst, &FitError{Page: pg, Msg: msg}
		}
		if n := len(dst); n > first && dst[n-1].End() >= s {
			if e > dst[n-1].End() {
				dst[n-1].Len = e - dst[n-1].Off
			}
			continue
		}
		dst = append(dst, Extent{s, e - s})
	}
	return dst, nil
}
