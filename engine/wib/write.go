package wib

import (
	"time"

	"mdtool/bitmap"
)

// StartWrite is md_bitmap_startwrite: call it before writing count
// sectors of sync space at sector. It counts the write in every chunk the
// range touches and, for chunks whose bit was clear, sets the bit and
// returns only after it is durable on every member. On error nothing is
// counted and the data write must not be issued.
//
// Chunks beyond the bitmap are ignored.
func (b *Bitmap) StartWrite(sector, count uint64) error {
	first, last, ok := b.chunkRange(sector, count)
	if !ok {
		return nil
	}
	locked := false
	var wait []uint64
	for c := first; c <= last; c++ {
		if b.fastStart(c) {
			continue
		}
		if !locked {
			b.mu.Lock()
			locked = true
		}
		if b.slowStartLocked(c) {
			wait = append(wait, c)
		}
	}
	if !locked {
		return nil
	}
	defer b.mu.Unlock()
	if len(wait) == 0 {
		return nil
	}
	if err := b.waitPersistedLocked(wait); err != nil {
		wake := false
		for c := first; c <= last; c++ {
			wake = b.dec(c, false) || wake
		}
		if wake {
			b.cond.Broadcast()
		}
		return err
	}
	return nil
}

// fastStart counts a write in a chunk whose bit is set and durable, with
// one compare-and-swap and no lock. It reports false when the slow path
// is needed (bit clear or not yet durable, or counter at COUNTER_MAX).
func (b *Bitmap) fastStart(c uint64) bool {
	p := &b.ctr[c]
	for {
		w := p.Load()
		n := w & cntMask
		if w&persisted == 0 || n == 0 || n >= cntMax {
			return false
		}
		nw := w
		if w&kernMask == 1 {
			nw = w&^kernMask | 2
		}
		if p.CompareAndSwap(w, nw+1) {
			return true
		}
	}
}

// slowStartLocked counts a write in a chunk under b.mu, setting its bit
// in the image when it was clear. It waits while the counter is at
// COUNTER_MAX. It reports whether the bit is not yet durable.
func (b *Bitmap) slowStartLocked(c uint64) bool {
	p := &b.ctr[c]
	for {
		w := p.Load()
		if w&cntMask >= cntMax {
			b.cond.Wait()
			continue
		}
		nw := w
		switch w & kernMask {
		case 0:
			nw = 2
		case 1:
			nw = w&^kernMask | 2
		}
		nw++
		if !p.CompareAndSwap(w, nw) {
			continue
		}
		if w&kernMask == 0 {
			bitmap.BitsOf(b.img).Set(c)
			b.markChunkLocked(c)
			b.pendingSet = append(b.pendingSet, c)
		}
		return nw&persisted == 0
	}
}

// EndWrite is md_bitmap_endwrite: call it when the data write counted by
// StartWrite has completed on all members (ok) or not (ok=false: failed,
// or the array is degraded; the chunk is then kept NEEDED until a resync).
func (b *Bitmap) EndWrite(sector, count uint64, ok bool) {
	first, last, okr := b.chunkRange(sector, count)
	if !okr {
		return
	}
	if ok && !b.degraded.Load() && b.evClear.Load() < b.events.Load() {
		b.mu.Lock()
		if ev := b.events.Load(); !b.degraded.Load() && b.evClear.Load() < ev {
			b.evClear.Store(ev)
			b.needSync = true
		}
		b.mu.Unlock()
	}
	wake := false
	for c := first; c <= last; c++ {
		wake = b.dec(c, !ok) || wake
	}
	if wake {
		b.mu.Lock()
		b.cond.Broadcast()
		b.mu.Unlock()
	}
}

// dec counts one write out of a chunk, optionally setting NEEDED. It
// reports whether the counter was at COUNTER_MAX (waiters to wake).
func (b *Bitmap) dec(c uint64, needed bool) bool {
	p := &b.ctr[c]
	for {
		w := p.Load()
		if w&cntMask == 0 {
			return false // unbalanced; nothing to count out
		}
		nw := w
		if needed {
			nw |= neededBit
		}
		nw--
		if p.CompareAndSwap(w, nw) {
			if nw&kernMask <= 2 {
				if g := &b.pend[c/counterGroup]; !g.Load() {
					g.Store(true)
				}
			}
			return w&cntMask == cntMax
		}
	}
}

// Tick is one pass of the kernel's bitmap daemon (md_bitmap_daemon_work),
// done only when daemon_sleep has passed since the last pass: it writes the
// new events_cleared into the header when a write advanced it, writes the
// bits cleared by the previous pass, moves idle counters 2 -> 1 and clears
// the in-memory bit of counters at 1, and flushes.
func (b *Bitmap) Tick(now time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Before(b.lastRun.Add(b.sleep)) {
		return nil
	}
	b.lastRun = now
	b.daemonLocked()
	return b.syncLocked()
}

