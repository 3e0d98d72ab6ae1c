package wib

import (
	"errors"
	"fmt"
	"sync"

	"mdtool/bitmap"
)

// tracker is the dirty state and write geometry of one member.
type tracker struct {
	m     MemberGeom
	t     *bitmap.DirtyTracker
	start uint64 // BitmapStart
	unit  uint64 // SubPage widening unit (0: none)
	bound uint64 // storage-relative end no write may pass
}

func pow2(x uint64) bool { return x != 0 && x&(x-1) == 0 }

// widenUnit picks the size sub-page writes are widened to: io_opt when it
// is a power of two between the logical block and a page, a whole page
// when io_opt is larger than a page, else the physical block size when it
// is larger than the logical block, else nothing.
func widenUnit(m MemberGeom) uint64 {
	lbs, pbs, io := uint64(m.LogicalBlock), uint64(m.PhysicalBlock), uint64(m.IOOpt)
	switch {
	case io > bitmap.PageSize:
		return bitmap.PageSize
	case io > lbs && pow2(io):
		return io
	case pbs > lbs && pbs <= bitmap.PageSize:
		return pbs
	}
	return 0
}

// newTracker checks a member's geometry and returns a tracker with nothing
// dirty.
func (b *Bitmap) newTracker(m MemberGeom) (*tracker, error) {
	lbs := uint64(m.LogicalBlock)
	bad := func(msg string, args ...any) error {
		return fmt.Errorf("%w: member %d: %s", ErrGeometry, m.Index, fmt.Sprintf(msg, args...))
	}
	switch {
	case !pow2(lbs) || lbs < 512 || lbs > bitmap.PageSize:
		return nil, bad("logical block size %d", lbs)
	case m.PhysicalBlock != 0 && (!pow2(uint64(m.PhysicalBlock)) || m.PhysicalBlock < 512):
		return nil, bad("physical block size %d", m.PhysicalBlock)
	case m.BitmapStart < 0 || uint64(m.BitmapStart)%lbs != 0:
		return nil, bad("bitmap start %d not aligned to the logical block size %d", m.BitmapStart, lbs)
	case m.Limit < 0 || m.Limit%512 != 0:
		return nil, bad("limit %d not a multiple of 512", m.Limit)
	case m.Limit > 0 && m.Limit <= m.BitmapStart:
		return nil, bad("limit %d not after the bitmap start %d", m.Limit, m.BitmapStart)
	}
	g := bitmap.WriteGeometry{
		StorageBytes: b.bytes,
		LogicalBlock: m.LogicalBlock,
		Rule:         bitmap.RuleLatest,
	}
	if m.Limit > 0 {
		// Expressed as METADATA BITMAP DATA: boundary = "data offset".
		g.Offset = m.BitmapStart / 512
		g.DataOffset = uint64(m.Limit / 512)
	} else {
		// DATA METADATA BITMAP: no boundary.
		g.SuperStart = uint64(m.BitmapStart / 512)
	}
	if !b.subPage {
		// Whole pages: the tracker applies the kernel's rule itself.
		pbs := m.PhysicalBlock
		if pbs < m.LogicalBlock {
			pbs = 0
		}
		g.PhysicalBlock, g.IOOpt = pbs, m.IOOpt
	}
	dt, err := bitmap.NewDirtyTracker(g)
	if err != nil {
		return nil, fmt.Errorf("wib: member %d: %w", m.Index, err)
	}
	tr := &tracker{m: m, t: dt, start: uint64(m.BitmapStart), bound: b.pageCap}
	if m.Limit > 0 && uint64(m.Limit-m.BitmapStart) < tr.bound {
		tr.bound = uint64(m.Limit - m.BitmapStart)
	}
	if b.subPage {
		tr.unit = widenUnit(m)
	}
	return tr, nil
}

// extents takes the member's dirty state as write extents (storage
// offsets), leaving the tracker clean. On error the dirty state is kept.
func (tr *tracker) extents(subPage bool) ([]bitmap.Extent, error) {
	if !subPage {
		return tr.t.Flush(bitmap.WholePage, nil)
	}
	runs, err := tr.t.Flush(bitmap.SubPage, nil)
	if err != nil || tr.unit == 0 {
		return runs, err
	}
	out := runs[:0]
	for _, r := range runs {
		s, e := widen(r.Off, r.End(), tr.start, tr.unit, tr.bound)
		if n := len(out); n > 0 && out[n-1].End() >= s {
			if e > out[n-1].End() {
				out[n-1].Len = e - out[n-1].Off
			}
			continue
		}
		out = append(out, bitmap.Extent{Off: s, Len: e - s})
	}
	return out, nil
}

