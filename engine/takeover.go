package engine

import (
	"fmt"

	"mdtool/engine/layout"
	"mdtool/superblock"
)

// Level changes without data movement: md's level_store calling the new
// personality's takeover (Linux 6.1 raid5.c raid5_takeover_raid1,
// raid45_takeover_raid0, raid5_takeover_raid6, raid6_takeover; raid0.c
// raid0_takeover_raid45; raid1.c raid1_takeover). Only the superblocks change (level, layout,
// chunk, raid_disks, events); a role the new level adds is missing
// (the array is degraded) until a spare recovers it.

// ErrTakeover: md's takeover refuses the change (EINVAL from
// level_store).
var ErrTakeover = fmt.Errorf("%w: level change", ErrUnsupported)

// takeoverPlan is what a takeover changes.
type takeoverPlan struct {
	params  layout.Params
	roles   []*member // the new roles
	spare   *member   // a member that leaves its role for the spares (raid6 -> raid5: Q)
	devSize uint64    // mddev->dev_sectors afterwards
	r10     bool      // raid10 <-> raid0: roles move, data_size and the size follow (takeover_raid10.go)
	sectors bool      // raid0_takeover_raid45: every member's data_size (rdev->sectors) becomes devSize
}

// r6Layout is raid6_takeover's layout for a raid5 one (Q on the last,
// new device); r5Layout is raid5_takeover_raid6's way back.
func r6Layout(l int) (int, bool) {
	switch {
	case l >= layout.LeftAsymmetric && l <= layout.ParityFirst:
		return l + layout.LeftAsymmetric6, true
	case l == layout.ParityLast:
		return l, true
	}
	return 0, false
}

func r5Layout(l int) (int, bool) {
	switch {
	case l >= layout.LeftAsymmetric6 && l <= layout.ParityFirst6:
		return l - layout.LeftAsymmetric6, true
	case l == layout.ParityLast:
		return l, true
	}
	return 0, false
}

// ChangeLevel takes the array over into level as md does when mdadm
// writes the level (level_store): raid1 (2 devices) -> raid5
// (left-symmetric, the largest chunk up to 64 KiB dividing the array),
// raid0 (one zone) -> raid4/raid5 (parity-last, one more device, the
// parity role missing), raid4/raid5 (parity-last, parity role missing) ->
// raid0,
// raid5 -> raid6 (the "-6" layout, Q on a new missing role), raid6
// ("-6" or parity-last) -> raid5 (the Q member becomes a spare) and
// raid5 (2 devices) -> raid1. Every
// other change is ErrTakeover; no change is made while a sync action or
// a reshape runs (ErrBusy). A spare then recovers a missing role through
// the sync thread.
func (a *Array) ChangeLevel(level layout.Level) error {
	if a.journaled() {
		return ErrJournaled
	}
	if a.closed.Load() {
		return ErrClosed
	}
	if a.opts.ReadOnly {
		return ErrReadOnly
	}
	if level == a.level {
		return nil
	}
	if a.reshaping() {
		return ErrBusy
	}
	if err := a.takeoverBitmapCheck(level); err != nil {
		return err
	}
	if _, ok := a.claimIdle(); !ok {
		return ErrBusy
	}
	err := a.changeLevelClaimed(level)
	a.release(false)
	if err == nil {
		a.sc.disabled.Store(false)
		if !a.opts.NoAutoSync && !a.opts.NoDaemon {
			a.checkRecovery()
		}
	}
	return err
}

