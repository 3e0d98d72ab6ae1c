package engine

import (
	"fmt"

	"mdtool/engine/layout"
)

// SetRaidDisks changes the number of mirrors of a raid1, as md's
// update_raid_disks -> raid1_reshape does (Linux 6.1): more mirrors add
// empty slots (missing roles that spares then take, rebuilt by a
// recovery); fewer mirrors are possible only when the members still in
// slots fit (a faulty one leaves its slot), else ErrBusy; the remaining
// members move to the lowest slots in order. The superblocks record the
// new raid_disks and roles.
func (a *Array) SetRaidDisks(n int) error {
	if err := a.refuse090("changing raid-devices"); err != nil {
		return err
	}
	if a.closed.Load() {
		return ErrClosed
	}
	if a.opts.ReadOnly {
		return ErrReadOnly
	}
	if a.level != layout.RAID1 {
		return fmt.Errorf("%w: %v changes its number of devices by a reshape", ErrUnsupported, a.level)
	}
	if n < 1 {
		return fmt.Errorf("%w: %d raid devices", ErrUnsupported, n)
	}
	if _, ok := a.claimIdle(); !ok {
		return ErrBusy
	}
	err := a.setRaidDisksClaimed(n)
	a.release(false)
	if err == nil {
		a.sc.disabled.Store(false)
		a.checkRecovery()
	}
	return err
}

func (a *Array) setRaidDisksClaimed(n int) error {
	a.suspend()
	defer a.resume()
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	a.cfgMu.Lock()
	a.failMu.Lock()
	var present []*member
	for _, m := range a.roles {
		if m != nil && !m.removed.Load() && m.State() != Faulty {
			present = append(present, m)
		}
	}
	if n < a.n && len(present) > n {
		a.failMu.Unlock()
		a.cfgMu.Unlock()
		return ErrBusy
	}
	roles := make([]*member, n)
	if n >= a.n {
		copy(roles, a.roles)
	} else {
		for _, m := range a.roles {
			if m != nil && (m.removed.Load() || m.State() == Faulty) {
				m.role = -1 // it leaves its slot
			}
		}
		for i, m := range present {
			m.role = i
			roles[i] = m
		}
	}
	oldN, oldRoles := a.n, a.roles
	a.roles, a.n = roles, n
	for _, m := range a.all {
		m.ls.sb.RaidDisks = uint32(n)
	}
	ref := *a.all[0].ls.sb
	err := a.setGeometry(&ref)
	if err != nil {
		a.roles, a.n = oldRoles, oldN
		for _, m := range a.all {
			m.ls.sb.RaidDisks = uint32(oldN)
		}
	}
	a.failMu.Unlock()
	a.cfgMu.Unlock()
	if err != nil {
		return err
	}
	a.meta.changeDevs = true
	return a.updateSuperLocked(true)
}
