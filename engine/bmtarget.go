package engine

import (
	"errors"
	"fmt"

	"mdtool/bitmap"

	"mdtool/engine/wib"
)

// bitmapTarget gives the bitmap runtime access to the array's members.
type bitmapTarget struct{ a *Array }

// WriteBitmap writes p at off from the bitmap superblock of member index
// (an index into Array.all), durably. A failed write makes the member
// faulty, as md_error does from the bitmap's write path.
func (t bitmapTarget) WriteBitmap(index int, off int64, p []byte) error {
	a := t.a
	a.cfgMu.RLock()
	if index < 0 || index >= len(a.all) {
		a.cfgMu.RUnlock()
		return fmt.Errorf("engine: bitmap write to unknown member %d", index)
	}
	m := a.all[index]
	if !m.writable() {
		a.cfgMu.RUnlock()
		return nil
	}
	start := (int64(m.ls.offset) + int64(m.ls.sb.BitmapOffset)) * 512
	err := writeDurable(m.dev, p, start+off) // m.dev changes under cfgMu (Replace)
	a.cfgMu.RUnlock()
	if err != nil {
		// md_error from the bitmap's write path: the member leaves
		// Members() at once, so the runtime retries without it; the
		// superblocks are written as soon as the superblock lock is free
		// (this may run under it, from SetEvents).
		if a.markFaulty(m, err) {
			go a.recordFailures()
		}
		return err
	}
	return nil
}

// Members lists the active, non-faulty members (md writes bitmap pages to
// every rdev with a role that is not faulty).
func (t bitmapTarget) Members() []wib.MemberGeom {
	a := t.a
	var out []wib.MemberGeom
	a.cfgMu.RLock()
	defer a.cfgMu.RUnlock()
	for i, m := range a.all {
		if m.role < 0 || !m.writable() {
			continue
		}
		g := m.dev.Geometry()
		start := (int64(m.ls.offset) + int64(m.ls.sb.BitmapOffset)) * 512
		limit := m.dataOff
		if m.newOff > 0 && m.newOff < limit {
			limit = m.newOff // a reshape moving the data down
		}
		switch {
		case m.ls.sb.BitmapOffset < 0:
			limit = int64(m.ls.offset) * 512 // 1.0: bitmap before the superblock
		case m.dataOff < start:
			limit = 0 // 1.0, bitmap after the superblock: nothing behind it
		}
		if bb := m.ls.sb.BBLogOffset; m.ls.sb.BBLogSize != 0 && bb > m.ls.sb.BitmapOffset {
			if l := (int64(m.ls.offset) + int64(bb)) * 512; limit == 0 || l < limit {
				limit = l // the bad-block log comes first
			}
		}
		out = append(out, wib.MemberGeom{Index: i, LogicalBlock: g.LogicalBlock, PhysicalBlock: g.PhysicalBlock,
			IOOpt: g.IOOpt, BitmapStart: start, Limit: limit})
	}
	return out
}

// newWIB starts the write-intent bitmap runtime for an array whose bitmap
// header and bits were read from a member (md_bitmap_create/load).
func (a *Array) newWIB(h *bitmap.Header, bits []byte) (writeIntent, error) {
	cfg := wib.Config{
		Header:   *h,
		Bits:     bits,
		SubPage:  true,
		Clock:    a.opts.Clock,
		Events:   a.meta.events,
		Degraded: a.degraded() > 0,
	}
	cfg.Header = a.bitmapSyncSize(cfg.Header, len(bits))
	// md_bitmap_load: chunks at or after recovery_cp are NEEDED when the
	// array is not degraded (or nothing was cleared since it degraded);
	// otherwise every set bit is.
	if a.degraded() == 0 || h.EventsCleared == a.meta.events {
		cfg.NeededFrom = a.meta.recoveryCP
	}
	switch err := a.checkBitmapHeader(h); {
	case err == nil:
	case errors.As(err, new(*bitmap.StaleError)):
		a.opts.Logf("md: %v", err)
		cfg.Stale = true
		if a.opts.ReadOnly {
			return noBitmap{}, nil
		}
	default:
		return nil, fmt.Errorf("engine: bitmap: %w", err)
	}
	if a.opts.ReadOnly {
		return noBitmap{}, nil
	}
	return wib.New(cfg, a.wibTarget())
}

// BitmapStats returns the write-intent bitmap counters; ok is false for an
// array without a bitmap.
func (a *Array) BitmapStats() (st wib.Stats, ok bool) {
	a.bmMu.RLock()
	defer a.bmMu.RUnlock()
	if b, isWIB := a.bm.(*wib.Bitmap); isWIB {
		return b.Stats(), true
	}
	return st, false
}
