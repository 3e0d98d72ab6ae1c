package r5log

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// DataPage is one data page of a stripe write.
type DataPage struct {
	Location uint64 // array sector of the page (raid5_compute_blocknr(sh, i, 0))
	Page     []byte // BlockSize bytes
}

// StripeWrite is one stripe as r5l_log_stripe puts it into the log.
type StripeWrite struct {
	Sector uint64 // member-relative stripe sector (sh->sector)
	// Data are the pages being written, in ascending member index (the
	// kernel walks sh->dev[0..disks-1]). Pages already in the journal
	// (R5_InJournal) are not listed.
	Data []DataPage
	// P is the parity page (nil for a write-back caching-phase write, which
	// logs data only); Q is the raid6 syndrome page (nil for raid4/5).
	P, Q []byte
}

// LogPage is a page placed in the log after a meta block.
type LogPage struct {
	Sector uint64 // log sector (relative to data_offset)
	Page   []byte // the caller's page, not copied
}

// IOUnit is one io_unit: a meta block and the pages after it, written by
// the kernel as one (possibly split at the ring end) plain write.
type IOUnit struct {
	Seq      uint64
	Position uint64 // sector of the meta block
	// Meta is the meta block; it is final (meta_size and checksum filled)
	// once the IOUnit has been returned sealed by the Writer.
	Meta    []byte
	Pages   []LogPage
	End     uint64 // sector after the last page (io->log_end), ring-wrapped
	Stripes int    // stripes logged in this io_unit
	off     int    // io->meta_offset
}

// Writer lays out io_units like the kernel's log writer (r5l_get_meta,
// r5l_new_meta, r5l_log_stripe, r5l_append_payload_meta,
// r5l_append_payload_page, r5l_append_flush_payload,
// r5l_submit_current_io). It does no I/O.
type Writer struct {
	Seed    uint32
	DevSize uint64 // log->device_size: ring length in sectors, multiple of 8
	Pos     uint64 // log->log_start: where the next meta block or page goes
	Seq     uint64 // log->seq: seq of the next meta block
	// Tail is log->last_checkpoint (journal_tail), for the free space
	// check of AddStripe.
	Tail uint64
	cur  *IOUnit
}

// ErrNoSpace is returned by AddStripe when the kernel would park the
// stripe until reclaim frees log space (r5l_has_free_space failed).
var ErrNoSpace = errors.New("r5log: no free space in the log")

// stripeMetaSize is the meta space r5l_log_stripe reserves for a stripe.
// Note that it counts a parity payload header even for data-only writes
// (parity_pages == 0), exactly as the kernel does.
func stripeMetaSize(dataPages, parityPages int) int {
	return (DataParityHeaderSize+4)*dataPages + DataParityHeaderSize + 4*parityPages
}

