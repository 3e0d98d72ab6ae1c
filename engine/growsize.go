package engine

import (
	"context"
	"errors"
	"fmt"

	"mdtool/engine/layout"
	"mdtool/engine/wib"
	"mdtool/superblock"
)

// Size changes of a running array, after md.c (Linux 6.1): the members'
// own sizes (rdev_size_store -> super_1_rdev_size_change), the component
// size (update_size -> the personality's resize: raid1_resize,
// raid5_resize, raid10_resize, with md_bitmap_resize) and the exported
// size alone (array_size_store).

// ErrNoSpace is md's ENOSPC: a member has no room for the requested
// component size.
var ErrNoSpace = errors.New("engine: no space left on device")

// ErrTooBig is md's E2BIG: an array size larger than the members give.
var ErrTooBig = errors.New("engine: argument list too long")

// GrowSizeHook, when set (the test build sets it from its environment), is
// called at the steps of a size change: "members" (the members' own sizes
// written), "bitmap" (the bitmap resized, the superblocks not yet
// written) and "resync" (the first resync unit in the region a grow
// added). It may block: crash tests kill the process there.
var GrowSizeHook func(step string)

func growStep(step string) {
	if GrowSizeHook != nil {
		GrowSizeHook(step)
	}
}

// growState is what size changes keep between calls.
type growState struct {
	// resyncFrom is where the region the last grow added starts (sync
	// space sectors), for GrowSizeHook's "resync" step; 0: none.
	resyncFrom uint64
	// bmSpace is md's bitmap_info.space (sectors from the bitmap
	// superblock) once a resize needed it; 0: not known yet.
	bmSpace uint64
	// external is md's external_size: the exported size was set with
	// SetArraySize and no longer follows the component size.
	external bool
}

// SizeChange reports a component size change, in sectors per member.
type SizeChange struct {
	Old, New uint64
}

// GrowSize is `mdadm --grow --size`: every member in a role first takes
// its device's current size (its data_size grows to the end of the device;
// a 1.0 superblock moves to the new end unless a bitmap sits next to it),
// then the component size becomes sectors (0: the largest every member
// allows, counting spares). The bitmap is resized with it, the superblocks
// record the new size, and the region added is resynced from the old end
// (md's recovery_cp = old size) unless assumeClean. Shrinking is allowed
// as md allows it (the data beyond the new size is no longer served).
func (a *Array) GrowSize(sectors uint64, assumeClean bool) (SizeChange, error) {
	if a.journaled() {
		return SizeChange{}, ErrJournaled // raid5_resize: EINVAL with a log
	}
	if err := a.refuse090("growing the size"); err != nil {
		return SizeChange{}, err
	}
	if a.closed.Load() {
		return SizeChange{}, ErrClosed
	}
	if a.opts.ReadOnly {
		return SizeChange{}, ErrReadOnly
	}
	if !a.redundant() {
		return SizeChange{}, fmt.Errorf("%w: %v has no component size to change", ErrUnsupported, a.level)
	}
	if g, ok := a.geo.(*layout.RAID10Geometry); ok && g.FarCopies() > 1 && !g.Offset() {
		return SizeChange{}, fmt.Errorf("%w: raid10 far layouts cannot be resized", ErrUnsupported)
	}
	if a.BitmapFile() != "" {
		return SizeChange{}, ErrBitmapFileResize // bitmapfile.go
	}
	ctx, ok := a.claimIdle()
	if !ok {
		return SizeChange{}, ErrBusy
	}
	_ = ctx
	ch, err := a.growSizeClaimed(sectors, assumeClean)
	a.release(false)
	if err == nil {
		a.sc.disabled.Store(false)
		a.checkRecovery()
	}
	return ch, err
}

// claimIdle takes the sync slot when no action runs (a momentary hold by
// the background goroutine is waited out).
func (a *Array) claimIdle() (context.Context, bool) {
	for tries := 0; tries < 100; tries++ {
		if c, ok := a.claim(context.Background(), ""); ok {
			return c, true
		}
		if a.syncBusy() {
			return nil, false
		}
	}
	return nil, false
}

