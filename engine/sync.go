package engine

import (
	"context"
	"time"

	"mdtool/superblock"
)

// syncBitmap is the part of the bitmap runtime a resync uses
// (md_bitmap_start_sync / end_sync / close_sync).
type syncBitmap interface {
	StartSync(sector uint64, degraded bool) (needed bool, sectors uint64)
	EndSync(sector uint64, aborted bool) (sectors uint64)
	CloseSync()
}

// NeedsResync reports whether the array was not stopped cleanly and has a
// resync pending (md's recovery_cp below MaxSector), and from where (sync
// space sectors: component sectors for raid1/4/5/6, array sectors for
// raid10).
func (a *Array) NeedsResync() (bool, uint64) {
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	return a.meta.recoveryCP != superblock.MaxSector, a.meta.recoveryCP
}

// syncSize is the size of the sync space in sectors and the unit a resync
// step covers.
func (a *Array) syncSize() (total, unit uint64) {
	if a.striped != nil {
		return a.striped.DevSectors(0), a.striped.ChunkSectors()
	}
	return a.geo.ArraySectors(), 128
}

// Resync brings an array that was not stopped cleanly back in sync, like
// md's resync: from the superblocks' resync_offset on, and with a
// write-intent bitmap only in the chunks it marks, parity is recomputed
// (raid4/5/6) or the first copy is written over the others (raid1/10).
// Each stripe or region is locked while it is synced, so user I/O goes on
// and waits only for the stripe being synced. Progress is checkpointed in
// the superblocks' resync_offset every 1/16 of the array or 5 minutes,
// whichever comes first (when the array is clean at that moment); at the
// end resync_offset becomes MaxSector.
// A cancelled resync leaves the checkpoint where it stopped.
//
// It runs as the array's sync action: it waits for a running one (for
// instance the automatic resync started at Open) and then does what is
// still pending.
func (a *Array) Resync(ctx context.Context) error {
	if a.closed.Load() {
		return ErrClosed
	}
	if a.opts.ReadOnly {
		return ErrReadOnly
	}
	if !a.redundant() {
		return nil
	}
	return a.runSync(ctx, &resyncAction{a: a})
}

// resyncAction is the resync (syncAction): from resync_offset on, only
// in the chunks the bitmap marks, unit by unit (syncUnit).
type resyncAction struct {
	a        *Array
	degraded bool
	total    uint64
	bm       syncBitmap
	hasBM    bool
	needed   bool         // the bitmap marks the current span
	ces      *condEndSync // md_bitmap_cond_end_sync (condendsync.go)
}

func (r *resyncAction) name() string { return ActionResync }

func (r *resyncAction) prepare() (total, from uint64, ok bool, err error) {
	a := r.a
	need, start := a.NeedsResync()
	if !need {
		return 0, 0, false, nil
	}
	// md resyncs what is left of a degraded raid1/raid10 (the copies that
	// remain are made equal; the bitmap keeps its bits for the missing
	// member); a degraded raid4/5/6 cannot be resynced here.
	r.degraded = a.degraded() > 0
	if r.degraded && a.striped != nil {
		return 0, 0, false, ErrDegradedCheck
	}
	total, _ = a.syncSize()
	r.total = total
	r.bm, r.hasBM = a.bm.(syncBitmap)
	if r.hasBM {
		r.ces = newCondEndSync(r.bm, total, a.opts.Clock)
	}
	return total, start, true, nil
}

func (r *resyncAction) span(s, total uint64) (uint64, bool, error) {
	span := total - s
	r.needed = true
	if r.hasBM {
		var ns uint64
		r.needed, ns = r.bm.StartSync(s, r.degraded)
		span = min(ns, span)
	}
	return s + span, r.needed, nil
}

func (r *resyncAction) unit(p, max uint64) (uint64, error) {
	if r.ces != nil {
		r.ces.at(p)
	}
	r.a.growResyncUnit(p)
	return r.a.syncUnit(p, max)
}

