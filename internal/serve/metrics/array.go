package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
	// RemoteConnected is 1 while a member on an NBD server (label member:
	// its URI) is connected, 0 once its connection is lost (gauge).
	RemoteConnected = "mdtool_member_remote_connected"
	// RemoteLatency is a member's server's recent reply time in seconds
	// (moving average; gauge; label member).
	RemoteLatency = "mdtool_member_remote_latency_seconds"

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

// Array is the metric set of one array and its prometheus.Collector. All
// methods are safe for concurrent use; ObserveIO, IOError and BitmapFlush
// are atomic updates without allocation or locks. A scrape reads the values
// (Collect); nothing on the update path touches client_golang.
type Array struct {
	name string
	reg  *Registry

	ops, bytes, errs [numOps]counter
	lat              [numOps]*histogram

	bmFlushes counter
	bmBytes   *histogram
	bmDirty   gauge

	state     stateSet
	raidDisks gauge
	degraded  gauge

	syncAction                     stateSet
	syncDone, syncTotal, syncSpeed gauge
	mismatches                     gauge
	syncMu                         sync.Mutex
	syncCur                        SyncAction
	marks                          []syncMark
	now                            func() time.Time

	d descs

	remoteMu sync.Mutex
	remote   []RemoteMember
}

// descs are the descriptors of one array's families (label array constant).
type descs struct {
	ops, bytes, errs, lat          *prometheus.Desc
	bmFlushes, bmBytes, bmDirty    *prometheus.Desc
	state, raidDisks, degraded     *prometheus.Desc
	syncAction, syncDone           *prometheus.Desc
	syncTotal, syncSpeed, mismatch *prometheus.Desc
	remoteConn, remoteLat          *prometheus.Desc
}

// RemoteMember is the connection of a member on an NBD server.
type RemoteMember struct {
	URI       string
	Connected bool
	Latency   time.Duration
}

type syncMark struct {
	t    time.Time
	done uint64
}

var (
	arrayStateNames = stateNames(ArrayStates)
	syncActionNames = stateNames(SyncActions)
)

func stateNames[S ~string](states []S) []string {
	out := make([]string, len(states))
	for i, s := range states {
		out[i] = string(s)
	}
	return out
}

// NewArray registers the metrics of the array called name in reg and
// returns them. The array starts in state "inactive" with sync action
// "idle". If reg already holds an array of that name, that one is returned.
func NewArray(reg *Registry, name string) *Array {
	a := &Array{name: name, reg: reg, now: time.Now,
		state:      stateSet{states: arrayStateNames},
		syncAction: stateSet{states: syncActionNames},
		bmBytes:    newHistogram(FlushBytesBuckets),
	}
	for o := range a.lat {
		a.lat[o] = newHistogram(LatencyBuckets)
	}
	a.state.Set(string(StateInactive))
	a.syncAction.Set(string(SyncIdle))
	a.syncCur = SyncIdle
	c := prometheus.Labels{"array": name}
	d := func(fq, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(fq, help, labels, c)
	}
	a.d = descs{
		ops:        d(IOOps, "Requests completed, by op.", "op"),
		bytes:      d(IOBytes, "Bytes requested, by op (flush: 0; discard and write_zeroes: range length).", "op"),
		errs:       d(IOErrors, "Requests that failed, by op.", "op"),
		lat:        d(IOLatency, "Request latency in seconds, by op.", "op"),
		bmFlushes:  d(BitmapFlushes, "Write-intent bitmap flushes."),
		bmBytes:    d(BitmapFlushBytes, "Bytes written per write-intent bitmap flush, over all members."),
		bmDirty:    d(BitmapDirtyChunks, "Write-intent bitmap chunks marked dirty."),
		state:      d(ArrayStateName, "md array_state: 1 for the current state.", "state"),
		raidDisks:  d(RaidDisks, "Member slots (md raid_disks)."),
		degraded:   d(DegradedMembers, "Missing or faulty members (md degraded)."),
		syncAction: d(SyncActionName, "md sync_action: 1 for the running action.", "action"),
		syncDone:   d(SyncCompleted, "Sync progress: sectors done (md sync_completed)."),
		syncTotal:  d(SyncTotal, "Sync progress: sectors to do (md sync_completed)."),
		syncSpeed:  d(SyncSpeed, "Sync speed in bytes per second (md sync_speed)."),
		mismatch:   d(SyncMismatches, "Sectors found inconsistent by the last check or repair (md mismatch_cnt)."),
		remoteConn: d(RemoteConnected, "1 while the member's NBD server is connected, 0 once the connection is lost.", "member"),
		remoteLat:  d(RemoteLatency, "Recent reply time of the member's NBD server in seconds (moving average).", "member"),
	}
	return reg.add(a)
}