func (a *Array) growSizeClaimed(sectors uint64, assumeClean bool) (SizeChange, error) {
	a.suspend()
	defer a.resume()
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	old := a.geo.DevSectors(0)
	oldSync, _ := a.syncSize()
	var err error
	members := func() error { return a.memberSizes(sectors, old) }
	if wb, isWIB := a.bm.(*wib.Bitmap); isWIB {
		err = wb.Quiesce(members)
	} else {
		err = members()
	}
	if err != nil {
		return SizeChange{Old: old, New: old}, err
	}
	growStep("members")
	// update_size: the size every member allows.
	n := sectors
	for _, m := range a.all {
		if m.removed.Load() {
			continue
		}
		avail := m.ls.sb.DataSize
		if sectors == 0 && (n == 0 || n > avail) {
			n = avail
		}
		if avail < n {
			return SizeChange{Old: old, New: old}, ErrNoSpace
		}
	}
	if err := a.resizeTo(n, oldSync, assumeClean); err != nil {
		return SizeChange{Old: old, New: a.geo.DevSectors(0)}, err
	}
	nw := a.geo.DevSectors(0)
	growStep("bitmap")
	if err := a.updateSuperLocked(true); err != nil {
		return SizeChange{Old: old, New: nw}, err
	}
	return SizeChange{Old: old, New: nw}, nil
}

// resizeTo is the personality's resize to component size n: geometry,
// bitmap, array size, resync point, and the size every superblock will
// record. The superblocks are written by the caller.
func (a *Array) resizeTo(n, oldSync uint64, assumeClean bool) error {
	ref := *a.all[0].ls.sb
	ref.Size = n
	a.cfgMu.Lock()
	oldGeo, oldStriped, oldSize := a.geo, a.striped, a.size
	err := a.setGeometry(&ref)
	if err == nil && a.grow.external && oldSize > a.size {
		err = fmt.Errorf("%w: the array size set is larger than the new size", ErrUnsupported)
	}
	if err != nil {
		a.geo, a.striped = oldGeo, oldStriped
		a.size = oldSize
		a.cfgMu.Unlock()
		return err
	}
	if a.grow.external {
		a.size = oldSize // md_set_array_sectors does nothing
	}
	if sp, ok := a.pers.(*stripedPers); ok {
		sp.g = a.striped
	}
	dev := a.geo.DevSectors(0)
	for _, m := range a.all {
		m.ls.sb.Size = dev
	}
	a.cfgMu.Unlock()
	newSync, _ := a.syncSize()
	grown := newSync > oldSync
	switch {
	case assumeClean:
		a.meta.recoveryCP = superblock.MaxSector
	case grown && a.meta.recoveryCP > oldSync:
		a.meta.recoveryCP = oldSync
	}
	if grown && !assumeClean {
		a.grow.resyncFrom = oldSync
	}
	a.sc.checkpoint.Store(min(a.meta.recoveryCP, newSync))
	if wb, isWIB := a.bm.(*wib.Bitmap); isWIB {
		dirtyFrom := superblock.MaxSector
		if grown && !assumeClean {
			dirtyFrom = oldSync
		}
		if _, err := wb.Resize(newSync, a.bitmapSpace(wb), dirtyFrom); err != nil {
			return err
		}
	}
	return nil
}

// bitmapSpace is md's bitmap_info.space: for 1.0 the room up to the
// superblock (bitmap before it) or to 4 KiB past it; for 1.1/1.2 md
// assumes no growth and takes the sectors the bitmap uses now, the first
// time a resize asks.
func (a *Array) bitmapSpace(wb *wib.Bitmap) uint64 {
	if a.grow.bmSpace != 0 {
		return a.grow.bmSpace
	}
	m := a.all[0]
	off := int64(m.ls.sb.BitmapOffset)
	switch {
	case m.ls.minor > 0:
		h := wb.Header()
		a.grow.bmSpace = (h.Bytes() + 511) / 512
	case off > 0:
		a.grow.bmSpace = uint64(8 - off)
	default:
		a.grow.bmSpace = uint64(-off)
	}
	return a.grow.bmSpace
}