// Flush is md_bitmap_flush, for a clean stop: three daemon passes
// regardless of time (clearing every bit that has no write in flight and
// is not NEEDED), then the header with the current events.
func (b *Bitmap) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := 0; i < 3; i++ {
		b.daemonLocked()
		if err := b.syncLocked(); err != nil {
			return err
		}
	}
	b.lastRun = b.clock()
	b.hdr.Events = b.events.Load()
	b.hdr.EventsCleared = b.evClear.Load()
	b.putHeaderLocked()
	return b.waitHeaderLocked()
}

// daemonLocked does the counter work of a daemon pass.
func (b *Bitmap) daemonLocked() {
	// Bits cleared by the previous pass go out now (the kernel's
	// BITMAP_PAGE_PENDING -> BITMAP_PAGE_NEEDWRITE).
	for _, c := range b.clearing {
		if b.ctr[c].Load()&kernMask == 0 {
			b.markChunkLocked(c)
		}
	}
	b.clearing = b.clearing[:0]
	if b.needSync {
		b.needSync = false
		b.hdr.EventsCleared = b.evClear.Load()
		b.putHeaderLocked()
	}
	img := bitmap.BitsOf(b.img)
	for g := range b.pend {
		if !b.pend[g].Load() {
			continue
		}
		b.pend[g].Store(false)
		lo := uint64(g) * counterGroup
		hi := min(lo+counterGroup, b.chunks)
		for c := lo; c < hi; c++ {
			p := &b.ctr[c]
			for {
				w := p.Load()
				k := w & kernMask
				if k == 1 && !b.needSync {
					if !p.CompareAndSwap(w, 0) {
						continue
					}
					img.Clear(c)
					b.clearing = append(b.clearing, c)
				} else if k == 1 || k == 2 {
					if !p.CompareAndSwap(w, w&^kernMask|1) {
						continue
					}
					b.pend[g].Store(true)
				}
				break
			}
		}
	}
}

// SetEvents is md_bitmap_update_sb: it records the array's events and
// degraded state and writes the header (events, events_cleared, state
// without BITMAP_WRITE_ERROR) durably to every member. Call it before
// writing the md superblocks with these events. Events going backwards
// (an array rolled back to read-only) pull events_cleared back with them.
func (b *Bitmap) SetEvents(events uint64, degraded bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.events.Store(events)
	b.degraded.Store(degraded)
	ec := b.evClear.Load()
	if events < ec {
		ec = events
		b.evClear.Store(ec)
	}
	b.hdr.Events = events
	b.hdr.EventsCleared = ec
	b.hdr.State &^= bitmap.StateWriteError
	b.putHeaderLocked()
	return b.waitHeaderLocked()
}

// StartSync is md_bitmap_start_sync for the chunk holding sector: it
// reports whether the chunk must be resynced (RESYNC or NEEDED) and how
// many sectors from sector to the chunk's end that answer covers. Unless
// degraded it turns NEEDED into RESYNC. Beyond the bitmap: false.
func (b *Bitmap) StartSync(sector uint64, degraded bool) (needed bool, sectors uint64) {
	cs := uint64(1) << b.shift
	sectors = cs - sector&(cs-1)
	c := sector >> b.shift
	if c >= b.chunks {
		return false, sectors
	}
	p := &b.ctr[c]
	for {
		w := p.Load()
		switch {
		case w&resyncBit != 0:
			return true, sectors
		case w&neededBit != 0:
			if degraded {
				return true, sectors
			}
			if !p.CompareAndSwap(w, (w|resyncBit)&^neededBit) {
				continue
			}
			return true, sectors
		}
		return false, sectors
	}
}

// EndSync is md_bitmap_end_sync for the chunk holding sector: the resync
// of the chunk is over (aborted: not done, keep it NEEDED). It returns the
// sectors from sector to the chunk's end.
func (b *Bitmap) EndSync(sector uint64, aborted bool) (sectors uint64) {
	cs := uint64(1) << b.shift
	sectors = cs - sector&(cs-1)
	c := sector >> b.shift
	if c >= b.chunks {
		return sectors
	}
	p := &b.ctr[c]
	for {
		w := p.Load()
		if w&resyncBit == 0 {
			return sectors
		}
		nw := w &^ resyncBit
		pending := false
		if nw&neededBit == 0 && aborted {
			nw |= neededBit
		} else if nw&kernMask <= 2 {
			pending = true
		}
		if p.CompareAndSwap(w, nw) {
			if pending {
				b.pend[c/counterGroup].Store(true)
			}
			return sectors
		}
	}
}

// CloseSync is md_bitmap_close_sync: the resync is over; every chunk still
// marked RESYNC is ended as done.
func (b *Bitmap) CloseSync() {
	cs := uint64(1) << b.shift
	for c := uint64(0); c < b.chunks; c++ {
		b.EndSync(c*cs, false)
	}
}
