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
	wasClean := a.allowWriteLocked()
	err := a.reshapeMirrorsLocked(n)
	// update_array_info: md_update_sb(mddev, 1) whatever raid1_reshape
	// returned (its -EBUSY included).
	a.meta.changeDevs = true
	if uerr := a.updateSuperLocked(true); err == nil {
		err = uerr
	}
	if wasClean && a.opts.SafeModeDelay >= 0 {
		// md_allow_write set safemode = 1: md_check_recovery's
		// set_in_sync marks the array clean again at once (another
		// update, before any spare takes a new slot).
		a.setInSyncLocked(false)
	}
	return err
}

// reshapeMirrorsLocked is raid1_reshape after its md_allow_write: the
// mirrors array resized, the members still in slots packed to the lowest
// ones. Called with meta.mu held and the array suspended.
func (a *Array) reshapeMirrorsLocked(n int) error {
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
	return err
}

// allowWriteLocked is md_allow_write, which raid1_reshape calls before
// anything else: a clean array is marked active (in_sync = 0, a
// superblock update: events+1) and it reports that it was clean.
func (a *Array) allowWriteLocked() bool {
	if a.opts.ReadOnly || !a.redundant() || !a.meta.inSync {
		return false
	}
	a.meta.inSync = false
	a.meta.state.Store(stateActive)
	if err := a.updateSuperLocked(false); err != nil {
		a.opts.Logf("md: superblock update: %v", err)
	}
	return true
}