// memberSizes is rdev_size_store with size 0 (max) or sectors on every
// member in a role: super_1_rdev_size_change records the member's new
// data_size (and, for 1.0, moves its superblock to the new end of the
// device) and writes that superblock at once.
func (a *Array) memberSizes(sectors, cur uint64) error {
	for _, m := range a.all {
		if m.removed.Load() || m.role < 0 || m.State() == Faulty {
			continue
		}
		if sectors != 0 && sectors < cur {
			continue // component must fit device
		}
		devSize, err := regrow(m.dev)
		if err != nil {
			return err
		}
		devSec := uint64(devSize) / 512
		sb := m.ls.sb
		if a.opts.NotPersistent {
			// rdev_size_store of an array without superblocks: nothing
			// to write, the member is the whole device (data_offset
			// 0). md also takes a size beyond the device's end for
			// such a member (its I/O there then fails); the engine
			// keeps the device's size, so update_size refuses it.
			sb.DataSize = devSec
			continue
		}
		num := sectors
		var sbStart uint64
		if m.ls.offset < sb.DataOffset {
			if devSec < sb.DataOffset {
				continue
			}
			max := devSec - sb.DataOffset
			if num == 0 || num > max {
				num = max
			}
			sbStart = m.ls.offset
		} else {
			if a.hasBM || devSec < 16 {
				continue // minor version 0 with bitmap we can't move
			}
			sbStart = (devSec - 16) &^ 7
			max := sbStart - chooseBMSpace(devSec) - 8
			if num == 0 || num > max {
				num = max
			}
		}
		if num < cur {
			continue // rdev_size_store: the component must fit
		}
		sb.DataSize = num
		sb.SuperOffset = sbStart
		m.ls.offset = sbStart
		enc := sb.MarshalWithChecksum()
		size := (int64(len(enc)) + m.lbs - 1) / m.lbs * m.lbs
		size = min(size, int64(len(m.ls.raw)))
		out := make([]byte, size)
		copy(out, m.ls.raw[:size])
		copy(out, enc)
		copy(m.ls.raw, enc)
		if err := writeDurable(m.dev, out, int64(sbStart)*512); err != nil {
			return fmt.Errorf("engine: superblock of device %d: %w", m.index, err)
		}
	}
	return nil
}

// growResyncUnit calls GrowSizeHook's "resync" step for a resync unit at p in
// the region the last grow added.
func (a *Array) growResyncUnit(p uint64) {
	if GrowSizeHook != nil && a.grow.resyncFrom != 0 && p >= a.grow.resyncFrom {
		GrowSizeHook("resync")
	}
}

// chooseBMSpace is md's super_1_choose_bm_space.
func chooseBMSpace(devSize uint64) uint64 {
	switch {
	case devSize < 64*2:
		return 0
	case devSize-64*2 >= 200*1024*1024*2:
		return 128 * 2
	case devSize-4*2 > 8*1024*1024*2:
		return 64 * 2
	}
	return 4 * 2
}

// regrower is a device whose geometry can follow a change of its size.
type regrower interface {
	Regrow() (int64, error)
}

// regrow makes d (through test wrappers) take its current size and
// returns it.
func regrow(d Device) (int64, error) {
	for {
		switch x := d.(type) {
		case regrower:
			return x.Regrow()
		case *FaultDevice:
			d = x.Device
			continue
		case *CountingDevice:
			d = x.Device
			continue
		}
		return d.Geometry().Size, nil
	}
}

// Regrow re-reads the device's size (a file extended, a block device
// resized) and lets I/O reach all of it. The array calls it only while no
// I/O is in flight to the device.
func (d *FileDevice) Regrow() (int64, error) {
	size, err := d.CurrentSize()
	if err != nil {
		return 0, err
	}
	if size > d.geom.Size {
		d.geom.Size = size
	}
	return d.geom.Size, nil
}

// SetArraySize is md's array_size: the size the array exports, in sectors,
// not stored in the superblocks; 0 restores the size the component size
// gives ("default"). A size larger than that is ErrTooBig.
func (a *Array) SetArraySize(sectors uint64) error {
	if a.closed.Load() {
		return ErrClosed
	}
	a.suspend()
	defer a.resume()
	a.cfgMu.Lock()
	defer a.cfgMu.Unlock()
	full := a.geo.ArraySectors()
	if sectors == 0 {
		a.grow.external = false
		a.size = int64(full) * 512
		return nil
	}
	if sectors > full {
		return ErrTooBig
	}
	a.grow.external = true
	a.size = int64(sectors) * 512
	return nil
}

// ArraySizeSet reports whether the exported size was set with
// SetArraySize (md's external_size).
func (a *Array) ArraySizeSet() bool {
	a.cfgMu.RLock()
	defer a.cfgMu.RUnlock()
	return a.grow.external
}

// SuperOffset is the sector of the superblock of device index (as in
// MemberInfo.Device) as the array writes it now: a 1.0 superblock moves
// when GrowSize gives its member more room.
func (a *Array) SuperOffset(index int) (uint64, bool) {
	m := a.memberByIndex(index)
	if m == nil {
		return 0, false
	}
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	return m.ls.offset, true
}
