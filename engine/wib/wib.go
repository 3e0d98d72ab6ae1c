// Package wib is the write-intent bitmap runtime of the userspace engine:
// it maintains an md internal bitmap (format: package mdtool/bitmap) on the
// array members exactly the way Linux md (drivers/md/md-bitmap.c) does, so
// that after a crash either the kernel or mdtool can resync only the chunks
// that may differ, whichever of the two wrote the bitmap.
//
// # Protocol (the kernel's)
//
// Every bitmap chunk has a 16-bit counter with the kernel's
// bitmap_counter_t layout: bit 15 NEEDED (chunk must be resynced), bit 14
// RESYNC (resync in progress), bits 0-13 a count (COUNTER_MAX 16383).
// Count 0 means clean; 1 and 2 mean "bit set, no write in flight"; n > 2
// means n-2 writes in flight.
//
//   - [Bitmap.StartWrite], before a data write: for each chunk, 0 -> set the
//     bit, count 3; 1 -> 3; n -> n+1. When a bit had to be set, StartWrite
//     returns only after the bitmap block holding it is durable on every
//     member ([Target.WriteBitmap]). Writers that need bits set at the same
//     time share one flush (group commit).
//   - [Bitmap.EndWrite], after the data write: count-1; a failed or degraded
//     write (ok=false) also sets NEEDED, which keeps the bit until a resync.
//     A successful write on a non-degraded array advances events_cleared to
//     the array's events (written by the next daemon pass).
//   - [Bitmap.Tick], the daemon, at most once per daemon_sleep: counters at
//     2 go to 1; counters at 1 go to 0 and the in-memory bit is cleared; the
//     cleared bit is written on the following pass. So the on-disk bit is
//     cleared between 2 and 3 daemon_sleep after the chunk's last write
//     ended (the kernel's documented "2-3 x time_base").
//   - [Bitmap.SetEvents] writes the bitmap header's events (and
//     events_cleared) durably; the engine calls it before it writes the md
//     superblocks, as md_update_sb calls md_bitmap_update_sb.
//
// # Writes
//
// Only changed storage is written. With Config.SubPage, inside a 4 KiB
// bitmap page only the dirty logical blocks are written, each widened per
// member to its io_opt (else its physical block size, at most one page)
// when the widened write stays inside the bitmap's pages and ends at or
// before the member's Limit, else left at logical-block size: the kernel's
// bitmap_io_size rule applied to sub-page writes. Without SubPage every
// changed page is written whole, the last page sized by the kernel rule
// ([bitmap.WriteGeometry.PageWriteSize], Linux >= 6.11). Members may
// differ in geometry; extents are computed per member. When the header
// changed it is written (on every member) before the other blocks.
//
// # Concurrency
//
// All methods are safe for concurrent use. The hot path of StartWrite and
// all of EndWrite are per-chunk atomic compare-and-swap operations with no
// lock, as long as the chunk's bit is already set and durable; only a
// clear->set transition (or a counter at COUNTER_MAX) takes the bitmap lock
// and the flush path.
package wib

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"mdtool/bitmap"
)

// Target is how the runtime reaches the members that carry the bitmap.
type Target interface {
	// WriteBitmap writes the bitmap storage byte range [off, off+len(p))
	// to the member, durably (FUA or write+flush). off is relative to the
	// bitmap superblock. Each member may get its own extents: wib
	// computes them per member geometry.
	//
	// WriteBitmap runs while a flush is in progress: it must not call
	// back into the Bitmap (SetEvents, StartWrite, Tick, ... would wait
	// for that very flush: deadlock). To fail a member it may mark it
	// faulty so that Members() stops listing it: the flush is then
	// retried on the remaining members (md's write_sb_page restart), and
	// the caller updates the superblocks afterwards.
	WriteBitmap(member int, off int64, p []byte) error
	// Members lists the active, non-faulty members carrying the bitmap.
	Members() []MemberGeom
}

