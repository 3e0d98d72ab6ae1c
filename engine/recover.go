package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// This file is the engine's management API for failures and recovery, as
// md offers it through sync_action, sync_speed_min/max, the manage ioctls
// (ADD_NEW_DISK, HOT_REMOVE_DISK, SET_DISK_FAULTY) and want_replacement.
//
// Sync space: Done and Total of a SyncStatus are in the units md's
// sync_completed uses: member (component) sectors for raid1/4/5/6 and for
// raid10 recovery, array sectors for a raid10 resync/check.
//
// One sync action runs at a time, on its own goroutine (md's sync
// thread). The array's background goroutine (unless Options.NoDaemon)
// acts like md_check_recovery: spares take missing or faulty roles, and a
// recovery, a resumed replacement or a pending resync starts by itself,
// unless Options.NoAutoSync. AddDevice, FailDevice, Replace and
// StartAction start what they imply in any case (unless frozen); with
// NoAutoSync nothing follows a finished action by itself (a spare added
// while another action ran waits for StartAction(ActionRecover)).
//
// Superblocks follow md: a recovering member carries
// MD_FEATURE_RECOVERY_OFFSET and recovery_offset (written every 1/16 of
// the member or 5 minutes, and where the recovery stops), plus
// MD_FEATURE_RECOVERY_BITMAP for a bitmap-guided re-add and
// MD_FEATURE_REPLACEMENT for a replacement; Open resumes all three.

// Sync actions, as md's sync_action names them.
const (
	ActionIdle    = "idle"
	ActionResync  = "resync"
	ActionRecover = "recover"
	ActionCheck   = "check"
	ActionRepair  = "repair"
	ActionFrozen  = "frozen"
)

// ErrBusy is md's EBUSY: the member is active (remove), the action
// conflicts with a running one, or md refuses for another reason.
var ErrBusy = errors.New("engine: device or resource busy")

// ErrNotReAddable: --re-add is not possible for the device (no bitmap, or
// it is too old for the bitmap, or it belongs to another array).
var ErrNotReAddable = errors.New("engine: re-add not possible")

// SyncStatus is the progress of the running (or last) sync action.
type SyncStatus struct {
	Action     string    // one of the Action constants
	Done       uint64    // sectors done (sync_completed's first number)
	Total      uint64    // sectors in all (its second number)
	SpeedKBps  uint64    // md's sync_speed: KiB/s over the recent window
	Mismatches uint64    // mismatch_cnt of the running or last check/repair
	Started    time.Time // when the action started (zero if idle)
	// LastAction is md's last_sync_action: the last action that ran.
	LastAction string
	// Written counts the member sectors the running or last action wrote
	// (rebuilt or rewritten data/parity), for tests and metrics: a
	// bitmap-guided re-add writes only the dirty chunks.
	Written uint64
	// Checkpoint is the last recorded position (resync_offset or the
	// recovery_offset), in the same units as Done.
	Checkpoint uint64
}

// SyncLimits are md's sync_speed_min and sync_speed_max in KiB/s. Below
// MinKBps a sync never yields to user I/O; above MaxKBps it sleeps. Zero
// means md's default (1000 and 200000).
type SyncLimits struct {
	MinKBps, MaxKBps uint64
}

// AddOptions tune AddDevice.
type AddOptions struct {
	// ReAdd puts a former member back into its old role, recovering only
	// what the bitmap marks dirty since it left (mdadm --re-add). Without
	// a bitmap only a device whose events are the array's goes back (and
	// is recovered in full); an older one, or one too old for the bitmap,
	// fails with ErrNotReAddable.
	ReAdd bool
	// Faulty: with ReAdd, the device is a faulty member md still held
	// (mdadm --re-add of it writes "re-add" to its dev-*/state): no event
	// check, as md makes none there.
	Faulty bool
	// Replacement adds the device as the replacement of the active
	// member in this role (mdadm --replace --with); -1 for none.
	Replacement int
	// WriteMostly marks the new member write-mostly (raid1).
	WriteMostly bool
	// FailFast marks it failfast (mdadm --add --failfast); NoFailFast
	// clears the flag a re-added member had (--nofailfast).
	FailFast, NoFailFast bool
	// DeferRecovery: more devices follow in the same command (mdadm
	// --add A B); spares take roles only after the last one, as md's
	// remove_and_add_spares then sees them all (see spareorder.go).
	DeferRecovery bool
	// Major, Minor: the device's numbers, recorded in a 0.90 disk table
	// (0 for an image file).
	Major, Minor uint32
}

