package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"mdtool/bitmap"
	"mdtool/engine/layout"
	"mdtool/superblock"
)

// Adding and removing the write-intent bitmap of a running array, as
// mdadm --grow --bitmap and md's sysfs bitmap/location do (Linux 6.1
// location_store, md_bitmap_create/md_bitmap_load, md_update_sb):
//
//   - add: mdadm writes a bitmap superblock (events 0) and all-ones bits to
//     every in-sync member (AddBitmap's area step); md then reads it back,
//     finds it out of date (0 < events) and, with the array suspended,
//     rewrites every page all-ones and the header with events =
//     events_cleared = the array's events; the bitmap is in use from then
//     on. Only then are the superblocks rewritten (MD_SB_CHANGE_DEVS:
//     events+1, feature bit and bitmap_offset), the bitmap header first.
//     A crash before the superblocks say so leaves an array without a
//     bitmap (a dirty one is fully resynced); after, a bitmap that covers
//     every write since it was loaded.
//   - remove: with the array suspended (no write in flight, none starting)
//     the bitmap is dropped and the superblocks rewritten without it
//     (events+1); writes resume without it. md drops it before its
//     superblock update and resumes writes in between; here both happen
//     while writes are held back, so no write runs unprotected while a
//     superblock still names the bitmap. The bitmap area is left as it
//     was (md does not touch it).
//
// Both refuse while a sync action runs or is pending (location_store:
// EBUSY when mddev->recovery or a sync thread).

// ErrBitmapPresent: the array already has a bitmap (mdadm: "bitmap already
// present on DEV").
var ErrBitmapPresent = errors.New("engine: the array already has a bitmap")

// ErrNoBitmap: the array has no bitmap to remove (mdadm: "no bitmap found
// on DEV").
var ErrNoBitmap = errors.New("engine: the array has no bitmap")

// HasBitmap says whether the array runs with a write-intent bitmap.
func (a *Array) HasBitmap() bool {
	a.bmMu.RLock()
	defer a.bmMu.RUnlock()
	return a.hasBM
}

// BitmapSyncSectors is the bitmap's sync_size for this array (md's
// resync_max_sectors): the array size for raid10, else the component size.
func (a *Array) BitmapSyncSectors() uint64 {
	if a.level == layout.RAID10 {
		return a.geo.ArraySectors()
	}
	return a.geo.DevSectors(0)
}

// growPause is a test seam: when set, it is called at the named points of
// AddBitmap and RemoveBitmap ("add-area", "add-loaded", "remove-dropped",
// "super-written") so that tests can stop the process there.
var growPause func(point string)

// SetGrowPause installs f as the pause hook of AddBitmap/RemoveBitmap (nil
// removes it). For test builds only.
func SetGrowPause(f func(point string)) { growPause = f }

func pauseAt(point string) {
	if f := growPause; f != nil {
		f(point)
	}
}

// AddBitmap adds an internal bitmap at bitmap_offset offset (sectors from
// the superblock). area is the bitmap superblock mdadm writes (events 0;
// chunk, daemon sleep, sync size of its choice): it is written with
// all-ones bits to every in-sync member, then loaded as md loads it.
func (a *Array) AddBitmap(offset int32, area bitmap.Header) error {
	if a.journaled() {
		return ErrJournaled // md_bitmap_create: "array with journal cannot have bitmap"
	}
	release, err := a.beginBitmapChange()
	if err != nil {
		return err
	}
	defer release()
	if a.HasBitmap() {
		return ErrBitmapPresent
	}
	if err := a.writeBitmapAreas(offset, &area); err != nil {
		return err
	}
	pauseAt("add-area")
	a.suspend()
	defer a.resume()
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	src := a.bitmapSource()
	if src == nil {
		return fmt.Errorf("%w: no in-sync member", ErrFailed)
	}
	// md_bitmap_create: read what mdadm wrote; the member offsets first,
	// so that the runtime writes where the superblocks will point.
	a.cfgMu.Lock()
	old := make(map[*member]int32, len(a.all))
	for _, m := range a.all {
		old[m] = m.ls.sb.BitmapOffset
		m.ls.sb.BitmapOffset = offset
	}
	a.cfgMu.Unlock()
	undo := func() {
		a.cfgMu.Lock()
		for m, o := range old {
			m.ls.sb.BitmapOffset = o
		}
		a.cfgMu.Unlock()
	}
	h, full, err := readBitmap(src.dev, src.ls)
	if err != nil {
		undo()
		return fmt.Errorf("engine: reading the new bitmap: %w", err)
	}
	h.SyncSize = a.BitmapSyncSectors() // md_bitmap_update_sb: resync_max_sectors
	if err := h.Validate(); err != nil {
		undo()
		return fmt.Errorf("engine: new bitmap: %w", err)
	}
	if err := h.CheckFor(a.bitmapUUID(), a.meta.events); err != nil && !errors.As(err, new(*bitmap.StaleError)) {
		undo()
		return fmt.Errorf("engine: new bitmap: %w", err)
	}
	rt, err := a.startAddedBitmap(h, full[bitmap.HeaderSize:])
	if err != nil {
		undo()
		return err
	}
	a.bmMu.Lock()
	a.bm = rt
	a.hasBM = true
	a.bmMu.Unlock()
	pauseAt("add-loaded")
	// MD_SB_CHANGE_DEVS: the superblocks say so, bitmap header first.
	a.meta.changeDevs = true
	err = a.updateSuperLocked(true)
	pauseAt("super-written")
	return err
}