func (a *Array) changeLevelClaimed(level layout.Level) error {
	a.suspend()
	defer a.resume()
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	cfg := a.lockCfg()
	defer cfg.Unlock()
	a.failMu.Lock()
	defer a.failMu.Unlock()
	tp, err := a.planTakeover(level)
	if err != nil {
		return err
	}
	g, err := layout.New(tp.params)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrTakeover, err)
	}
	if int64(g.ArraySectors())*512 < a.size {
		return fmt.Errorf("%w: the %v would be smaller than the array", ErrTakeover, level)
	}
	wasRedundant := a.redundant()
	if m := tp.spare; m != nil {
		m.role = -1
		if m.State() != Faulty {
			m.state.Store(uint32(Spare))
		}
	}
	for _, m := range a.all {
		sb := m.ls.sb
		sb.Level = int32(level)
		sb.Layout = uint32(int32(max(tp.params.Layout, 0)))
		sb.ChunkSize = uint32(tp.params.ChunkSectors)
		sb.RaidDisks = uint32(tp.params.RaidDisks)
		// new_level, new_layout, new_chunk: super_1_sync writes them only
		// while a reshape is active; they stay as they were.
		sb.Size = tp.devSize
		if tp.sectors && !m.removed.Load() {
			sb.DataSize = tp.devSize
		}
		if level != layout.RAID0 {
			sb.FeatureMap &^= superblock.FeatureRAID0Layout
		}
	}
	a.level = level
	a.stripeCache = 0 // a new personality: md's default stripe cache
	a.n = tp.params.RaidDisks
	a.roles = tp.roles
	a.setTakenGeometry(g)
	a.takenOverRAID10(g, tp.r10)
	a.takenOver.Store(true)
	if !wasRedundant || !a.redundant() {
		// raid45_takeover_raid0, raid0_takeover_raid45: "make sure it
		// will be not marked as dirty" (recovery_cp = MaxSector).
		a.meta.recoveryCP = superblock.MaxSector
		a.meta.inSync = true
		a.meta.state.Store(stateClean)
	}
	a.meta.changeDevs = true
	a.opts.Logf("md/%v:%s: level changed", level, a.mdName())
	cfg.Unlock()
	return a.updateSuperLocked(true)
}

// setTakenGeometry serves g from now on (the array is suspended).
func (a *Array) setTakenGeometry(g layout.Geometry) {
	a.geo = g
	a.striped, _ = g.(*layout.Striped)
	switch {
	case a.striped != nil:
		a.pers = &stripedPers{a: a, g: a.striped, r6: a.level == layout.RAID6}
	default:
		a.pers = &mappedPers{a: a}
	}
	a.unit = int64(g.IOOpt())
	a.lockSec = 0
	if a.level == layout.RAID1 {
		a.lockSec = 2048
	}
	if a.unit > 0 {
		a.maxReq = max(a.opts.MaxRequest/a.unit, 1) * a.unit
	} else {
		a.maxReq = a.opts.MaxRequest
	}
}

// working says whether the member serves its role.
func working(m *member) bool {
	return m != nil && !m.removed.Load() && m.State() == InSync
}

