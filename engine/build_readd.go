package engine

import "fmt"

// prepareReAddBuilt is --re-add on an array without superblocks (mdadm
// --build): md 6.1's md_add_new_disk takes the role mdadm's Manage_add
// chose (the lowest one no working member holds, given with
// MD_DISK_SYNC) as the device's saved_raid_disk, so that
// remove_and_add_spares puts it back there; raid1/raid10 then recover
// only the chunks the bitmap has dirty (a full recovery without a
// bitmap). Nothing is read from or written to the device's metadata:
// its in-memory superblock is the array's, as OpenBuild makes them.
func (a *Array) prepareReAddBuilt(dev Device) (*member, error) {
	ref, _ := a.sample()
	if ref == nil {
		return nil, fmt.Errorf("%w: no in-sync member", ErrFailed)
	}
	size := uint64(dev.Geometry().Size) >> 9
	a.cfgMu.RLock()
	defer a.cfgMu.RUnlock()
	held := make([]bool, a.n)
	for _, o := range a.all {
		if o.removed.Load() {
			continue
		}
		if sameDevice(o.dev, dev) {
			return nil, ErrBusy
		}
		if o.role >= 0 && o.role < a.n && o.State() != Faulty {
			held[o.role] = true
		}
	}
	role := -1
	for r, h := range held {
		if !h {
			role = r
			break
		}
	}
	if role < 0 {
		return nil, fmt.Errorf("%w: no free role", ErrNotReAddable)
	}
	if size < a.geo.DevSectors(role) {
		return nil, fmt.Errorf("engine: device not large enough to join array")
	}
	sb := *ref
	sb.DevRoles = append([]uint16(nil), ref.DevRoles...)
	sb.DevNumber = uint32(role)
	sb.DataSize, sb.SuperOffset = size, size
	ls := &loadedSuper{minor: -1, offset: size, sb: &sb}
	return &member{dev: dev, lat: latencyOf(dev), role: -1, ls: ls, sbEvents: sb.Events, savedRole: role}, nil
}
