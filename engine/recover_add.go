package engine

import (
	"bytes"
	crand "crypto/rand"
	"fmt"

	"mdtool/bitmap"
	"mdtool/engine/wib"
	"mdtool/superblock"
)

// AddDevice adds dev to the running array, like mdadm --add / --re-add:
// it validates dev (size, block size), writes its superblock (a spare of
// this array, or its old role for a re-add) and starts a recovery onto it
// in the background when a role is missing or faulty. It returns the new
// device index (as in MemberInfo.Device). Nothing is written to dev when
// it is refused.
//
// A fresh device gets what mdadm 4.2's add_to_super1 + write_init_super1
// write: the array's superblock with a new dev_number (the first free one
// from raid_disks on), a random device_uuid, events 0, its own data area
// and, with an internal bitmap, the bitmap header followed by all-ones
// bits. The kernel then rewrites its superblock as a spare (md_update_sb),
// which the engine does at once. A re-add keeps the device's superblock
// and role (md's saved_raid_disk) and is recovered only where the bitmap
// has bits set.
func (a *Array) AddDevice(dev Device, opts AddOptions) (int, error) {
	if a.closed.Load() {
		return -1, ErrClosed
	}
	if opts.Replacement >= 0 {
		if err := a.refuse090("replacing a device"); err != nil {
			return -1, err
		}
	}
	if a.opts.ReadOnly {
		return -1, ErrReadOnly
	}
	if !a.redundant() && !a.multipath() {
		return -1, fmt.Errorf("%w: %v takes no spares", ErrUnsupported, a.level)
	}
	if a.failed.Load() {
		return -1, fmt.Errorf("%w: using --add cannot work on a failed array", ErrFailed)
	}
	if opts.Replacement >= a.n {
		return -1, fmt.Errorf("engine: no role %d to replace", opts.Replacement)
	}
	g := dev.Geometry()
	lbs := int64(g.LogicalBlock)
	if lbs < 512 {
		lbs = 512
	}
	if lbs > a.block {
		return -1, fmt.Errorf("engine: device logical block size %d is larger than the array's %d", lbs, a.block)
	}
	var m *member
	var err error
	if opts.ReAdd && a.opts.NotPersistent {
		m, err = a.prepareReAddBuilt(dev) // build_readd.go
	} else if a.opts.NotPersistent {
		m, err = a.prepareAddBuilt(dev, opts) // build_readd.go
	} else if opts.ReAdd {
		m, err = a.prepareReAdd(dev, opts.Faulty)
	} else if a.is090() {
		m, err = a.prepareAdd090(dev, opts)
	} else {
		m, err = a.prepareAdd(dev, opts)
	}
	if err != nil {
		return -1, err
	}
	m.lbs = lbs
	m.memory = g.Memory
	m.hotAdded = true
	m.writeMostly = opts.WriteMostly || (opts.ReAdd && m.ls.sb.DevFlags&superblock.DevFlagWriteMostly != 0)
	m.failFast = opts.FailFast || (opts.ReAdd && !opts.NoFailFast && m.ls.sb.DevFlags&superblock.DevFlagFailFast != 0)
	m.state.Store(uint32(Spare))

	a.suspend()
	a.meta.mu.Lock()
	a.cfgMu.Lock()
	if opts.DeferRecovery {
		// Held before the spare becomes visible: an assignSpares
		// waiting for this suspension must not take it alone.
		a.holdSpares()
	}
	m.index = len(a.devs)
	a.devs = append(a.devs, dev)
	a.all = append(a.all, m)
	a.cfgMu.Unlock()
	a.meta.changeDevs = true
	uerr := a.updateSuperLocked(true)
	a.meta.mu.Unlock()
	a.resume()
	if uerr != nil {
		a.opts.Logf("md: superblock update after adding device %d: %v", m.index, uerr)
	}
	if m.State() == Faulty {
		return m.index, fmt.Errorf("engine: writing the superblock of the new device failed: %v", uerr)
	}
	a.opts.Logf("md: added device %d (re-add: %v)", m.index, opts.ReAdd)
	if opts.Replacement >= 0 {
		if err := a.Replace(opts.Replacement, m.index); err != nil {
			return m.index, err
		}
		return m.index, nil
	}
	a.sc.disabled.Store(false)
	if opts.DeferRecovery {
		a.holdSpares()
		return m.index, nil
	}
	a.sc.spareHold.Store(0)
	a.checkRecovery()
	return m.index, nil
}

// sample returns a copy of the superblock of an in-sync member (the one
// mdadm loads to copy from) and that member.
func (a *Array) sample() (*superblock.Superblock, *member) {
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	a.cfgMu.RLock()
	defer a.cfgMu.RUnlock()
	for _, m := range a.roles {
		if m != nil && m.State() == InSync && !m.removed.Load() {
			sb := *m.ls.sb
			sb.DevRoles = append([]uint16(nil), m.ls.sb.DevRoles...)
			return &sb, m
		}
	}
	return nil, nil
}