// MemberGeom is one member's geometry as far as bitmap writes care.
type MemberGeom struct {
	Index         int    // passed back to WriteBitmap
	LogicalBlock  uint32 // bytes, 512..4096, power of two
	PhysicalBlock uint32 // bytes, 0 = same as LogicalBlock
	IOOpt         uint32 // bytes, 0 = unknown
	// BitmapStart is the byte offset of the bitmap superblock on the
	// member (superblock offset + bitmap_offset, in bytes). It must be a
	// multiple of LogicalBlock.
	BitmapStart int64
	// Limit is the first byte the bitmap must not touch: the data start
	// for 1.1/1.2, the superblock for a 1.0 bitmap placed before it (or
	// the bad-block log, when that comes first). 0 means no limit beyond
	// the bitmap's own pages.
	Limit int64
}

// Config is what a bitmap runtime starts from.
type Config struct {
	// Header is the bitmap superblock as read from the members.
	Header bitmap.Header
	// Bits is the on-disk bit array at open (the bytes right after the
	// header), at least ceil(chunks/8) bytes; more is kept as it is.
	Bits []byte
	// SubPage selects sub-page dirty tracking (write only the changed
	// logical blocks, widened to io_opt). The engine should set it; false
	// writes whole pages like the kernel.
	SubPage bool
	// Clock returns the current time for [Bitmap.Run] and for the
	// daemon's starting point; nil means time.Now.
	Clock func() time.Time

	// Optional, beyond the engine contract (zero values are safe):

	// Events is the array superblock's events counter; 0 means
	// Header.Events.
	Events uint64
	// Degraded says the array is degraded (no events_cleared advance).
	Degraded bool
	// NeededFrom is the kernel's "start" of md_bitmap_init_from_disk, in
	// sync-space sectors: chunks whose bit is set and that end at or after
	// it are loaded NEEDED (they stay set until a resync); chunks before
	// it are loaded as plain idle bits and cleared by the daemon. The
	// kernel passes recovery_cp when the array is not degraded (or
	// events_cleared == events), else 0. 0 = every set bit is NEEDED.
	NeededFrom uint64
	// Stale says the bitmap is out of date (bitmap.StaleError from
	// Header.CheckFor): every chunk is treated as dirty and New writes
	// the all-ones bitmap to the members, then a header without
	// BITMAP_STALE, like md_bitmap_load. Header.State's StateStale has
	// the same effect.
	Stale bool
}

// Stats are counters for metrics and benchmarks.
type Stats struct {
	Flushes    uint64 // flushes that wrote something
	Writes     uint64 // WriteBitmap calls
	Bytes      uint64 // bytes passed to WriteBitmap, all members
	SetFlushes uint64 // flushes that carried at least one newly set bit
	Errors     uint64 // failed flush attempts
	Retries    uint64 // flushes retried after the Target dropped a failed member
	TickErrors uint64 // failed Tick calls from Run
	LastErr    error  // the last flush error, nil after a successful flush
}

// BytesPerFlush returns Bytes/Flushes (0 without flushes).
func (s Stats) BytesPerFlush() float64 {
	if s.Flushes == 0 {
		return 0
	}
	return float64(s.Bytes) / float64(s.Flushes)
}

// Errors returned by New.
var (
	ErrClustered = errors.New("wib: clustered bitmaps (version 5) are not supported")
	ErrNoChunks  = errors.New("wib: bitmap covers no chunks (sync_size or chunksize 0)")
	ErrShortBits = errors.New("wib: bit array shorter than the bitmap's chunks")
	ErrGeometry  = errors.New("wib: unusable member geometry")
)

// WriteError is a failed bitmap write to one member.
type WriteError struct {
	Member int
	Off    int64
	Len    int
	Err    error
}

// Error describes the failed write.
func (e *WriteError) Error() string {
	return fmt.Sprintf("wib: member %d: bitmap write of %d bytes at %d: %v", e.Member, e.Len, e.Off, e.Err)
}

// Unwrap returns the Target's error.
func (e *WriteError) Unwrap() error { return e.Err }

