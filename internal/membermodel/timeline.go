package membermodel

import (
	"sync"
	"time"
)

// Timeline turns a member's modelled costs into real time, for benchmarks
// that measure an engine against members of a given speed: the member
// serves one request at a time, each for its modelled cost, and the
// caller of Serve is held until its request would have completed. Each
// member has its own Timeline, so different members serve in parallel,
// as separate disks do, while requests to one member queue behind each
// other.
//
// The data transfer itself (a copy into memory, say) is done by the
// caller between Reserve and Wait, and so overlaps the modelled time the
// way DMA overlaps a disk's service time.
type Timeline struct {
	mu   sync.Mutex
	busy time.Time // when the member finishes its queued work
}

// Reserve books a request that keeps the member busy for d, submitted
// now, and returns when it completes: after everything queued before it.
func (t *Timeline) Reserve(d time.Duration) time.Time {
	now := time.Now()
	t.mu.Lock()
	start := t.busy
	if start.Before(now) {
		start = now
	}
	t.busy = start.Add(d)
	done := t.busy
	t.mu.Unlock()
	return done
}

// Wait blocks the calling goroutine (and its thread, as a blocking
// pread/pwrite does) until deadline.
func Wait(deadline time.Time) {
	if d := time.Until(deadline); d > 0 {
		sleep(d)
	}
}