// prepareAdd validates dev as a new spare and writes its superblock (and
// bitmap) the way mdadm --add does.
func (a *Array) prepareAdd(dev Device, opts AddOptions) (*member, error) {
	ref, src := a.sample()
	if ref == nil {
		return nil, fmt.Errorf("%w: no in-sync member to copy the superblock from", ErrFailed)
	}
	minor := src.ls.minor
	dsize := uint64(dev.Geometry().Size) >> 9
	sb := *ref
	sb.DevRoles = append([]uint16(nil), ref.DevRoles...)
	// write_init_super1 keeps the events, dev_number and device_uuid of
	// a superblock of this array it finds on the device, but mdadm 4.2
	// first zeroes any md superblock there (its Kill loop), so a former
	// member gets a new device_uuid, events 0 and the dev_number chosen
	// here, as a new device does (Linux 6.1 + mdadm 4.2: a raid1 member
	// failed, removed and added again has Number 2 and a new Device UUID).
	used := map[uint32]bool{}
	a.cfgMu.RLock()
	for _, o := range a.all {
		if !o.removed.Load() {
			used[o.ls.sb.DevNumber] = true
			if sameDevice(o.dev, dev) {
				a.cfgMu.RUnlock()
				return nil, ErrBusy
			}
		}
	}
	a.cfgMu.RUnlock()
	num := uint32(a.n)
	for used[num] {
		num++
	}
	sb.Events = 0
	if _, err := crand.Read(sb.DeviceUUID[:]); err != nil {
		return nil, err
	}
	if num >= 1920 { // MAX_DEVS of 1.x with 4 KiB superblocks
		return nil, fmt.Errorf("engine: no free device number")
	}
	sb.DevNumber = num
	if num >= sb.MaxDev {
		sb.MaxDev = num + 1
	}
	if len(sb.DevRoles) < int(sb.MaxDev) {
		r := make([]uint16, sb.MaxDev)
		copy(r, sb.DevRoles)
		for i := len(sb.DevRoles); i < len(r); i++ {
			r[i] = superblock.RoleSpare
		}
		sb.DevRoles = r
	}
	sb.DevRoles[num] = superblock.RoleSpare
	sb.DevFlags = 0
	if opts.WriteMostly {
		sb.DevFlags |= superblock.DevFlagWriteMostly
	}
	if opts.FailFast {
		sb.DevFlags |= superblock.DevFlagFailFast
	}
	sb.FeatureMap &^= superblock.FeatureRecoveryOffset | superblock.FeatureRecoveryBitmap |
		superblock.FeatureReplacement | superblock.FeatureBadBlocks
	sb.RecoveryOffset = 0
	sb.CntCorrectedRead = 0
	need := a.geo.DevSectors(0)
	switch minor {
	case 0:
		gap := ref.SuperOffset - ref.DataSize // bitmap + bad-block log space
		if ref.DataSize > ref.SuperOffset {
			gap = 0
		}
		if dsize < 24 {
			return nil, fmt.Errorf("engine: device not large enough to join the array")
		}
		sbOff := (dsize - 16) &^ 7
		sb.SuperOffset = sbOff
		if sbOff < gap+sb.DataOffset {
			return nil, fmt.Errorf("engine: device not large enough to join the array")
		}
		sb.DataSize = sbOff - gap - sb.DataOffset
	default:
		sb.SuperOffset = 0
		if minor == 2 {
			sb.SuperOffset = 8
		}
		if dsize <= sb.DataOffset {
			return nil, fmt.Errorf("engine: device not large enough to join the array")
		}
		sb.DataSize = dsize - sb.DataOffset
	}
	if err := a.placeAdded(&sb, minor, need); err != nil {
		return nil, err
	}
	if sb.DataSize < need {
		return nil, fmt.Errorf("engine: device not large enough to join the array (%d sectors of data, %d needed)", sb.DataSize, need)
	}
	if err := sb.CheckDevice(dsize); err != nil {
		return nil, fmt.Errorf("engine: new superblock does not fit the device: %w", err)
	}
	var bmArea []byte
	if a.hasBM {
		b, ok := a.bm.(*wib.Bitmap)
		if !ok {
			return nil, fmt.Errorf("%w: bitmap runtime not available", ErrUnsupported)
		}
		h := b.Header()
		bmArea = bitmap.NewArea(&h, 0xff, bitmap.AreaAlign(sb.BitmapOffset))
	}
	// Everything is checked: write.
	raw := make([]byte, 4096)
	enc := sb.MarshalWithChecksum()
	copy(raw, enc)
	lbs := int64(dev.Geometry().LogicalBlock)
	if lbs < 512 {
		lbs = 512
	}
	size := (int64(len(enc)) + lbs - 1) / lbs * lbs
	if err := writeDurable(dev, raw[:size], int64(sb.SuperOffset)*512); err != nil {
		return nil, fmt.Errorf("engine: writing the superblock: %w", err)
	}
	if bmArea != nil {
		off := (int64(sb.SuperOffset) + int64(sb.BitmapOffset)) * 512
		n := (int64(len(bmArea)) + lbs - 1) / lbs * lbs
		buf := make([]byte, n)
		copy(buf, bmArea)
		if n > int64(len(bmArea)) {
			// keep what follows the area in the last block
			tail := make([]byte, lbs)
			if err := readFull(dev, tail, off+n-lbs); err == nil {
				copy(buf[len(bmArea):], tail[int64(len(bmArea))-(n-lbs):])
			}
		}
		if err := writeDurable(dev, buf, off); err != nil {
			return nil, fmt.Errorf("engine: writing the bitmap: %w", err)
		}
	}
	ls := &loadedSuper{minor: minor, offset: sb.SuperOffset, raw: raw, sb: &sb}
	m := &member{dev: dev, lat: latencyOf(dev), role: -1, ls: ls, dataOff: int64(sb.DataOffset) * 512,
		newOff: int64(sb.NewDataOffset()) * 512, sbEvents: sb.Events, savedRole: -1}
	a.watchLoss(m)
	return m, nil
}

