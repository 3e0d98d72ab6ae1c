package engine

import (
	"fmt"

	"mdtool/engine/layout"
)

// raid10 <-> raid0 takeovers (Linux 6.1 raid0.c raid0_takeover_raid10,
// raid10.c raid10_takeover / raid10_takeover_raid0). Both keep every
// sector where it is: a near-2 raid10 with one member of each mirror
// pair is a raid0 of those members, and a one-zone raid0 is the even
// roles of a near-2 raid10 whose odd roles are missing.

// layoutNear2 is raid10's near=2 layout word ((1 << 8) + 2).
const layoutNear2 = 1<<8 + 2

// planTakeoverRAID10 is planTakeover for raid10 -> raid0 and raid0 ->
// raid10; ok is false for other changes.
func (a *Array) planTakeoverRAID10(level layout.Level) (tp takeoverPlan, ok bool, err error) {
	switch {
	case a.level == layout.RAID10 && level == layout.RAID0:
		tp, err = a.planRAID10ToRAID0()
		return tp, true, err
	case a.level == layout.RAID0 && level == layout.RAID10:
		tp, err = a.planRAID0ToRAID10()
		return tp, true, err
	}
	return tp, false, nil
}

// planRAID10ToRAID0 is raid0_takeover_raid10: layout near=2 (far 1),
// an even number of devices, and every mirror pair already down to one
// member (mddev->degraded == raid_disks/2). Role r becomes r/2
// (create_strip_zones: new_raid_disk = raid_disk / 2); each member
// contributes its data area rounded down to the chunk (rdev->sectors),
// and the result must be one zone (the raid10's layout word is not a
// raid0 layout md accepts for several). The superblocks keep the
// raid10's size (mddev->dev_sectors stays).
func (a *Array) planRAID10ToRAID0() (takeoverPlan, error) {
	var tp takeoverPlan
	g, _ := a.geo.(*layout.RAID10Geometry)
	if g == nil || g.NearCopies() != 2 || g.FarCopies() != 1 || g.Offset() {
		return tp, fmt.Errorf("%w: raid0 cannot take over this raid10 layout", ErrTakeover)
	}
	if a.n%2 != 0 {
		return tp, fmt.Errorf("%w: raid0 cannot take over raid10 with odd disk number", ErrTakeover)
	}
	if a.degraded() != a.n/2 {
		return tp, fmt.Errorf("%w: all mirrors must be already degraded", ErrTakeover)
	}
	half := a.n / 2
	tp.roles = make([]*member, half)
	for r, m := range a.roles {
		if m == nil || m.removed.Load() {
			continue
		}
		if !working(m) || tp.roles[r/2] != nil {
			// a faulty member still in its slot: md's raid0 would
			// count it for the same strip as the survivor.
			return tp, fmt.Errorf("%w: all mirrors must be already degraded", ErrTakeover)
		}
		tp.roles[r/2] = m
	}
	chunk := g.ChunkSectors()
	tp.params = layout.Params{Level: layout.RAID0, Layout: -1, ChunkSectors: chunk, RaidDisks: half, DevSectors: make([]uint64, half)}
	for r, m := range tp.roles {
		if m == nil {
			return tp, fmt.Errorf("%w: all mirrors must be already degraded", ErrTakeover)
		}
		tp.params.DevSectors[r] = m.ls.sb.DataSize
	}
	tp.devSize = tp.roles[0].ls.sb.Size
	tp.r10 = true
	return tp, nil
}

// planRAID0ToRAID10 is raid10_takeover (one strip zone only) and
// raid10_takeover_raid0: near=2 over twice the devices, member r in
// role 2r, the odd roles missing until spares recover them;
// mddev->dev_sectors becomes the zone's size per device.
func (a *Array) planRAID0ToRAID10() (takeoverPlan, error) {
	var tp takeoverPlan
	dev := a.geo.DevSectors(0)
	for r := range a.roles {
		if a.geo.DevSectors(r) != dev {
			return tp, fmt.Errorf("%w: cannot takeover raid 0 with more than one zone", ErrTakeover)
		}
	}
	if a.degraded() > 0 {
		return tp, fmt.Errorf("%w: degraded raid0", ErrTakeover)
	}
	tp.devSize, tp.r10 = dev, true
	tp.params = layout.Params{Level: layout.RAID10, Layout: layoutNear2, ChunkSectors: a.geo.ChunkSectors(), RaidDisks: 2 * a.n, ComponentSectors: dev}
	tp.roles = make([]*member, 2*a.n)
	for r, m := range a.roles {
		tp.roles[2*r] = m
	}
	return tp, nil
}

// takenOverRAID10 finishes a raid10 <-> raid0 takeover (r10): every
// member takes its index in a.roles (level_store's new_raid_disk), its
// data_size follows rdev->sectors, and a raid0 serves what its members
// hold (raid0_run: array_sectors = raid0_size, which may exceed the
// raid10's). Other takeovers keep roles, data sizes and size.
func (a *Array) takenOverRAID10(g layout.Geometry, r10 bool) {
	if !r10 {
		return
	}
	for r, m := range a.roles {
		if m == nil {
			continue
		}
		m.role = r
		// super_1_sync writes data_size from rdev->sectors: raid0's
		// create_strip_zones rounds it down to the chunk,
		// raid10_takeover_raid0 sets it to the zone's size per device.
		if a.level == layout.RAID0 {
			m.ls.sb.DataSize -= m.ls.sb.DataSize % g.ChunkSectors()
		} else {
			m.ls.sb.DataSize = g.DevSectors(r)
		}
	}
	if a.level == layout.RAID0 {
		a.size = int64(g.ArraySectors()) * 512
	}
}

// LiveLayout is md's layout of the running array when it differs from
// what its superblocks read back as: after a takeover into raid0 md
// reports the takeover's new_layout 0, where an assembly of the same
// superblocks (without MD_FEATURE_RAID0_LAYOUT) reports -1.
func (a *Array) LiveLayout() (int, bool) {
	a.cfgMu.RLock()
	defer a.cfgMu.RUnlock()
	if a.takenOver.Load() && a.level == layout.RAID0 {
		return 0, true
	}
	return 0, false
}
