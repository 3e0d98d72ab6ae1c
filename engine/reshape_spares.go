package engine

import (
	"fmt"

	"mdtool/superblock"
)

// Spares of a growing reshape (raid5_start_reshape, Linux 6.1). md lets
// every spare take a free role of the new geometry, scanning from role 0
// (raid5_add_disk), so on a degraded array the missing roles are filled
// before the new ones. A spare that lands on a role the old geometry
// already had (below previous_raid_disks) is not in sync: its
// recovery_offset starts at 0 and advances with the reshape, which
// writes its new-geometry data as it passes (reshape_request sets
// recovery_offset to the position recorded, in member sectors of the new
// geometry); end_reshape sets it to MaxSector and the member is in sync.
// A spare on a new role is in sync at once (it only ever holds data of
// the new geometry). This is how md grows a raid0: mdadm takes it over
// to a raid4 whose parity role is missing, the added device fills the
// old parity role (a data role of the larger raid4), the new parity role
// stays missing, and mdadm takes the result back to raid0.

// reshapeSpareRoles checks md's spare count for a reshape adding delta
// devices (raid5_start_reshape: spares - degraded >= delta_disks -
// max_degraded; the engine wants at least one spare per new device) and
// returns the spares that take roles, in device order.
func (a *Array) reshapeSpareRoles(delta, n int) ([]*member, error) {
	// md's rdev list has the device bound last first (bind_rdev_to_array's
	// list_add_rcu), and raid5_start_reshape offers the free roles in that
	// order: the spare added last takes the lowest free role.
	var spares []*member
	for i := len(a.all) - 1; i >= 0; i-- {
		if m := a.all[i]; m.role < 0 && m.State() == Spare && !m.removed.Load() {
			spares = append(spares, m)
		}
	}
	deg := a.degraded()
	if deg == 0 {
		if len(spares) < delta {
			return nil, fmt.Errorf("%w: %d spares for %d new devices", ErrUnsupported, len(spares), delta)
		}
		return spares[:delta], nil
	}
	// md would also grow without a spare where the result is degraded
	// no more than the level allows; the engine wants one per new device.
	if len(spares) < delta || len(spares)-deg < delta-a.maxDegraded() {
		return nil, fmt.Errorf("%w: %d spares for %d new devices of an array with %d missing", ErrUnsupported, len(spares), delta, deg)
	}
	if holes := deg + delta; len(spares) > holes {
		spares = spares[:holes]
	}
	return spares, nil
}

// placeReshapeSpares gives the spares the free roles below n, lowest
// first (raid5_add_disk); a role the old geometry of oldN roles had makes
// the spare in reshape (Recovering from 0), a new one in sync.
func (a *Array) placeReshapeSpares(n, oldN int, spares []*member) {
	for len(a.roles) < n {
		a.roles = append(a.roles, nil)
	}
	r := 0
	for _, m := range spares {
		for r < n && a.roles[r] != nil {
			r++
		}
		if r == n {
			return
		}
		m.role = r
		m.savedRole = -1
		if r >= oldN {
			m.state.Store(uint32(InSync))
		} else {
			m.recovery.Store(0)
			m.recCP.Store(0)
			m.state.Store(uint32(Recovering))
		}
		a.roles[r] = m
	}
}

// inReshape are the members a forwards reshape recovers as it goes: the
// ones with a role that are not in sync (md: raid_disk >= 0 and not
// In_sync).
func (a *Array) inReshape() []*member {
	if a.rs == nil || a.rs.geo.Backwards {
		return nil
	}
	var out []*member
	for _, m := range a.roles {
		if m != nil && m.State() == Recovering && !m.replacement && !m.removed.Load() {
			out = append(out, m)
		}
	}
	return out
}

// reshapeRecovered advances the members in reshape to the reshape's
// progress: the new-geometry member sectors below it are written.
func (a *Array) reshapeRecovered() {
	p := a.rs.progress.Load() / uint64(a.rs.geo.New.DataDisks())
	for _, m := range a.inReshape() {
		if m.recovery.Load() < p {
			m.recovery.Store(p)
		}
	}
}

// reshapeRecordRecovery is reshape_request's update of recovery_offset
// when it records reshape_position: the recorded position in member
// sectors of the new geometry.
func (a *Array) reshapeRecordRecovery() {
	p := a.rs.safe.Load() / uint64(a.rs.geo.New.DataDisks())
	for _, m := range a.inReshape() {
		if m.recCP.Load() < p {
			m.recCP.Store(p)
		}
	}
}

// reshapeRecoveredAll is end_reshape (recovery_offset = MaxSector) and
// spare_active: the members in reshape are in sync.
func (a *Array) reshapeRecoveredAll() {
	for _, m := range a.inReshape() {
		m.recovery.Store(superblock.MaxSector)
		m.recCP.Store(superblock.MaxSector)
		m.state.Store(uint32(InSync))
	}
}

// reshapeDegraded is raid5_calc_degraded during a reshape: the missing
// roles counted in each geometry, the larger count. A member not in sync
// counts against the old geometry when the reshape adds devices (the
// reshape recovers it) and against the new one when it removes them.
func (a *Array) reshapeDegraded() int {
	oldN, newN := a.rs.geo.Old.RaidDisks(), a.rs.geo.New.RaidDisks()
	count := func(n int, notInSync bool) int {
		d := 0
		for r := 0; r < n; r++ {
			var m *member
			if r < len(a.roles) {
				m = a.roles[r]
			}
			switch {
			case m == nil || m.State() == Faulty || m.State() == Spare || m.removed.Load():
				d++
			case m.State() != InSync && notInSync:
				d++
			}
		}
		return d
	}
	return max(count(oldN, newN >= oldN), count(newN, newN <= oldN))
}