// widen expands the storage range [s, e) (logical-block aligned) of a
// bitmap starting at device byte start to device offsets aligned to unit.
// Each side is widened only where that stays inside the storage: the start
// not before the bitmap, the end not past bound (the bitmap's pages or the
// member's limit, whichever is first). This is the kernel's bitmap_io_size
// rule (io_opt-sized if it still ends before the boundary, else logical
// block sized) applied to a sub-page write.
func widen(s, e, start, unit, bound uint64) (uint64, uint64) {
	as := (start + s) / unit * unit
	if as >= start {
		s = as - start
	}
	ae := (start + e + unit - 1) / unit * unit
	if ae-start <= bound {
		e = ae - start
	}
	return s, e
}

// memberPlan is one member's part of a flush.
type memberPlan struct {
	tr   *tracker
	exts []bitmap.Extent
	data [][]byte
}

// planLocked turns the dirty state into per-member writes, copying the
// data from the image. It creates trackers for members it has not seen
// (they get the whole bitmap) and forgets members that are gone. On error
// nothing is consumed.
func (b *Bitmap) planLocked(members []MemberGeom) ([]memberPlan, error) {
	cur := make(map[int]*tracker, len(members))
	for _, m := range members {
		tr := b.trackers[m.Index]
		if tr == nil || tr.m != m {
			var err error
			if tr, err = b.newTracker(m); err != nil {
				return nil, err
			}
			tr.t.MarkAll()
		}
		cur[m.Index] = tr
	}
	b.trackers = cur
	plans := make([]memberPlan, 0, len(members))
	for _, m := range members {
		tr := cur[m.Index]
		exts, err := tr.extents(b.subPage)
		if err != nil {
			b.remarkLocked(plans)
			return nil, err
		}
		if len(exts) == 0 {
			continue
		}
		p := memberPlan{tr: tr, exts: exts, data: make([][]byte, len(exts))}
		for i, x := range exts {
			p.data[i] = append([]byte(nil), b.img[x.Off:x.End()]...)
		}
		plans = append(plans, p)
	}
	return plans, nil
}

// remarkLocked puts planned writes back into the dirty state.
func (b *Bitmap) remarkLocked(plans []memberPlan) {
	for _, p := range plans {
		if b.trackers[p.tr.m.Index] != p.tr {
			continue
		}
		for _, x := range p.exts {
			p.tr.t.MarkRange(x.Off, x.Len)
		}
	}
}

// dirtyLocked reports whether anything waits for a flush.
func (b *Bitmap) dirtyLocked() bool {
	if b.hdrDirty || len(b.pendingSet) > 0 {
		return true
	}
	for _, tr := range b.trackers {
		if tr.t.Dirty() {
			return true
		}
	}
	return false
}

// markChunkLocked records that a chunk's bit changed in the image.
func (b *Bitmap) markChunkLocked(c uint64) {
	for _, tr := range b.trackers {
		tr.t.MarkChunk(c)
	}
}

// putHeaderLocked encodes b.hdr into the image and queues it for writing.
func (b *Bitmap) putHeaderLocked() {
	copy(b.img, b.hdr.Marshal())
	for _, tr := range b.trackers {
		tr.t.MarkHeader()
	}
	b.hdrDirty = true
	b.hdrSeq++
}

// errNotPersisted would mean a bug in the flush bookkeeping.
var errNotPersisted = errors.New("wib: internal error: bitmap change not persisted by a successful flush")

// flushLocked writes everything dirty to every member; b.mu is held on
// entry and exit and released during the I/O. The caller must have
// checked that no flush is running. When writes fail only on members that
// the Target has meanwhile dropped from Members() (it failed them), the
// flush is retried on the remaining members, as md's write_sb_page
// restarts after md_super_wait reports an error.
func (b *Bitmap) flushLocked() error {
	b.flushing = true
	b.started++
	var err error
	for {
		var failed []int
		failed, err = b.attemptLocked()
		if err == nil || !b.goneLocked(failed) {
			break
		}
		b.stats.Retries++
	}
	b.finishLocked(err)
	return err
}

// goneLocked reports whether none of the failed members is listed by the
// Target any more (false when there are none: not an I/O failure).
func (b *Bitmap) goneLocked(failed []int) bool {
	if len(failed) == 0 {
		return false
	}
	for _, m := range b.t.Members() {
		for _, f := range failed {
			if m.Index == f {
				return false
			}
		}
	}
	return true
}

