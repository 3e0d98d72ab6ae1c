package engine

import (
	"fmt"

	"mdtool/engine/wib"
	"mdtool/superblock"
)

// prepareAdd090 validates dev as a new spare of a 0.90 array and writes
// what mdadm 4.2's Manage_add writes for it: the superblock of an in-sync
// member (as last written) with the new device's descriptor in the disk
// table (add_to_super0: its number, device numbers, raid_disk -1 as
// GET_DISK_INFO reports a free slot, state 0) and this_disk set to it
// (write_init_super0), at the 0.90 location; with an internal bitmap,
// write_bitmap0's 60 KiB after it (the bitmap header, then all-ones).
// With a bitmap file the superblock has no BITMAP_PRESENT bit and nothing
// is written after it. md then rewrites the superblock as a spare's
// (super_90_sync), which AddDevice does at once.
func (a *Array) prepareAdd090(dev Device, opts AddOptions) (*member, error) {
	_, src := a.sample()
	if src == nil {
		return nil, fmt.Errorf("%w: no in-sync member to copy the superblock from", ErrFailed)
	}
	devBytes := uint64(dev.Geometry().Size)
	// mdadm: avail_size0 (MD_NEW_SIZE_SECTORS, 0 below 64 KiB) against
	// the component size.
	avail := superblock.Offset090(devBytes) / 512
	need := a.geo.DevSectors(0)
	if avail < need || devBytes < superblock.MinDevBytes090 {
		return nil, fmt.Errorf("engine: device not large enough to join the array (%d sectors before the 0.90 superblock, %d needed)", avail, need)
	}
	a.meta.mu.Lock()
	base, err := superblock.Parse090(src.ls.raw)
	a.cfgMu.RLock()
	var busy bool
	used := map[int]bool{}
	for o, nr := range a.desc090() {
		used[nr] = true
		if sameDevice(o.dev, dev) {
			busy = true
		}
	}
	a.cfgMu.RUnlock()
	a.meta.mu.Unlock()
	if busy {
		return nil, ErrBusy
	}
	if base == nil || err != nil {
		return nil, fmt.Errorf("engine: the superblock of device %d does not parse: %v", src.index, err)
	}
	// Manage_add: the first number from raid_disks up that no member of
	// the array has (GET_DISK_INFO of a free number).
	num := int(base.RaidDisks)
	for used[num] {
		num++
	}
	if num >= superblock.Disks090 {
		return nil, fmt.Errorf("engine: no free device number in the 0.90 disk table")
	}
	sb := *base
	sb.Disks[num] = superblock.Disk090{Number: uint32(num), Major: opts.Major, Minor: opts.Minor, RaidDisk: ^uint32(0)}
	sb.ThisDisk = sb.Disks[num]
	if err := sb.CheckDevice(devBytes); err != nil {
		return nil, fmt.Errorf("engine: device not large enough to join the array: %w", err)
	}
	var bmArea []byte
	if sb.State&superblock.SB090BitmapPresent != 0 {
		b, ok := a.bm.(*wib.Bitmap)
		if !ok || !a.hasBM {
			return nil, fmt.Errorf("%w: bitmap runtime not available", ErrUnsupported)
		}
		h := b.Header()
		bmArea = area090(h.Marshal())
	}
	// Everything is checked: write. write_init_super0 first erases
	// every md superblock on the device (mdadm's Kill): a 1.x one would
	// otherwise stay beside the new 0.90 superblock.
	if err := erase1x(dev); err != nil {
		return nil, err
	}
	raw := make([]byte, superblock.Size090)
	copy(raw, sb.MarshalWithChecksum())
	off := superblock.Offset090(devBytes)
	if err := writeDurable(dev, raw, int64(off)); err != nil {
		return nil, fmt.Errorf("engine: writing the superblock: %w", err)
	}
	if bmArea != nil {
		if err := writeDurable(dev, bmArea, int64(off)+superblock.Size090); err != nil {
			return nil, fmt.Errorf("engine: writing the bitmap: %w", err)
		}
	}
	v := sb.V1View(devBytes)
	ls := &loadedSuper{minor: Minor090, offset: off / 512, raw: raw, sb: v, v090: &sb}
	m := &member{dev: dev, lat: latencyOf(dev), role: -1, ls: ls, dataOff: 0, sbEvents: v.Events, savedRole: -1}
	a.watchLoss(m)
	return m, nil
}

// order090 is the order of md's rdev list, which super_90_sync walks to
// number the members that are not active: bind_rdev_to_array puts each
// device at the head, so the devices added to the running array come
// first, the last added first, then the assembled ones.
func (a *Array) order090() []*member {
	out := make([]*member, 0, len(a.all))
	for i := len(a.all) - 1; i >= 0; i-- {
		if o := a.all[i]; o.hotAdded && !o.removed.Load() {
			out = append(out, o)
		}
	}
	for _, o := range a.all {
		if !o.hotAdded && !o.removed.Load() {
			out = append(out, o)
		}
	}
	return out
}

// desc090 is each member's number in the 0.90 disk table (md's desc_nr
// after super_90_sync): an in-sync member its role, the others numbers
// from raid_disks up in md's list order.
func (a *Array) desc090() map[*member]int {
	nr := map[*member]int{}
	next := a.n
	for _, o := range a.order090() {
		if o.State() == InSync && o.role >= 0 {
			nr[o] = o.role
			continue
		}
		nr[o] = next
		next++
	}
	return nr
}

// devNumbers gives each member's dev_number as md has it now: the 1.x
// superblock's, or for 0.90 the number super_90_sync gave it (desc090).
// The caller holds cfgMu.
func (a *Array) devNumbers() func(*member) uint32 {
	if !a.is090() {
		return func(o *member) uint32 { return o.ls.sb.DevNumber }
	}
	desc := a.desc090()
	return func(o *member) uint32 { return uint32(desc[o]) }
}

// DescNumbers gives each device index's number in md's disk table
// (desc_nr: mdadm's "Number") where it is not the superblock's
// dev_number: on a 0.90 array (super_90_sync sets it) and on a
// multipath array (md's list order, assembleMultipath); nil for the
// other 1.x arrays.
func (a *Array) DescNumbers() map[int]int {
	if a.multipath() {
		a.cfgMu.RLock()
		defer a.cfgMu.RUnlock()
		out := map[int]int{}
		for _, m := range a.all {
			out[m.index] = int(m.ls.sb.DevNumber)
		}
		return out
	}
	if !a.is090() {
		return nil
	}
	a.cfgMu.RLock()
	defer a.cfgMu.RUnlock()
	out := map[int]int{}
	for m, nr := range a.desc090() {
		out[m.index] = nr
	}
	return out
}

// erase1x zeroes the 4 KiB at each 1.x superblock found on dev.
func erase1x(dev Device) error {
	sectors := uint64(dev.Geometry().Size) >> 9
	for minor := 0; minor <= 2; minor++ {
		f, err := superblock.FindV1(deviceReader{dev}, sectors, minor)
		if err != nil {
			continue // none there (or unreadable: nothing to erase)
		}
		if err := writeDurable(dev, make([]byte, 4096), int64(f.Offset)*512); err != nil {
			return fmt.Errorf("engine: erasing the 1.%d superblock: %w", minor, err)
		}
	}
	return nil
}