// spanDone ends the span's chunk only where md does: when the resync
// stops inside it (aborted); otherwise condEndSync and CloseSync end it.
func (r *resyncAction) spanDone(s uint64, work, aborted bool) {
	if r.hasBM && r.needed && (aborted || r.ces == nil) {
		r.bm.EndSync(s, aborted)
	}
}

// checkpoint records md's position as it is (cpRule: a request boundary
// within the units done, all of it synced).
func (r *resyncAction) checkpoint(pos uint64, _ bool) {
	r.a.checkpoint(pos)
}

func (r *resyncAction) finish(pos uint64, err error) error {
	a := r.a
	if r.hasBM {
		r.bm.CloseSync() // md_bitmap_close_sync, interrupted or not
	}
	if err != nil {
		a.checkpoint(pos - pos%a.syncAlign())
		return err
	}
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	a.meta.recoveryCP = superblock.MaxSector
	a.sc.checkpoint.Store(r.total)
	if a.meta.inSync {
		return a.updateSuperLocked(true)
	}
	return nil
}

func (a *Array) syncAlign() uint64 {
	if a.striped != nil {
		return a.striped.ChunkSectors()
	}
	return 1
}

// syncUnit resyncs the unit at sync sector s (at most max sectors) and
// returns how many sectors it covered.
func (a *Array) syncUnit(s, max uint64) (uint64, error) {
	if a.striped != nil {
		c := a.striped.ChunkSectors()
		mm, w, err := a.syncStripe(s/c, true)
		a.sc.mismatches.Add(mm)
		a.sc.written.Add(w)
		return min(c-s%c, max), err
	}
	mm, n, w, err := a.syncMirror(s, max, true)
	a.sc.mismatches.Add(mm)
	a.sc.written.Add(w)
	return n, err
}

// syncUpdateFrequency is md's UPDATE_FREQUENCY: md_do_sync records its
// progress at least this often, besides every 1/16 of the range.
const syncUpdateFrequency = 5 * time.Minute

// cpRule says when md_do_sync records progress (curr_resync_completed):
// at the top of its loop, once the position passed the last record by
// more than 1/16 of the range (max_sectors >> 4), and once
// UPDATE_FREQUENCY has passed since the last record. md's position moves
// by its personality's sync request (gran sectors, syncGranularity), so
// it records at the first request boundary past that point, however
// large the engine's own units are.
type cpRule struct {
	m, gran, last uint64 // m: max_sectors >> 4; last: the last record
	lastT         time.Time
	clock         func() time.Time
}

func (a *Array) newCPRule(start, total uint64) cpRule {
	return cpRule{m: total / 16, gran: a.syncGranularity(), last: start, lastT: a.opts.Clock(), clock: a.opts.Clock}
}

// due reports whether progress at s (where md's position lands at once,
// such as the end of a span the bitmap lets it skip) is to be recorded
// now, and if so starts the next period.
func (r *cpRule) due(s uint64) bool {
	now := r.clock()
	if s <= r.last+r.m && now.Sub(r.lastT) < syncUpdateFrequency {
		return false
	}
	r.last, r.lastT = s, now
	return true
}

// within returns the next position md records inside work done up to p
// (its request boundary past last+m), if p got there.
func (r *cpRule) within(p uint64) (uint64, bool) {
	g := max(r.gran, 1)
	at := r.last + (r.m/g+1)*g
	if at > p {
		return 0, false
	}
	r.last, r.lastT = at, r.clock()
	return at, true
}

// checkpoint records resync progress (curr_resync_completed) in the
// superblocks when the array is clean; an active array records it at its
// next clean transition.
func (a *Array) checkpoint(s uint64) {
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	if s <= a.meta.recoveryCP {
		return
	}
	a.meta.recoveryCP = s
	a.sc.checkpoint.Store(s)
	if a.meta.inSync {
		if err := a.updateSuperLocked(false); err != nil {
			a.opts.Logf("md: superblock update: %v", err)
		}
	}
}