// startAddedBitmap starts the runtime on a just-written bitmap: out of
// date, so md_bitmap_load writes it all-ones with events = events_cleared
// = the array's events; bits before recovery_cp are not NEEDED (the
// daemon clears them), as for any bitmap load.
func (a *Array) startAddedBitmap(h *bitmap.Header, bits []byte) (writeIntent, error) {
	b, err := a.newWIB(h, bits)
	if err != nil {
		return nil, err
	}
	if _, ok := b.(noBitmap); ok {
		return nil, fmt.Errorf("%w: bitmap runtime not available", ErrUnsupported)
	}
	return b, nil
}

// RemoveBitmap removes the array's bitmap (mdadm --grow --bitmap=none).
func (a *Array) RemoveBitmap() error {
	release, err := a.beginBitmapChange()
	if err != nil {
		return err
	}
	defer release()
	if !a.HasBitmap() {
		return ErrNoBitmap
	}
	a.suspend()
	defer a.resume()
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	a.bmMu.Lock()
	wasFile := a.bmFile != nil
	a.bm = noBitmap{}
	a.hasBM = false
	a.bmFile = nil // a bitmap file is let go (SET_BITMAP_FILE -1); its owner closes it
	a.bmMu.Unlock()
	pauseAt("remove-dropped")
	if wasFile {
		// set_bitmap_file(-1) only destroys the bitmap: the md
		// superblocks never recorded it, and no event is counted.
		return nil
	}
	a.meta.changeDevs = true
	err = a.updateSuperLocked(true)
	pauseAt("super-written")
	return err
}

// beginBitmapChange takes the sync slot for the change (refusing while an
// action runs or a resync is pending) and keeps Close out until release.
func (a *Array) beginBitmapChange() (release func(), err error) {
	if a.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	if !a.redundant() {
		return nil, fmt.Errorf("%w: %v has no bitmap", ErrUnsupported, a.level)
	}
	a.closeMu.Lock()
	if a.isClosed {
		a.closeMu.Unlock()
		return nil, ErrClosed
	}
	if a.failed.Load() {
		a.closeMu.Unlock()
		return nil, ErrFailed
	}
	_, ok := a.claim(context.Background(), ActionIdle)
	if !ok {
		a.closeMu.Unlock()
		return nil, fmt.Errorf("%w: a sync action is running", ErrBusy)
	}
	a.meta.mu.Lock()
	pending := a.meta.recoveryCP != superblock.MaxSector
	a.meta.mu.Unlock()
	if pending || a.needsRecovery() || a.reshaping() {
		// (md's location_store and update_array_info: EBUSY while
		// mddev->recovery has a bit, as a recorded reshape always does)
		a.release(false)
		a.closeMu.Unlock()
		return nil, fmt.Errorf("%w: a resync, recovery or reshape is pending", ErrBusy)
	}
	return func() {
		a.release(false)
		a.closeMu.Unlock()
	}, nil
}

// needsRecovery says whether a member is being recovered.
func (a *Array) needsRecovery() bool {
	a.cfgMu.RLock()
	defer a.cfgMu.RUnlock()
	return a.recovering() > 0
}

// bitmapSource is the member md_bitmap_create reads from: the first
// in-sync member.
func (a *Array) bitmapSource() *member {
	a.cfgMu.RLock()
	defer a.cfgMu.RUnlock()
	for _, m := range a.roles {
		if m != nil && m.State() == InSync {
			return m
		}
	}
	return nil
}

// writeBitmapAreas is mdadm's part of the add: header (events 0) and
// all-ones bits, padded as write_bitmap1 pads them, on every in-sync
// member, durably. The rest of the last logical block is kept.
func (a *Array) writeBitmapAreas(offset int32, h *bitmap.Header) error {
	buf := bitmap.NewArea(h, 0xff, bitmap.AreaAlign(offset))
	if a.is090() {
		buf = area090(buf)
	}
	a.cfgMu.RLock()
	var ms []*member
	for _, m := range a.roles {
		if m != nil && m.State() == InSync {
			ms = append(ms, m)
		}
	}
	a.cfgMu.RUnlock()
	for _, m := range ms {
		off := (int64(m.ls.offset) + int64(offset)) * 512
		if err := m.checkBitmapRoom(off, int64(len(buf))); err != nil {
			return err
		}
		p := buf
		if rem := int64(len(buf)) % m.lbs; rem != 0 {
			n := int64(len(buf)) + m.lbs - rem
			p = make([]byte, n)
			if err := readFull(m.dev, p[n-m.lbs:], off+n-m.lbs); err != nil {
				return fmt.Errorf("engine: reading around the bitmap: %w", err)
			}
			copy(p, buf)
		}
		if err := writeDurable(m.dev, p, off); err != nil {
			return fmt.Errorf("engine: writing the bitmap: %w", err)
		}
	}
	return nil
}

// checkBitmapRoom refuses a bitmap area [off, off+n) (bytes) that would
// overlap the member's superblock or data.
func (m *member) checkBitmapRoom(off, n int64) error {
	sb := int64(m.ls.offset) * 512
	dataEnd := m.dataOff + int64(m.ls.sb.DataSize)*512
	switch {
	case off < sb+4096 && off+n > sb:
		return fmt.Errorf("%w: the bitmap would overlap the superblock", ErrUnsupported)
	case off < dataEnd && off+n > m.dataOff:
		return fmt.Errorf("%w: the bitmap would overlap the data", ErrUnsupported)
	case off+n > m.dev.Geometry().Size:
		return fmt.Errorf("%w: the bitmap would end beyond the device", ErrUnsupported)
	}
	return nil
}

// tickBitmap runs the bitmap daemon once (the bitmap may be swapped by
// AddBitmap/RemoveBitmap meanwhile).
func (a *Array) tickBitmap(now time.Time) error {
	a.bmMu.RLock()
	defer a.bmMu.RUnlock()
	return a.bm.Tick(now)
}