// IOSize returns how many meta blocks and log sectors BuildIO lays the
// stripes out in (the same rule: a new meta block when a stripe's
// reservation does not fit the current one; the payloads appended, which
// for a data-only stripe are less than its reservation, fill it), so that a caller can
// reserve log space before it knows the position and sequence numbers.
func IOSize(stripes []StripeWrite) (metas, sectors uint64) {
	off := BlockSize // no meta block yet
	pages := uint64(0)
	for i := range stripes {
		s := &stripes[i]
		parity := 0
		if s.P != nil {
			parity = 1 + b2i(s.Q != nil)
		}
		ms := stripeMetaSize(len(s.Data), parity)
		if off+ms > BlockSize {
			metas++
			off = HeaderSize
		}
		off += (DataParityHeaderSize + 4) * len(s.Data) // what is appended
		if parity > 0 {
			off += DataParityHeaderSize + 4*parity
		}
		pages += uint64(len(s.Data) + parity)
	}
	return metas, (metas + pages) * BlockSectors
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Current returns the io_unit accepting payloads (nil if none). Its Meta
// is not sealed yet.
func (w *Writer) Current() *IOUnit { return w.cur }

// AddStripe appends one stripe (r5l_write_stripe / r5c_cache_data +
// r5l_log_stripe). If the stripe's payloads do not fit in the current
// meta block, that io_unit is sealed and returned, and a new one is
// started for the stripe. If the log lacks space for the stripe (one meta
// block plus all its pages, measured from Tail, as the kernel reserves
// even when the stripe joins the current io_unit), it returns ErrNoSpace
// and changes nothing.
func (w *Writer) AddStripe(s StripeWrite) (sealed *IOUnit, err error) {
	parity := 0
	if s.P != nil {
		parity = 1
		if s.Q != nil {
			parity = 2
		}
	} else if s.Q != nil {
		return nil, errors.New("r5log: Q without P")
	}
	if len(s.Data) == 0 && parity == 0 {
		return nil, errors.New("r5log: empty stripe")
	}
	for i := range s.Data {
		if len(s.Data[i].Page) != BlockSize {
			return nil, fmt.Errorf("r5log: data page %d is %d bytes", i, len(s.Data[i].Page))
		}
	}
	if (s.P != nil && len(s.P) != BlockSize) || (s.Q != nil && len(s.Q) != BlockSize) {
		return nil, errors.New("r5log: parity page size")
	}
	if err := w.check(); err != nil {
		return nil, err
	}
	reserve := uint64(1+len(s.Data)+parity) * BlockSectors
	if w.DevSize <= RingDistance(w.DevSize, w.Tail, w.Pos)+reserve {
		return nil, ErrNoSpace
	}
	ms := stripeMetaSize(len(s.Data), parity)
	if ms > BlockSize-HeaderSize {
		return nil, fmt.Errorf("r5log: stripe needs %d bytes of meta, more than a meta block", ms)
	}
	sealed = w.getMeta(ms)
	io := w.cur
	for _, d := range s.Data {
		w.appendMeta(TypeData, d.Location, Checksum(w.Seed, d.Page), 0, false)
		w.appendPage(d.Page)
	}
	switch parity {
	case 2:
		w.appendMeta(TypeParity, s.Sector, Checksum(w.Seed, s.P), Checksum(w.Seed, s.Q), true)
		w.appendPage(s.P)
		w.appendPage(s.Q)
	case 1:
		w.appendMeta(TypeParity, s.Sector, Checksum(w.Seed, s.P), 0, false)
		w.appendPage(s.P)
	}
	io.Stripes++
	return sealed, nil
}

// AddFlush appends a flush payload for one stripe, as write-back mode does
// when a cached stripe has reached the members
// (r5c_finish_stripe_write_out -> r5l_append_flush_payload). It returns
// the io_unit it had to seal to make room, if any.
func (w *Writer) AddFlush(stripeSector uint64) (sealed *IOUnit, err error) {
	if err := w.check(); err != nil {
		return nil, err
	}
	sealed = w.getMeta(FlushHeaderSize + 8)
	io := w.cur
	b := io.Meta[io.off:]
	binary.LittleEndian.PutUint16(b[poffType:], TypeFlush)
	binary.LittleEndian.PutUint32(b[poffSize:], 8)
	binary.LittleEndian.PutUint64(b[poffStripes:], stripeSector)
	io.off += FlushHeaderSize + 8
	return sealed, nil
}

// Seal finishes the current io_unit (r5l_submit_current_io: meta_size and
// checksum) and returns it; nil if there is none. The kernel seals at the
// end of each raid5d pass (r5l_write_stripe_run) and when the meta block
// is full.
func (w *Writer) Seal() *IOUnit {
	io := w.cur
	if io == nil {
		return nil
	}
	seal(io.Meta, w.Seed, uint32(io.off))
	w.cur = nil
	return io
}

func (w *Writer) check() error {
	if w.DevSize == 0 || w.DevSize%BlockSectors != 0 {
		return fmt.Errorf("r5log: DevSize %d not a positive multiple of %d", w.DevSize, BlockSectors)
	}
	if w.Pos >= w.DevSize || w.Pos%BlockSectors != 0 {
		return fmt.Errorf("r5log: Pos %d outside the ring or unaligned", w.Pos)
	}
	return nil
}

// getMeta is r5l_get_meta: seal the current io_unit if payloadSize more
// bytes do not fit, and start a new one if there is none.
func (w *Writer) getMeta(payloadSize int) (sealed *IOUnit) {
	if w.cur != nil && w.cur.off+payloadSize > BlockSize {
		sealed = w.Seal()
	}
	if w.cur == nil {
		io := &IOUnit{Seq: w.Seq, Position: w.Pos, Meta: make([]byte, BlockSize), off: HeaderSize}
		putHeader(io.Meta, w.Seq, w.Pos)
		w.Seq++
		w.Pos = RingAdd(w.DevSize, w.Pos, BlockSectors)
		io.End = w.Pos
		w.cur = io
	}
	return sealed
}

func (w *Writer) appendMeta(typ uint16, loc uint64, c1, c2 uint32, two bool) {
	io := w.cur
	b := io.Meta[io.off:]
	n := uint32(1)
	if two {
		n = 2
	}
	binary.LittleEndian.PutUint16(b[poffType:], typ)
	binary.LittleEndian.PutUint32(b[poffSize:], n*BlockSectors)
	binary.LittleEndian.PutUint64(b[poffLocation:], loc)
	binary.LittleEndian.PutUint32(b[poffChecksums:], c1)
	if two {
		binary.LittleEndian.PutUint32(b[poffChecksums+4:], c2)
	}
	io.off += DataParityHeaderSize + 4*int(n)
}

func (w *Writer) appendPage(p []byte) {
	io := w.cur
	io.Pages = append(io.Pages, LogPage{Sector: w.Pos, Page: p})
	w.Pos = RingAdd(w.DevSize, w.Pos, BlockSectors)
	io.End = w.Pos
}

// RingDistance is r5l_ring_distance: the sectors from start to end in a
// ring of size sectors.
func RingDistance(size, start, end uint64) uint64 {
	if end >= start {
		return end - start
	}
	return end + size - start
}

// BuildIO lays out stripes as the kernel logs them when they are all
// handled in one raid5d pass: io_units starting at position with seq,
// a new meta block whenever the next stripe's payloads do not fit in the
// current one, the last io_unit sealed too. devSize is the ring length
// (log->device_size); the free space check is not applied (the caller
// decides what fits, e.g. with a Writer).
func BuildIO(seed uint32, seq, position, devSize uint64, stripes []StripeWrite) ([]*IOUnit, error) {
	w := Writer{Seed: seed, DevSize: devSize, Pos: position, Seq: seq}
	var out []*IOUnit
	for i, s := range stripes {
		// Free space is the caller's business here: keep the check out.
		w.Tail = w.Pos
		sealed, err := w.AddStripe(s)
		if err != nil {
			return out, fmt.Errorf("stripe %d: %w", i, err)
		}
		if sealed != nil {
			out = append(out, sealed)
		}
	}
	if io := w.Seal(); io != nil {
		out = append(out, io)
	}
	return out, nil
}