// Describe implements prometheus.Collector.
func (a *Array) Describe(ch chan<- *prometheus.Desc) {
	d := &a.d
	for _, x := range []*prometheus.Desc{d.ops, d.bytes, d.errs, d.lat, d.bmFlushes, d.bmBytes,
		d.bmDirty, d.state, d.raidDisks, d.degraded, d.syncAction, d.syncDone, d.syncTotal,
		d.syncSpeed, d.mismatch, d.remoteConn, d.remoteLat} {
		ch <- x
	}
}

// Collect implements prometheus.Collector: it reads the current values.
func (a *Array) Collect(ch chan<- prometheus.Metric) {
	d := &a.d
	for o := Op(0); o < numOps; o++ {
		op := o.String()
		ch <- prometheus.MustNewConstMetric(d.ops, prometheus.CounterValue, float64(a.ops[o].Value()), op)
		ch <- prometheus.MustNewConstMetric(d.bytes, prometheus.CounterValue, float64(a.bytes[o].Value()), op)
		ch <- prometheus.MustNewConstMetric(d.errs, prometheus.CounterValue, float64(a.errs[o].Value()), op)
		ch <- constHistogram(d.lat, a.lat[o], op)
	}
	ch <- prometheus.MustNewConstMetric(d.bmFlushes, prometheus.CounterValue, float64(a.bmFlushes.Value()))
	ch <- constHistogram(d.bmBytes, a.bmBytes)
	ch <- prometheus.MustNewConstMetric(d.bmDirty, prometheus.GaugeValue, a.bmDirty.Value())
	collectStateSet(ch, d.state, &a.state)
	ch <- prometheus.MustNewConstMetric(d.raidDisks, prometheus.GaugeValue, a.raidDisks.Value())
	ch <- prometheus.MustNewConstMetric(d.degraded, prometheus.GaugeValue, a.degraded.Value())
	collectStateSet(ch, d.syncAction, &a.syncAction)
	ch <- prometheus.MustNewConstMetric(d.syncDone, prometheus.GaugeValue, a.syncDone.Value())
	ch <- prometheus.MustNewConstMetric(d.syncTotal, prometheus.GaugeValue, a.syncTotal.Value())
	ch <- prometheus.MustNewConstMetric(d.syncSpeed, prometheus.GaugeValue, a.syncSpeed.Value())
	ch <- prometheus.MustNewConstMetric(d.mismatch, prometheus.GaugeValue, a.mismatches.Value())
	a.remoteMu.Lock()
	defer a.remoteMu.Unlock()
	for _, r := range a.remote {
		c := 0.0
		if r.Connected {
			c = 1
		}
		ch <- prometheus.MustNewConstMetric(d.remoteConn, prometheus.GaugeValue, c, r.URI)
		ch <- prometheus.MustNewConstMetric(d.remoteLat, prometheus.GaugeValue, r.Latency.Seconds(), r.URI)
	}
}

// SetRemote records the members on NBD servers (none: no series).
func (a *Array) SetRemote(rs []RemoteMember) {
	a.remoteMu.Lock()
	a.remote = append(a.remote[:0], rs...)
	a.remoteMu.Unlock()
}

func constHistogram(d *prometheus.Desc, h *histogram, labels ...string) prometheus.Metric {
	cum, count, sum := h.Snapshot()
	buckets := make(map[float64]uint64, len(h.upper))
	for i, ub := range h.upper {
		buckets[ub] = cum[i]
	}
	return prometheus.MustNewConstHistogram(d, count, sum, buckets, labels...)
}

func collectStateSet(ch chan<- prometheus.Metric, d *prometheus.Desc, s *stateSet) {
	cur := s.Get()
	for _, st := range s.states {
		v := 0.0
		if st == cur {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, st)
	}
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

// Close removes the array's metrics from the registry.
func (a *Array) Close() { a.reg.remove(a) }