// planTakeover checks what md's takeover functions check and says what
// changes.
func (a *Array) planTakeover(level layout.Level) (takeoverPlan, error) {
	deg := a.degraded()
	var tp takeoverPlan
	from := a.level
	var chunk uint64
	if a.geo != nil {
		chunk = a.geo.ChunkSectors()
	}
	switch {
	case from == layout.RAID1 && level == layout.RAID5:
		// raid5_takeover_raid1
		if a.n != 2 || deg > 1 {
			return tp, fmt.Errorf("%w: raid1 -> raid5 needs 2 devices", ErrTakeover)
		}
		sectors := a.geo.ArraySectors()
		c := uint64(64 * 2)
		for c > 0 && sectors&(c-1) != 0 {
			c >>= 1
		}
		if c < 8 { // RAID5_STRIPE_SIZE: a page
			return tp, fmt.Errorf("%w: the array size allows no chunk size", ErrTakeover)
		}
		tp.devSize = a.geo.DevSectors(0) &^ (c - 1)
		tp.params = layout.Params{Level: level, Layout: layout.LeftSymmetric, ChunkSectors: c, RaidDisks: 2, ComponentSectors: tp.devSize}
		tp.roles = append([]*member(nil), a.roles...)
	case from == layout.RAID0 && (level == layout.RAID5 || level == layout.RAID4):
		// raid45_takeover_raid0: one strip zone only.
		dev := a.geo.DevSectors(0)
		for r := range a.roles {
			if a.geo.DevSectors(r) != dev {
				return tp, fmt.Errorf("%w: cannot takeover raid0 with more than one zone", ErrTakeover)
			}
		}
		tp.devSize = dev
		tp.params = layout.Params{Level: level, Layout: layout.ParityLast, ChunkSectors: chunk, RaidDisks: a.n + 1, ComponentSectors: dev}
		tp.roles = append(append([]*member(nil), a.roles...), nil)
	case (from == layout.RAID5 || from == layout.RAID4) && level == layout.RAID0:
		// raid0_takeover: parity-last only; raid0_takeover_raid45: one
		// role missing, and it is the parity one.
		if a.striped.Algorithm() != layout.ParityLast {
			return tp, fmt.Errorf("%w: raid0 can only take over raid5 with layout %d", ErrTakeover, layout.ParityLast)
		}
		if deg != 1 || working(a.roles[a.n-1]) {
			return tp, fmt.Errorf("%w: raid5 must be degraded, with its parity device missing", ErrTakeover)
		}
		dev := a.geo.DevSectors(0)
		tp.devSize, tp.sectors = dev, true
		tp.params = layout.Params{Level: level, Layout: -1, ChunkSectors: chunk, RaidDisks: a.n - 1, DevSectors: make([]uint64, a.n-1)}
		for r := range tp.params.DevSectors {
			tp.params.DevSectors[r] = dev
		}
		tp.roles = append([]*member(nil), a.roles[:a.n-1]...)
	case from == layout.RAID5 && level == layout.RAID6:
		// raid6_takeover
		l, ok := r6Layout(a.striped.Algorithm())
		if !ok || deg > 1 || a.n < 3 || a.n > 253 {
			return tp, fmt.Errorf("%w: raid6 cannot take over this raid5", ErrTakeover)
		}
		tp.devSize = a.geo.DevSectors(0)
		tp.params = layout.Params{Level: level, Layout: l, ChunkSectors: chunk, RaidDisks: a.n + 1, ComponentSectors: tp.devSize}
		tp.roles = append(append([]*member(nil), a.roles...), nil)
	case from == layout.RAID6 && level == layout.RAID5:
		// raid5_takeover_raid6; the member in the last role leaves it
		// (level_store: new_raid_disk >= raid_disks -> a spare).
		l, ok := r5Layout(a.striped.Algorithm())
		if !ok {
			return tp, fmt.Errorf("%w: raid5 cannot take over raid6 with layout %d", ErrTakeover, a.striped.Algorithm())
		}
		tp.roles = append([]*member(nil), a.roles[:a.n-1]...)
		left := 0
		for _, m := range tp.roles {
			if !working(m) {
				left++
			}
		}
		if left > 1 {
			return tp, fmt.Errorf("%w: the raid5 would have failed", ErrTakeover)
		}
		if m := a.roles[a.n-1]; m != nil && !m.removed.Load() {
			tp.spare = m
		}
		tp.devSize = a.geo.DevSectors(0)
		tp.params = layout.Params{Level: level, Layout: l, ChunkSectors: chunk, RaidDisks: a.n - 1, ComponentSectors: tp.devSize}
	case from == layout.RAID5 && level == layout.RAID1:
		// raid1_takeover: a raid5 of 2 devices, any layout or chunk size
		// (each stripe's parity is a copy of its one data chunk, so both
		// members hold the array); dev_sectors stays.
		if a.n != 2 {
			return tp, fmt.Errorf("%w: raid1 can only take over a raid5 of 2 devices", ErrTakeover)
		}
		tp.devSize = a.geo.DevSectors(0)
		tp.params = layout.Params{Level: level, RaidDisks: 2, ComponentSectors: tp.devSize}
		tp.roles = append([]*member(nil), a.roles...)
	default:
		if tp, ok, err := a.planTakeoverRAID10(level); ok {
			return tp, err
		}
		return tp, fmt.Errorf("%w: %v to %v", ErrTakeover, from, level)
	}
	return tp, nil
}
