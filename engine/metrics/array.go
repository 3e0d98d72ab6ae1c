package metrics

import (
	"sync"
	"time"
)

// Metric names of the engine. Every family carries the label "array" (the
// array's name, e.g. "md0").
const (
	// IOOps counts completed requests by op (counter; labels array, op).
	IOOps = "mdtool_io_requests_total"
	// IOBytes counts payload bytes by op; flush counts 0, discard and
	// write_zeroes count the range length (counter; labels array, op).
	IOBytes = "mdtool_io_bytes_total"
	// IOErrors counts requests that failed (counter; labels array, op).
	IOErrors = "mdtool_io_errors_total"
	// IOLatency is the request latency from submission to completion in
	// seconds (histogram; labels array, op; LatencyBuckets).
	IOLatency = "mdtool_io_request_duration_seconds"

	// BitmapFlushes counts write-intent bitmap flushes (counter; label array).
	BitmapFlushes = "mdtool_bitmap_flushes_total"
	// BitmapFlushBytes is the number of bytes written per bitmap flush, over
	// all members (histogram; label array; FlushBytesBuckets).
	BitmapFlushBytes = "mdtool_bitmap_flush_bytes"
	// BitmapDirtyChunks is the number of chunks whose bit is set (gauge;
	// label array).
	BitmapDirtyChunks = "mdtool_bitmap_dirty_chunks"

	// ArrayStateName is md's array_state: 1 for the current state, 0 for the
	// others (gauge; labels array, state; values of ArrayStates).
	ArrayStateName = "mdtool_array_state"
	// RaidDisks is the number of member slots (md raid_disks; gauge).
	RaidDisks = "mdtool_array_raid_disks"
	// DegradedMembers is the number of missing or faulty members (md
	// "degraded"; gauge; label array).
	DegradedMembers = "mdtool_array_degraded_members"

	// SyncActionName is md's sync_action: 1 for the running action, 0 for the
	// others (gauge; labels array, action; values of SyncActions).
	SyncActionName = "mdtool_sync_action"
	// SyncCompleted and SyncTotal are md's sync_completed "done / total" in
	// 512-byte sectors (gauges; label array). Both are 0 when idle.
	SyncCompleted = "mdtool_sync_completed_sectors"
	SyncTotal     = "mdtool_sync_total_sectors"
	// SyncSpeed is the current sync speed in bytes per second, averaged like
	// md's sync_speed over up to SyncSpeedWindow (gauge; label array).
	SyncSpeed = "mdtool_sync_speed_bytes_per_second"
	// SyncMismatches is md's mismatch_cnt in sectors, from the last check or
	// repair (gauge; label array).
	SyncMismatches = "mdtool_sync_mismatch_sectors"
)

// Op is a request type as seen by an export (NBD, FUSE, ublk).
type Op uint8

// The request types.
const (
	OpRead Op = iota
	OpWrite
	OpFlush
	OpDiscard
	OpWriteZeroes
	numOps
)

var opNames = [numOps]string{"read", "write", "flush", "discard", "write_zeroes"}

// String returns the value of the "op" label.
func (o Op) String() string {
	if o < numOps {
		return opNames[o]
	}
	return "unknown"
}

// ArrayState is a value of md's array_state.
type ArrayState string

// md's array states (drivers/md/md.c array_states[]).
const (
	StateClear        ArrayState = "clear"
	StateInactive     ArrayState = "inactive"
	StateSuspended    ArrayState = "suspended"
	StateReadonly     ArrayState = "readonly"
	StateReadAuto     ArrayState = "read-auto"
	StateClean        ArrayState = "clean"
	StateActive       ArrayState = "active"
	StateWritePending ArrayState = "write-pending"
	StateActiveIdle   ArrayState = "active-idle"
	StateBroken       ArrayState = "broken"
)

// ArrayStates lists the states in md's order.
var ArrayStates = []ArrayState{StateClear, StateInactive, StateSuspended, StateReadonly,
	StateReadAuto, StateClean, StateActive, StateWritePending, StateActiveIdle, StateBroken}

// SyncAction is a value of md's sync_action.
type SyncAction string

// md's sync actions.
const (
	SyncIdle    SyncAction = "idle"
	SyncResync  SyncAction = "resync"
	SyncRecover SyncAction = "recover"
	SyncCheck   SyncAction = "check"
	SyncRepair  SyncAction = "repair"
	SyncReshape SyncAction = "reshape"
	SyncFrozen  SyncAction = "frozen"
)

// SyncActions lists the actions.
var SyncActions = []SyncAction{SyncIdle, SyncResync, SyncRecover, SyncCheck, SyncRepair,
	SyncReshape, SyncFrozen}

