package engine

import (
	"sync/atomic"
	"time"
)

// When a reshape records reshape_position (md_update_sb, one event each),
// as Linux 6.1 does it: reshape_request records before a step when its
// safety rule asks (mdMustRecord) or when 10 s have passed since the last
// record (conf->reshape_checkpoint); md_do_sync records no progress of a
// reshape of its own (its curr_resync_completed updates skip
// MD_RECOVERY_RESHAPE), so the 1/16 rule of the other actions does not
// apply. The rule's min_offset_diff is raid5_run's: computed when the
// personality started, from the members' offsets then. A reshape started
// on the running array (mdadm writes new_offset afterwards) therefore
// has 0, and md's rule treats it as in place; one continued after an
// assembly has the offsets' difference. Where md's rule then leaves a
// restart unsafe (clear), the engine records as well, except in an
// in-place reshape with a backup file (reshape_slide.go): the same count
// and a shrink keep those windows in the backup file instead and record
// by md's rule only.

// reshapeCheckpointEvery is reshape_request's 10*HZ.
const reshapeCheckpointEvery = 10 * time.Second

// reshapeRecord is md's record state of a reshape.
type reshapeRecord struct {
	live bool         // started by this process: conf->min_offset_diff is 0
	last atomic.Int64 // conf->reshape_checkpoint (Unix ns)
}

// mdOffsetDiff is conf->min_offset_diff (sectors) for md's rule.
func (ra *reshapeAction) mdOffsetDiff() int64 {
	if ra.a.rs.rec.live {
		return 0
	}
	return ra.a.minOffsetDiff()
}

// markRecorded restarts the 10 s period (conf->reshape_checkpoint =
// jiffies).
func (a *Array) markRecorded() {
	a.rs.rec.last.Store(a.opts.Clock().UnixNano())
}

// timerDue is reshape_request's time_after(jiffies,
// conf->reshape_checkpoint + 10*HZ).
func (ra *reshapeAction) timerDue() bool {
	last := time.Unix(0, ra.a.rs.rec.last.Load())
	return ra.a.opts.Clock().Sub(last) > reshapeCheckpointEvery
}

// mustRecord says whether the row [lo, hi) moved at reshape_progress at
// needs reshape_position recorded first: md's time or safety rule, or
// the engine's own safety (clear; a shrink with a backup file backs such
// a row up instead, backDue, before this is asked).
func (ra *reshapeAction) mustRecord(at, lo, hi uint64) bool {
	s := ra.a.rs.safe.Load()
	return ra.timerDue() || ra.mdMustRecord(at, s) || !ra.clear(lo, hi, s)
}