// FailedReason says why the array stopped accepting writes (beyond its
// redundancy), or "" while it works.
func (a *Array) FailedReason() string {
	if !a.failed.Load() {
		return ""
	}
	if p := a.sc.failedWhy.Load(); p != nil {
		return *p
	}
	return "not enough working members"
}

// SyncLimitsOf returns the limits in force.
func (a *Array) SyncLimitsOf() SyncLimits {
	a.sc.mu.Lock()
	l := a.sc.limits
	a.sc.mu.Unlock()
	if l.MinKBps == 0 {
		l.MinKBps = defSpeedMin
	}
	if l.MaxKBps == 0 {
		l.MaxKBps = defSpeedMax
	}
	return l
}

// SetSyncLimits sets sync_speed_min and sync_speed_max.
func (a *Array) SetSyncLimits(l SyncLimits) {
	a.sc.mu.Lock()
	a.sc.limits = l
	a.sc.mu.Unlock()
}

// SyncStatus reports the running (or last) sync action.
func (a *Array) SyncStatus() SyncStatus {
	s := &a.sc
	s.mu.Lock()
	st := SyncStatus{Action: s.action, LastAction: s.last, Total: s.total}
	running := s.running && s.action != ""
	if running {
		st.Started = s.started
	}
	if st.Action == "" {
		st.Action = ActionIdle
	}
	if s.frozen && !running {
		st.Action = ActionFrozen
	}
	s.mu.Unlock()
	st.Done = s.pos.Load()
	if st.Done > st.Total {
		st.Done = st.Total
	}
	st.Mismatches = s.mismatches.Load()
	st.Written = s.written.Load()
	st.Checkpoint = s.checkpoint.Load()
	if running {
		st.SpeedKBps = a.speed()
	}
	return st
}

// StartAction starts a sync action in the background, like writing to
// md's sync_action: ActionCheck, ActionRepair, ActionResync (when one is
// pending), ActionRecover (when a spare can take a missing role), or
// ActionIdle / ActionFrozen to stop the running one (it is resumed from
// its checkpoint later unless frozen). It returns ErrBusy while another
// action runs.
func (a *Array) StartAction(action string) error {
	if a.closed.Load() {
		return ErrClosed
	}
	switch action {
	case ActionIdle, ActionFrozen:
		a.sc.mu.Lock()
		a.sc.frozen = action == ActionFrozen
		a.sc.mu.Unlock()
		a.stopSync(true)
		if action == ActionIdle && a.reshaping() && !a.opts.NoAutoSync && !a.opts.NoDaemon {
			// md: "idle" sets MD_RECOVERY_NEEDED and sync_action reads
			// "reshape" at once; mdadm --wait right after a grow waits
			// for the reshape, never for a gap before it starts.
			a.checkRecovery()
		}
		return nil
	case ActionCheck, ActionRepair, ActionResync, ActionRecover:
	default:
		return fmt.Errorf("engine: unknown sync action %q", action)
	}
	a.sc.disabled.Store(false)
	if a.opts.ReadOnly {
		return ErrReadOnly
	}
	if a.reshaping() {
		return ErrBusy // the reshape owns the sync thread (md: EBUSY)
	}
	if !a.redundant() {
		return fmt.Errorf("%w: %v has no sync actions", ErrUnsupported, a.level)
	}
	a.sc.mu.Lock()
	a.sc.frozen = false
	a.sc.mu.Unlock()
	if a.syncBusy() {
		return ErrBusy
	}
	switch action {
	case ActionResync, ActionRecover:
		// md: clear frozen and let md_check_recovery pick what is needed.
		a.checkRecovery()
		return nil
	}
	if a.Degraded() > 0 {
		return ErrDegradedCheck
	}
	ctx, ok := a.claim(context.Background(), action)
	for tries := 0; !ok && tries < 3 && !a.syncBusy(); tries++ {
		ctx, ok = a.claim(context.Background(), action)
	}
	if !ok {
		return ErrBusy
	}
	go a.runAction(ctx, action, false)
	return nil
}

