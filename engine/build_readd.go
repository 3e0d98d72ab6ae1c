package engine

import (
	"fmt"

	"mdtool/superblock"
)

// prepareReAddBuilt is --re-add on an array without superblocks (mdadm
// --build): md 6.1's md_add_new_disk takes the role mdadm's Manage_add
// chose (the lowest one no working member holds, given with
// MD_DISK_SYNC) as the device's saved_raid_disk, so that
// remove_and_add_spares puts it back there; raid1/raid10 then recover
// only the chunks the bitmap has dirty (a full recovery without a
// bitmap). Nothing is read from or written to the device's metadata:
// its in-memory superblock is the array's, as OpenBuild makes them.
func (a *Array) prepareReAddBuilt(dev Device) (*member, error) {
	return a.prepareBuilt(dev, true, false)
}

// prepareAddBuilt is --add on an array without superblocks: mdadm's
// Manage_add gives md a plain ADD_NEW_DISK (state 0, the first free
// descriptor number from raid_disks on), so md 6.1's md_add_new_disk
// makes it a spare with no saved role (saved_raid_disk -1): it recovers
// the lowest missing role in full, as any new spare. Nothing is written.
func (a *Array) prepareAddBuilt(dev Device, opts AddOptions) (*member, error) {
	return a.prepareBuilt(dev, false, opts.WriteMostly)
}

// prepareBuilt makes the in-memory member of a device added to an array
// without superblocks: a re-add takes the lowest role no working member
// holds as its saved role, an add none.
func (a *Array) prepareBuilt(dev Device, reAdd, writeMostly bool) (*member, error) {
	ref, _ := a.sample()
	if ref == nil {
		return nil, fmt.Errorf("%w: no in-sync member", ErrFailed)
	}
	size := uint64(dev.Geometry().Size) >> 9
	a.cfgMu.RLock()
	defer a.cfgMu.RUnlock()
	held := make([]bool, a.n)
	used := map[uint32]bool{}
	for _, o := range a.all {
		if o.removed.Load() {
			continue
		}
		if sameDevice(o.dev, dev) {
			return nil, ErrBusy
		}
		used[o.ls.sb.DevNumber] = true
		if o.role >= 0 && o.role < a.n && o.State() != Faulty {
			held[o.role] = true
		}
	}
	role := -1
	if reAdd {
		for r, h := range held {
			if !h {
				role = r
				break
			}
		}
		if role < 0 {
			return nil, fmt.Errorf("%w: no free role", ErrNotReAddable)
		}
	}
	// md_add_new_disk of a non-persistent array: the device must hold
	// the component size (bind_rdev_to_array: ENOSPC; mdadm checks first).
	if size < a.geo.DevSectors(max(role, 0)) {
		return nil, fmt.Errorf("engine: device not large enough to join array")
	}
	sb := *ref
	sb.DevRoles = append([]uint16(nil), ref.DevRoles...)
	sb.DevFlags = 0
	if reAdd {
		sb.DevNumber = uint32(role)
	} else {
		num := uint32(a.n)
		for used[num] {
			num++
		}
		sb.DevNumber = num
		if num >= sb.MaxDev {
			sb.MaxDev = num + 1
		}
		for len(sb.DevRoles) < int(sb.MaxDev) {
			sb.DevRoles = append(sb.DevRoles, superblock.RoleSpare)
		}
		sb.DevRoles[num] = superblock.RoleSpare
		if writeMostly {
			sb.DevFlags |= superblock.DevFlagWriteMostly
		}
	}
	sb.DataSize, sb.SuperOffset = size, size
	ls := &loadedSuper{minor: -1, offset: size, sb: &sb}
	return &member{dev: dev, lat: latencyOf(dev), role: -1, ls: ls, sbEvents: sb.Events, savedRole: role}, nil
}