// attemptLocked is one try of a flush. It returns the members whose
// writes failed.
func (b *Bitmap) attemptLocked() ([]int, error) {
	plans, err := b.planLocked(b.t.Members())
	if err != nil {
		b.stats.Errors++
		return nil, err
	}
	hdrFirst, hdrSeq := b.hdrDirty, b.hdrSeq
	b.hdrDirty = false
	img := bitmap.BitsOf(b.img)
	var set []uint64
	for _, c := range b.pendingSet {
		if img.Test(c) {
			set = append(set, c)
		}
	}
	b.pendingSet = nil

	b.mu.Unlock()
	writes, nbytes, failed, err := writePlans(b.t, plans, hdrFirst)
	b.mu.Lock()

	b.stats.Writes += writes
	b.stats.Bytes += nbytes
	if writes > 0 {
		b.stats.Flushes++
		if len(set) > 0 {
			b.stats.SetFlushes++
		}
	}
	if err != nil {
		b.stats.Errors++
		b.remarkLocked(plans)
		b.pendingSet = append(b.pendingSet, set...)
		if hdrFirst {
			b.hdrDirty = true
		}
		return failed, err
	}
	for _, c := range set {
		p := &b.ctr[c]
		for {
			w := p.Load()
			if w&kernMask == 0 || p.CompareAndSwap(w, w|persisted) {
				break
			}
		}
	}
	if hdrFirst {
		b.hdrDone = hdrSeq
	}
	return nil, nil
}

func (b *Bitmap) finishLocked(err error) {
	b.flushing = false
	b.completed++
	b.lastFlushErr = err
	b.stats.LastErr = err
	b.cond.Broadcast()
}

// writePlans does the I/O of a flush: members in parallel; when the header
// changed, the extent holding it goes to every member before anything
// else does.
func writePlans(t Target, plans []memberPlan, hdrFirst bool) (writes, nbytes uint64, failed []int, err error) {
	var mu sync.Mutex
	var errs []error
	run := func(phase int) {
		do := func(p memberPlan) {
			var w, n uint64
			for i, x := range p.exts {
				isHdr := i == 0 && x.Off == 0
				if hdrFirst && (phase == 0) != isHdr {
					continue
				}
				if e := t.WriteBitmap(p.tr.m.Index, int64(x.Off), p.data[i]); e != nil {
					mu.Lock()
					errs = append(errs, &WriteError{Member: p.tr.m.Index, Off: int64(x.Off), Len: len(p.data[i]), Err: e})
					failed = append(failed, p.tr.m.Index)
					mu.Unlock()
					break
				}
				w++
				n += x.Len
			}
			mu.Lock()
			writes += w
			nbytes += n
			mu.Unlock()
		}
		if len(plans) == 1 {
			do(plans[0])
			return
		}
		var wg sync.WaitGroup
		for _, p := range plans {
			wg.Add(1)
			go func() {
				defer wg.Done()
				do(p)
			}()
		}
		wg.Wait()
	}
	if hdrFirst {
		run(0)
		if len(errs) > 0 {
			return writes, nbytes, failed, errors.Join(errs...)
		}
	}
	run(1)
	return writes, nbytes, failed, errors.Join(errs...)
}

// waitPersistedLocked waits until every chunk in cs is durable, running
// flushes itself when none is running (group commit: whoever finds the
// flush path idle writes everything that is pending).
func (b *Bitmap) waitPersistedLocked(cs []uint64) error {
	reg := b.started
	for {
		all := true
		for _, c := range cs {
			if b.ctr[c].Load()&persisted == 0 {
				all = false
				break
			}
		}
		if all {
			return nil
		}
		if b.completed > reg {
			// A flush that started after our bits were set has
			// finished without persisting them: it failed.
			if b.lastFlushErr != nil {
				return b.lastFlushErr
			}
			return errNotPersisted
		}
		if !b.flushing {
			b.flushLocked()
			continue
		}
		b.cond.Wait()
	}
}

// waitHeaderLocked waits until the current header is durable.
func (b *Bitmap) waitHeaderLocked() error {
	my, reg := b.hdrSeq, b.started
	for {
		if b.hdrDone >= my {
			return nil
		}
		if b.completed > reg {
			if b.lastFlushErr != nil {
				return b.lastFlushErr
			}
			return errNotPersisted
		}
		if !b.flushing {
			b.flushLocked()
			continue
		}
		b.cond.Wait()
	}
}

// syncLocked writes whatever is dirty, after any running flush.
func (b *Bitmap) syncLocked() error {
	for b.flushing {
		b.cond.Wait()
	}
	if !b.dirtyLocked() {
		return nil
	}
	return b.flushLocked()
}