// prepareReAdd checks that dev can go back into its old role
// (super_1_validate and super_90_validate on a running array: guided by
// the bitmap, or without one a device whose events are the array's, which
// is then recovered in full). It writes nothing.
func (a *Array) prepareReAdd(dev Device, faulty bool) (*member, error) {
	if err := a.reAddDuringReshape(); err != nil {
		return nil, err
	}
	ref, src := a.sample()
	if ref == nil {
		return nil, fmt.Errorf("%w: no in-sync member", ErrFailed)
	}
	ls, err := loadSuper(dev, src.ls.minor)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotReAddable, err)
	}
	if ls.err != nil {
		// super_1_load refuses it: the kernel's ADD_NEW_DISK fails.
		return nil, fmt.Errorf("%w: %w: %w", ErrNotReAddable, ErrInvalidSuper, ls.err)
	}
	sb := ls.sb
	if !bytes.Equal(sb.SetUUID[:], a.uuid[:]) {
		return nil, fmt.Errorf("%w: device belongs to another array", ErrNotReAddable)
	}
	role := sb.Role()
	if !superblock.ActiveRole(role) || int(role) >= a.n {
		return nil, fmt.Errorf("%w: device has no active role", ErrNotReAddable)
	}
	if err := a.reAddEvents(sb.Events, faulty); err != nil {
		return nil, err
	}
	if sb.Events > a.Events() {
		return nil, fmt.Errorf("%w: device events %d are newer than the array's %d", ErrNotReAddable, sb.Events, a.Events())
	}
	if uint64(dev.Geometry().Size)>>9 < sb.DataOffset+a.geo.DevSectors(int(role)) {
		return nil, fmt.Errorf("%w: device too small", ErrNotReAddable)
	}
	a.cfgMu.RLock()
	defer a.cfgMu.RUnlock()
	if cur := a.roles[role]; cur != nil && !cur.removed.Load() && cur.State() != Faulty {
		return nil, fmt.Errorf("%w: role %d is taken", ErrNotReAddable, role)
	}
	desc := a.devNumbers()
	for _, o := range a.all {
		if o.removed.Load() {
			continue
		}
		if sameDevice(o.dev, dev) || desc(o) == sb.DevNumber || (o.savedRole == int(role) && o.State() != Faulty) {
			return nil, fmt.Errorf("%w: device %d of the array has the same slot", ErrBusy, o.index)
		}
	}
	m := &member{dev: dev, lat: latencyOf(dev), role: -1, ls: ls, dataOff: int64(sb.DataOffset) * 512, sbEvents: sb.Events, savedRole: int(role)}
	m.corrected.Store(sb.CntCorrectedRead)
	a.watchLoss(m)
	return m, nil
}

// sameDevice compares two devices without panicking on device types that
// are not comparable.
func sameDevice(a, b Device) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// placeAdded puts an added device's bad-block log after the bitmap room
// (write_init_super1) and, during a reshape, checks its room at the new
// data offset.
func (a *Array) placeAdded(sb *superblock.Superblock, minor int, need uint64) error {
	var bms *bitmap.Header
	if b, ok := a.bm.(*wib.Bitmap); ok && a.hasBM {
		h := b.Header()
		bms = &h
	}
	placeAddedBBLog(sb, minor, bms)
	return a.reshapeRoom(sb, need)
}
