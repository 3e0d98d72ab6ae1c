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
// down to a chunk boundary. At the action's end (completed or interrupted)
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
}