// LatencyBuckets are the request latency bounds in seconds: 10 µs to 10 s.
var LatencyBuckets = []float64{
	10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6,
	1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3,
	1, 2.5, 5, 10,
}

// FlushBytesBuckets are the bitmap flush size bounds: 512 B to 4 MiB.
var FlushBytesBuckets = ExponentialBuckets(512, 2, 14)

// SyncSpeedWindow is the longest interval the sync speed is averaged over;
// marks are taken at least syncMarkStep apart (md: SYNC_MARKS=10 marks,
// SYNC_MARK_STEP=3 s).
const (
	SyncSpeedWindow = syncMarks * syncMarkStep
	syncMarks       = 10
	syncMarkStep    = 3 * time.Second
)

// Array is the metric set of one array. All methods are safe for concurrent
// use; ObserveIO, IOError and BitmapFlush are atomic updates without
// allocation or locks.
type Array struct {
	name string
	reg  *Registry

	ops, bytes, errs [numOps]*Counter
	lat              [numOps]*Histogram

	bmFlushes *Counter
	bmBytes   *Histogram
	bmDirty   *Gauge

	state     *StateSet
	raidDisks *Gauge
	degraded  *Gauge

	syncAction                      *StateSet
	syncDone, syncTotal, syncSpeed  *Gauge
	mismatches                      *Gauge
	syncMu                          sync.Mutex
	syncCur                         SyncAction
	marks                           []syncMark
	now                             func() time.Time
	opsV, bytesV, errsV             *CounterVec
	latV                            *HistogramVec
	bmFlushesV                      *CounterVec
	bmBytesV                        *HistogramVec
	stateV, syncActionV             *StateSetVec
	bmDirtyV, raidV, degV           *GaugeVec
	syncDoneV, syncTotalV, syncSpdV *GaugeVec
	mismatchV                       *GaugeVec
}

type syncMark struct {
	t    time.Time
	done uint64
}

// NewArray registers the engine families in reg (once per registry) and
// returns the children for the array called name. The array starts in state
// "inactive" with sync action "idle".
func NewArray(reg *Registry, name string) *Array {
	a := &Array{name: name, reg: reg, now: time.Now}
	a.opsV = reg.NewCounterVec(IOOps, "Requests completed, by op.", "array", "op")
	a.bytesV = reg.NewCounterVec(IOBytes, "Bytes requested, by op (flush: 0; discard and write_zeroes: range length).", "array", "op")
	a.errsV = reg.NewCounterVec(IOErrors, "Requests that failed, by op.", "array", "op")
	a.latV = reg.NewHistogramVec(IOLatency, "Request latency in seconds, by op.", LatencyBuckets, "array", "op")
	for o := Op(0); o < numOps; o++ {
		a.ops[o] = a.opsV.With(name, o.String())
		a.bytes[o] = a.bytesV.With(name, o.String())
		a.errs[o] = a.errsV.With(name, o.String())
		a.lat[o] = a.latV.With(name, o.String())
	}
	a.bmFlushesV = reg.NewCounterVec(BitmapFlushes, "Write-intent bitmap flushes.", "array")
	a.bmBytesV = reg.NewHistogramVec(BitmapFlushBytes, "Bytes written per write-intent bitmap flush, over all members.", FlushBytesBuckets, "array")
	a.bmDirtyV = reg.NewGaugeVec(BitmapDirtyChunks, "Write-intent bitmap chunks marked dirty.", "array")
	a.bmFlushes = a.bmFlushesV.With(name)
	a.bmBytes = a.bmBytesV.With(name)
	a.bmDirty = a.bmDirtyV.With(name)

	states := make([]string, len(ArrayStates))
	for i, s := range ArrayStates {
		states[i] = string(s)
	}
	a.stateV = reg.NewStateSetVec(ArrayStateName, "md array_state: 1 for the current state.", "state", states, "array")
	a.raidV = reg.NewGaugeVec(RaidDisks, "Member slots (md raid_disks).", "array")
	a.degV = reg.NewGaugeVec(DegradedMembers, "Missing or faulty members (md degraded).", "array")
	a.state = a.stateV.With(name)
	a.state.Set(string(StateInactive))
	a.raidDisks = a.raidV.With(name)
	a.degraded = a.degV.With(name)

	actions := make([]string, len(SyncActions))
	for i, s := range SyncActions {
		actions[i] = string(s)
	}
	a.syncActionV = reg.NewStateSetVec(SyncActionName, "md sync_action: 1 for the running action.", "action", actions, "array")
	a.syncDoneV = reg.NewGaugeVec(SyncCompleted, "Sync progress: sectors done (md sync_completed).", "array")
	a.syncTotalV = reg.NewGaugeVec(SyncTotal, "Sync progress: sectors to do (md sync_completed).", "array")
	a.syncSpdV = reg.NewGaugeVec(SyncSpeed, "Sync speed in bytes per second (md sync_speed).", "array")
	a.mismatchV = reg.NewGaugeVec(SyncMismatches, "Sectors found inconsistent by the last check or repair (md mismatch_cnt).", "array")
	a.syncAction = a.syncActionV.With(name)
	a.syncAction.Set(string(SyncIdle))
	a.syncCur = SyncIdle
	a.syncDone = a.syncDoneV.With(name)
	a.syncTotal = a.syncTotalV.With(name)
	a.syncSpeed = a.syncSpdV.With(name)
	a.mismatches = a.mismatchV.With(name)
	return a
}