// syncBusy reports whether a sync action runs; a momentary hold of the
// slot by the background goroutine deciding that nothing is to be done
// is waited out.
func (a *Array) syncBusy() bool {
	for i := 0; i < 100; i++ {
		a.sc.mu.Lock()
		running, act := a.sc.running, a.sc.action
		a.sc.mu.Unlock()
		if !running {
			return false
		}
		if act != "" {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// WaitSync waits until no sync action runs (or ctx ends).
func (a *Array) WaitSync(ctx context.Context) error {
	for {
		a.sc.mu.Lock()
		running, done := a.sc.running, a.sc.done
		a.sc.mu.Unlock()
		if !running {
			return nil
		}
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// RemoveDevice removes a faulty or spare member (mdadm --remove); an active
// one gives ErrBusy. The device is closed; its index is not reused.
func (a *Array) RemoveDevice(index int) error {
	return a.detach(index, func(st MemberState) bool { return st == Faulty || st == Spare }, true)
}

// detach takes the member with device index out of the array when ok
// accepts its state (else ErrBusy) and closes its device; record writes
// the superblocks now (HOT_REMOVE_DISK) rather than leaving them to the
// next update (DetachFaulty).
func (a *Array) detach(index int, ok func(MemberState) bool, record bool) error {
	if a.closed.Load() {
		return ErrClosed
	}
	if a.opts.ReadOnly {
		return ErrReadOnly
	}
	m := a.memberByIndex(index)
	if m == nil {
		return fmt.Errorf("engine: no device %d in the array", index)
	}
	if !ok(m.State()) {
		return ErrBusy
	}
	a.suspend()
	a.meta.mu.Lock()
	a.cfgMu.Lock()
	m.state.Store(uint32(Faulty))
	m.removed.Store(true)
	a.cfgMu.Unlock()
	a.meta.changeDevs = true
	if record {
		if err := a.updateSuperLocked(true); err != nil {
			a.opts.Logf("md: superblock update: %v", err)
		}
	}
	a.meta.mu.Unlock()
	a.resume()
	if record {
		a.sc.disabled.Store(false)
	}
	return m.dev.Close()
}

// FailDevice marks the member with device index faulty (mdadm --fail),
// spares included. md refuses to fail the last working copy: ErrBusy.
func (a *Array) FailDevice(index int) error {
	if a.closed.Load() {
		return ErrClosed
	}
	if a.opts.ReadOnly {
		return ErrReadOnly
	}
	m := a.memberByIndex(index)
	if m == nil {
		return fmt.Errorf("engine: no device %d in the array", index)
	}
	if m.State() == Faulty {
		return nil
	}
	if !a.markFaulty(m, errors.New("marked faulty")) {
		if a.multipath() {
			return nil // multipath_error leaves the last path active; md's state store says nothing
		}
		return ErrBusy
	}
	a.recordFailures()
	a.sc.disabled.Store(false)
	a.checkRecovery()
	return nil
}

// memberByIndex finds the (not removed) member with device index.
func (a *Array) memberByIndex(index int) *member {
	a.cfgMu.RLock()
	defer a.cfgMu.RUnlock()
	for _, m := range a.all {
		if m.index == index && !m.removed.Load() {
			return m
		}
	}
	return nil
}
