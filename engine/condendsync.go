package engine

import (
	"time"

	"mdtool/bitmap"
)

// When a resync or recovery ends the bitmap chunks it synced (Linux 6.1,
// md-bitmap.c and the personalities' sync_request): not chunk by chunk, but
// through md_bitmap_cond_end_sync, which each sync request that does work
// calls with its position. At position 0 it only notes the time; later it
// does nothing until daemon_sleep has passed since the last time, and then
// ends (md_bitmap_end_sync) every chunk wholly below the position, rounded
// down to a chunk boundary, and records the position as
// curr_resync_completed with MD_SB_CHANGE_CLEAN: a superblock write (one
// event) and the start of md_do_sync's next 1/16 period. So a resync or
// recovery longer than daemon_sleep has more events than its 1/16
// records: how many depends on how long it ran, in md as here. At the action's end (completed or interrupted)
// the personality ends the chunk it stopped in as aborted, then
// md_bitmap_close_sync ends every chunk still marked RESYNC as done, before
// the action is seen to be over. An ended chunk's counter is 2; the bitmap
// daemon takes it to 1 on its next pass and clears the bit in memory on the
// pass after (wib.Bitmap.Tick), which is written out by the pass after
// that. So how many bits a resync has cleared on disk when it ends depends
// on how long it ran: nothing for one shorter than daemon_sleep.

// cadenceBitmap is what condEndSync needs of the bitmap runtime.
type cadenceBitmap interface {
	syncBitmap
	ChunkSectors() uint64
	Header() bitmap.Header
}

// condEndSync is md_bitmap_cond_end_sync for one sync action over a sync
// space of total sectors.
type condEndSync struct {
	bm    syncBitmap
	chunk uint64 // bitmap chunk, sectors (a power of two)
	total uint64 // resync_max_sectors
	sleep time.Duration
	clock func() time.Time
	last  time.Time // bitmap->last_end_sync
	next  uint64    // chunks below it were ended by an earlier call
	// record is what md does besides ending chunks when the call acts:
	// it sets curr_resync_completed to the position and
	// MD_SB_CHANGE_CLEAN, so the md thread writes the superblocks (one
	// event) and md_do_sync's next 1/16 period counts from there. drive
	// sets it (nil: nothing is recorded).
	record func(sector uint64)
}

// newCondEndSync returns the cadence of bm, or nil when bm is not a bitmap
// runtime that has one (then chunks are ended as their span ends).
func newCondEndSync(bm syncBitmap, total uint64, clock func() time.Time) *condEndSync {
	cb, ok := bm.(cadenceBitmap)
	if !ok {
		return nil
	}
	sleep := time.Duration(cb.Header().DaemonSleep) * time.Second
	if sleep <= 0 {
		sleep = bitmap.DefaultDaemonSleep * time.Second
	}
	return &condEndSync{bm: bm, chunk: cb.ChunkSectors(), total: total, sleep: sleep, clock: clock, last: clock()}
}

// at is md_bitmap_cond_end_sync(bitmap, sector, false), called by each sync
// request that does work, at its position.
func (c *condEndSync) at(sector uint64) {
	now := c.clock()
	if sector == 0 {
		c.last = now
		return
	}
	if now.Before(c.last.Add(c.sleep)) {
		return
	}
	end := sector &^ (c.chunk - 1)
	for s := c.next; s < end && s < c.total; {
		s += c.bm.EndSync(s, false)
	}
	c.next = max(c.next, end)
	c.last = now
	if c.record != nil {
		c.record(sector)
	}
}

// condEndSyncOf is the cadence of a resync or recovery that has one.
func condEndSyncOf(act syncAction) *condEndSync {
	switch r := act.(type) {
	case *resyncAction:
		return r.ces
	case *recoverAction:
		return r.ces
	}
	return nil
}

// condEndSyncRecord writes the superblocks for md_bitmap_cond_end_sync's
// record at sector at: a recovery's members record it as their
// recovery_offset (md_update_sb takes curr_resync_completed); a resync's
// resync_offset stays (the call leaves recovery_cp), the write happens
// as for md_do_sync's own records (checkpoint: on a clean array).
func (a *Array) condEndSyncRecord(act syncAction, at uint64) {
	if _, ok := act.(*recoverAction); ok {
		act.checkpoint(at, true)
		return
	}
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	if a.meta.inSync && !a.opts.ReadOnly {
		if err := a.updateSuperLocked(false); err != nil {
			a.opts.Logf("md: superblock update: %v", err)
		}
	}
}