// Name returns the array label value.
func (a *Array) Name() string { return a.name }

// ObserveIO records a completed request of op with its payload size (or
// range length) and latency.
func (a *Array) ObserveIO(op Op, bytes int64, d time.Duration) {
	if op >= numOps {
		return
	}
	a.ops[op].Inc()
	if bytes > 0 {
		a.bytes[op].Add(uint64(bytes))
	}
	a.lat[op].ObserveDuration(d)
}

// IOError records a failed request of op (not counted by ObserveIO).
func (a *Array) IOError(op Op) {
	if op < numOps {
		a.errs[op].Inc()
	}
}

// BitmapFlush records one bitmap flush that wrote bytes in total.
func (a *Array) BitmapFlush(bytes int64) {
	a.bmFlushes.Inc()
	a.bmBytes.Observe(float64(bytes))
}

// SetBitmapDirty records the number of dirty bitmap chunks.
func (a *Array) SetBitmapDirty(chunks uint64) { a.bmDirty.Set(float64(chunks)) }

// SetState records md's array_state; unknown values select no state.
func (a *Array) SetState(s ArrayState) { a.state.Set(string(s)) }

// State returns the recorded array state.
func (a *Array) State() ArrayState { return ArrayState(a.state.Get()) }

// SetMembers records the number of member slots and of missing or faulty
// members.
func (a *Array) SetMembers(raidDisks, degraded int) {
	a.raidDisks.SetInt(int64(raidDisks))
	a.degraded.SetInt(int64(degraded))
}

// SetDegraded records the number of missing or faulty members.
func (a *Array) SetDegraded(n int) { a.degraded.SetInt(int64(n)) }

// SetSync records the running sync action and its progress in sectors, and
// updates the speed from the progress made over the last SyncSpeedWindow.
// Call it periodically while a sync runs, and with SyncIdle (or SyncFrozen)
// when it stops; idle and frozen clear progress and speed. A new action or
// progress going backwards restarts the speed measurement.
func (a *Array) SetSync(action SyncAction, done, total uint64) {
	a.syncMu.Lock()
	defer a.syncMu.Unlock()
	now := a.now()
	if action != a.syncCur || (len(a.marks) > 0 && done < a.marks[len(a.marks)-1].done) {
		a.marks = a.marks[:0]
		a.syncSpeed.Set(0)
	}
	a.syncCur = action
	a.syncAction.Set(string(action))
	if action == SyncIdle || action == SyncFrozen {
		a.marks = a.marks[:0]
		a.syncDone.Set(0)
		a.syncTotal.Set(0)
		a.syncSpeed.Set(0)
		return
	}
	a.syncDone.Set(float64(done))
	a.syncTotal.Set(float64(total))
	if len(a.marks) == 0 {
		a.marks = append(a.marks, syncMark{now, done})
		return
	}
	first := a.marks[0]
	if dt := now.Sub(first.t); dt > 0 {
		a.syncSpeed.Set(float64(done-first.done) * 512 / dt.Seconds())
	}
	if now.Sub(a.marks[len(a.marks)-1].t) >= syncMarkStep {
		if len(a.marks) == syncMarks {
			a.marks = append(a.marks[:0], a.marks[1:]...)
		}
		a.marks = append(a.marks, syncMark{now, done})
	}
}

// SetMismatches records md's mismatch_cnt (sectors).
func (a *Array) SetMismatches(sectors uint64) { a.mismatches.Set(float64(sectors)) }

// Close removes the array's children from the registry (the families stay).
func (a *Array) Close() {
	for _, v := range []interface{ deleteMatching(string, string) int }{
		&a.opsV.vec, &a.bytesV.vec, &a.errsV.vec, &a.latV.vec, &a.bmFlushesV.vec,
		&a.bmBytesV.vec, &a.bmDirtyV.vec, &a.stateV.vec, &a.raidV.vec, &a.degV.vec,
		&a.syncActionV.vec, &a.syncDoneV.vec, &a.syncTotalV.vec, &a.syncSpdV.vec,
		&a.mismatchV.vec,
	} {
		v.deleteMatching("array", a.name)
	}
}
