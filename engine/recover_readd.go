package engine

import (
	"fmt"

	"mdtool/engine/layout"
	"mdtool/engine/wib"
	"mdtool/superblock"
)

// reAddEvents is md 6.1's event rule for a device hot-added to a running
// array (super_1_validate, super_90_validate): with a bitmap, a device
// whose events are older than the bitmap's events_cleared is no former
// member (only the bitmap's bits since then are known); without one, a
// device that missed any event is no former member (nothing says what it
// missed), while one whose events are the array's goes back into its old
// role. md's ADD_NEW_DISK then refuses the hot-add that asked for the role
// (mdadm's attempt_re_add), and mdadm says "--re-add ... is not possible"
// (or --add goes on with a new spare). A faulty member that md still
// holds (faulty: "re-add" written to its dev-*/state) is checked for
// nothing: md clears Faulty and binds it again in its saved role.
func (a *Array) reAddEvents(ev uint64, faulty bool) error {
	if faulty {
		return nil
	}
	if !a.hasBM {
		if cur := a.Events(); ev < cur {
			return fmt.Errorf("%w: the array has no bitmap and the device's events %d are older than the array's %d",
				ErrNotReAddable, ev, cur)
		}
		return nil
	}
	b, ok := a.bm.(*wib.Bitmap)
	if !ok {
		return fmt.Errorf("%w: the bitmap is not running", ErrNotReAddable)
	}
	if h := b.Header(); ev < h.EventsCleared {
		return fmt.Errorf("%w: device events %d are older than the bitmap's events_cleared %d",
			ErrNotReAddable, ev, h.EventsCleared)
	}
	return nil
}

// recoverSkipsAll is raid1's and raid10's sync_request shortcut: without a
// bitmap, on an array that needs no resync (resync_offset MaxSector, no
// reshape), a recovery whose members were all re-added into their old
// slots (conf->fullsync unset: raid1_add_disk and raid10_add_disk set it
// for any other device) skips every sector. md takes such a member for a
// copy of the others ("as all devices are equivalent, we don't need a full
// recovery if this was recently any drive of the array") and only marks
// it in sync.
//
// One deliberate difference: md skips even when the member missed writes
// (a faulty member re-added after writes to the degraded array), which
// leaves its copy stale. The engine then recovers the whole role
// (missedWrites), so no mirror is ever left with old data.
func (a *Array) recoverSkipsAll(targets []*member) bool {
	if a.hasBM || (a.level != layout.RAID1 && a.level != layout.RAID10) || a.rs != nil || a.missedWrites.Load() {
		return false
	}
	for _, t := range targets {
		if t.savedRole < 0 {
			return false
		}
	}
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	return a.meta.recoveryCP == superblock.MaxSector
}

// DetachFaulty takes a faulty member out of the array for a re-add of the
// same device (md's "re-add" written to its dev-*/state): unlike
// RemoveDevice (HOT_REMOVE_DISK) it records nothing by itself, as md
// keeps the rdev bound and only clears Faulty; the AddDevice that follows
// writes the superblocks once. The device is closed.
func (a *Array) DetachFaulty(index int) error {
	return a.detach(index, func(st MemberState) bool { return st == Faulty }, false)
}

// noteMissed records, after a write, that a raid1/raid10 without a bitmap
// was degraded while it ran: some role not in sync missed it. Every write
// either reached a member or found it not in sync (a write in flight when
// the member fails is on it or counted here), and a re-add first drains
// the writes in flight (suspend), so a recovery that starts afterwards
// sees every miss. Cheap on the hot path: one atomic load once set, and a
// walk of the roles only for these levels.
func (a *Array) noteMissed() {
	if a.hasBM || (a.level != layout.RAID1 && a.level != layout.RAID10) || a.missedWrites.Load() {
		return
	}
	if a.degraded() > 0 {
		a.missedWrites.Store(true)
	}
}

// clearMissed forgets the missed writes once every role is in sync again.
func (a *Array) clearMissed() {
	if a.missedWrites.Load() && a.degraded() == 0 {
		a.missedWrites.Store(false)
	}
}