// Counter word layout: the kernel's 16-bit bitmap_counter_t in the low
// bits, plus mdtool's PERSISTED flag (the bit is known to be set on every
// member's disk) above them.
const (
	cntMask   = 0x3fff // COUNTER(x)
	cntMax    = bitmap.CounterMax
	resyncBit = 1 << 14 // RESYNC_MASK
	neededBit = 1 << 15 // NEEDED_MASK
	kernMask  = 0xffff  // the kernel's whole counter word
	persisted = 1 << 16
)

// counterGroup is PAGE_COUNTER_RATIO: counters per 4 KiB counter page in
// the kernel, the granularity of its "pending" hint.
const counterGroup = 2048

// Bitmap is a running write-intent bitmap.
type Bitmap struct {
	t        Target
	clock    func() time.Time
	sleep    time.Duration
	shift    uint   // log2(chunk sectors)
	chunks   uint64 // number of chunks
	bytes    uint64 // storage bytes: header + bits
	pageCap  uint64 // FilePages*4096
	subPage  bool
	ctr      []atomic.Uint32
	pend     []atomic.Bool // per counter group: a counter may be at 1 or 2
	events   atomic.Uint64
	evClear  atomic.Uint64 // bitmap->events_cleared (in memory)
	degraded atomic.Bool

	mu           sync.Mutex
	cond         *sync.Cond // flush completions and counter overflow
	hdr          bitmap.Header
	img          []byte // header + bits, FilePages*4096 bytes
	trackers     map[int]*tracker
	pendingSet   []uint64 // chunks set in img, not yet known durable
	clearing     []uint64 // chunks cleared in img by the last pass, to write on the next
	hdrDirty     bool
	hdrSeq       uint64 // header modifications
	hdrDone      uint64 // hdrSeq carried by the last successful flush
	flushing     bool
	started      uint64 // flushes started
	completed    uint64 // flushes completed (in order)
	lastFlushErr error
	needSync     bool
	lastRun      time.Time
	stats        Stats
}

