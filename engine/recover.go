package engine

import (
	"context"
	"errors"
	"time"
)

// This file is the engine's management API for failures and recovery, as
// md offers it through sync_action, sync_speed_min/max, the manage ioctls
// (ADD_NEW_DISK, HOT_REMOVE_DISK, SET_DISK_FAULTY) and want_replacement.
//
// Sync space: Done and Total of a SyncStatus are in the units md's
// sync_completed uses: member (component) sectors for raid1/4/5/6 and for
// raid10 recovery, array sectors for a raid10 resync/check.

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
	// a bitmap, or when the device is too old, it fails with
	// ErrNotReAddable.
	ReAdd bool
	// Replacement adds the device as the replacement of the active
	// member in this role (mdadm --replace --with); -1 for none.
	Replacement int
	// WriteMostly marks the new member write-mostly (raid1).
	WriteMostly bool
}

// FailedReason says why the array stopped accepting writes (beyond its
// redundancy), or "" while it works.
func (a *Array) FailedReason() string { return "" }

// SyncLimitsOf returns the limits in force.
func (a *Array) SyncLimitsOf() SyncLimits { return SyncLimits{} }

// SetSyncLimits sets sync_speed_min and sync_speed_max.
func (a *Array) SetSyncLimits(l SyncLimits) {}

// SyncStatus reports the running (or last) sync action.
func (a *Array) SyncStatus() SyncStatus { return SyncStatus{Action: ActionIdle} }

// StartAction starts a sync action in the background, like writing to
// md's sync_action: ActionCheck, ActionRepair, ActionResync (when one is
// pending), ActionRecover (when a spare can take a missing role), or
// ActionIdle / ActionFrozen to stop the running one (it is resumed from
// its checkpoint later unless frozen). It returns ErrBusy while another
// action runs.
func (a *Array) StartAction(action string) error { return ErrUnsupported }

// WaitSync waits until no sync action runs (or ctx ends).
func (a *Array) WaitSync(ctx context.Context) error { return nil }

// AddDevice adds dev to the running array, like mdadm --add / --re-add:
// it validates dev (size, block size), writes its superblock (a spare of
// this array, or its old role for a re-add) and starts a recovery onto it
// in the background when a role is missing or faulty. It returns the new
// device index (as in MemberInfo.Device). Nothing is written to dev when
// it is refused.
func (a *Array) AddDevice(dev Device, opts AddOptions) (int, error) {
	return -1, ErrUnsupported
}

// RemoveDevice removes a faulty or spare member (mdadm --remove); an active
// one gives ErrBusy. The device is closed; its index is not reused.
func (a *Array) RemoveDevice(index int) error { return ErrUnsupported }

// FailDevice marks the member with device index faulty (mdadm --fail),
// spares included. md refuses to fail the last working copy: ErrBusy.
func (a *Array) FailDevice(index int) error { return ErrUnsupported }

// Replace asks for the active member in role to be replaced while it
// keeps working (md's want_replacement, mdadm --replace): a spare (the
// device index with, or any spare when with is -1) is rebuilt as its
// replacement; when that completes, the old member becomes faulty.
func (a *Array) Replace(role, with int) error { return ErrUnsupported }