// New starts a runtime for the bitmap described by cfg, writing through t.
// It checks the header like the kernel (md_bitmap_read_sb) and every
// current member's geometry. It does no I/O, except for a stale bitmap
// (see Config.Stale).
func New(cfg Config, t Target) (*Bitmap, error) {
	h := cfg.Header
	if err := h.Validate(); err != nil {
		return nil, fmt.Errorf("wib: %w", err)
	}
	if h.Version == bitmap.VersionClustered {
		return nil, ErrClustered
	}
	chunks := h.Chunks()
	if chunks == 0 {
		return nil, ErrNoChunks
	}
	if need := (chunks + 7) / 8; uint64(len(cfg.Bits)) < need {
		return nil, fmt.Errorf("%w: %d bytes for %d chunks", ErrShortBits, len(cfg.Bits), chunks)
	}
	nbytes := h.Bytes()
	pageCap := bitmap.FilePages(nbytes) * bitmap.PageSize
	b := &Bitmap{
		t:        t,
		clock:    cfg.Clock,
		sleep:    time.Duration(h.DaemonSleep) * time.Second,
		shift:    uint(bits.TrailingZeros32(h.ChunkSize)) - 9,
		chunks:   chunks,
		bytes:    nbytes,
		pageCap:  pageCap,
		subPage:  cfg.SubPage,
		ctr:      make([]atomic.Uint32, chunks),
		pend:     make([]atomic.Bool, (chunks+counterGroup-1)/counterGroup),
		hdr:      h,
		img:      make([]byte, pageCap),
		trackers: make(map[int]*tracker),
	}
	if b.clock == nil {
		b.clock = time.Now
	}
	b.cond = sync.NewCond(&b.mu)
	b.lastRun = b.clock()
	ev := cfg.Events
	if ev == 0 {
		ev = h.Events
	}
	b.events.Store(ev)
	b.evClear.Store(h.EventsCleared)
	b.degraded.Store(cfg.Degraded)
	copy(b.img, h.Marshal())
	copy(b.img[bitmap.HeaderSize:], cfg.Bits)

	for _, m := range t.Members() {
		tr, err := b.newTracker(m)
		if err != nil {
			return nil, err
		}
		b.trackers[m.Index] = tr
	}

	stale := cfg.Stale || h.State&bitmap.StateStale != 0
	if stale {
		// md_bitmap_init_from_disk on an out-of-date bitmap: every page
		// after the header becomes 0xff and is written out.
		for i := bitmap.HeaderSize; i < len(b.img); i++ {
			b.img[i] = 0xff
		}
	}
	bitsArr := bitmap.BitsOf(b.img)
	for c := uint64(0); c < chunks; c++ {
		if !bitsArr.Test(c) {
			continue
		}
		w := uint32(2)
		if !stale {
			w |= persisted
		}
		if (c+1)<<b.shift >= cfg.NeededFrom {
			w |= neededBit
		}
		b.ctr[c].Store(w)
		b.pend[c/counterGroup].Store(true)
	}
	if stale {
		if err := b.rewriteStale(ev); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// rewriteStale writes the all-ones bitmap, then the header without
// BITMAP_STALE and with events_cleared = events (md_bitmap_read_sb /
// md_bitmap_load on a stale bitmap).
func (b *Bitmap) rewriteStale(events uint64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, tr := range b.trackers {
		tr.t.MarkAll()
	}
	if err := b.flushLocked(); err != nil {
		return err
	}
	for c := range b.ctr {
		b.ctr[c].Or(persisted)
	}
	b.evClear.Store(events)
	b.hdr.State &^= bitmap.StateStale
	b.hdr.EventsCleared = events
	b.putHeaderLocked()
	return b.waitHeaderLocked()
}

// ChunkSectors returns the sectors (512 bytes) covered by one bit.
func (b *Bitmap) ChunkSectors() uint64 { return 1 << b.shift }

// Chunks returns the number of chunks (bits).
func (b *Bitmap) Chunks() uint64 { return b.chunks }

// chunkRange returns the chunks [first, last] covering count sectors at
// sector, clipped to the bitmap; ok is false when nothing is covered.
func (b *Bitmap) chunkRange(sector, count uint64) (first, last uint64, ok bool) {
	if count == 0 {
		return 0, 0, false
	}
	first = sector >> b.shift
	if first >= b.chunks {
		return 0, 0, false
	}
	end := sector + count - 1
	if end < sector { // overflow
		end = ^uint64(0)
	}
	last = end >> b.shift
	if last >= b.chunks {
		last = b.chunks - 1
	}
	return first, last, true
}

// Dirty reports whether the chunk containing sector is marked: its bit is
// set in memory (writes in flight, not yet cleared, or NEEDED). Sectors
// beyond the bitmap are reported clean.
func (b *Bitmap) Dirty(sector uint64) bool {
	c := sector >> b.shift
	if c >= b.chunks {
		return false
	}
	return b.ctr[c].Load()&kernMask != 0
}

// DirtyChunks returns the number of marked chunks (see Dirty).
func (b *Bitmap) DirtyChunks() uint64 {
	var n uint64
	for i := range b.ctr {
		if b.ctr[i].Load()&kernMask != 0 {
			n++
		}
	}
	return n
}

// Header returns the bitmap header as it will be (or was last) written.
func (b *Bitmap) Header() bitmap.Header {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.hdr
}

// Stats returns a snapshot of the counters.
func (b *Bitmap) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stats
}

// Run calls Tick whenever daemon_sleep has passed since the last daemon
// pass (by Config.Clock), until ctx is done. It waits with real timers.
// Tick errors are counted in Stats.TickErrors (and Stats.LastErr).
func (b *Bitmap) Run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if err := b.Tick(b.clock()); err != nil {
			b.mu.Lock()
			b.stats.TickErrors++
			b.stats.LastErr = err
			b.mu.Unlock()
		}
		b.mu.Lock()
		d := b.lastRun.Add(b.sleep).Sub(b.clock())
		b.mu.Unlock()
		if d < 10*time.Millisecond {
			d = 10 * time.Millisecond
		}
		timer.Reset(d)
	}
}
