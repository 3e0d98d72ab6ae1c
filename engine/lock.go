package engine

import (
	"sync"
)

// rangeLocks serialises I/O that touches the same part of the same stripe.
//
// A lock is (key, [lo, hi)): key is a stripe (or region) number, lo and hi
// are sector offsets inside it. Two locks conflict only when their keys
// are equal and their ranges overlap. Keys are hashed onto shards, each
// with its own small mutex held only while the table is updated; a request
// that conflicts waits on a channel of its own that is signalled when an
// overlapping range of its stripe is released. There is no lock or wait
// queue shared by all requests (the lesson of md's 2024 wait_for_overlap
// rework: wait per stripe, only when there is a real overlap).
type rangeLocks struct {
	shards [lockShards]lockShard
}

const lockShards = 256

type lockShard struct {
	mu   sync.Mutex
	held map[uint64]*keyLocks
	free []*keyLocks
	_    [40]byte // keep shards on separate cache lines
}

type span struct{ lo, hi uint64 }

type keyLocks struct {
	held    []span
	waiters []*lockWaiter
}

type lockWaiter struct {
	lo, hi uint64
	ch     chan struct{}
}

var waiterPool = sync.Pool{New: func() any { return &lockWaiter{ch: make(chan struct{}, 1)} }}

func (t *rangeLocks) shard(key uint64) *lockShard {
	// Fibonacci hashing spreads neighbouring stripes over the shards.
	return &t.shards[(key*0x9e3779b97f4a7c15)>>56%lockShards]
}

func overlaps(a, b span) bool { return a.lo < b.hi && b.lo < a.hi }

// lock takes [lo, hi) of key, waiting while an overlapping range is held.
func (t *rangeLocks) lock(key, lo, hi uint64) {
	sh := t.shard(key)
	want := span{lo, hi}
	sh.mu.Lock()
	if sh.held == nil {
		sh.held = make(map[uint64]*keyLocks)
	}
	kl := sh.held[key]
	if kl == nil {
		if n := len(sh.free); n > 0 {
			kl = sh.free[n-1]
			sh.free = sh.free[:n-1]
		} else {
			kl = &keyLocks{}
		}
		sh.held[key] = kl
	}
	conflict := false
	for _, s := range kl.held {
		if overlaps(s, want) {
			conflict = true
			break
		}
	}
	if !conflict {
		// Do not overtake an earlier waiter for the same range:
		// that would let a stream of small writes starve it.
		for _, w := range kl.waiters {
			if overlaps(span{w.lo, w.hi}, want) {
				conflict = true
				break
			}
		}
		if !conflict {
			kl.held = append(kl.held, want)
			sh.mu.Unlock()
			return
		}
	}
	// Queue up; unlock grants the range (adds it to held) before
	// signalling, so on wake-up the lock is ours.
	w := waiterPool.Get().(*lockWaiter)
	w.lo, w.hi = lo, hi
	kl.waiters = append(kl.waiters, w)
	sh.mu.Unlock()
	<-w.ch
	waiterPool.Put(w)
	return
}

// unlock releases [lo, hi) of key and hands the freed space to waiters in
// arrival order.
func (t *rangeLocks) unlock(key, lo, hi uint64) {
	sh := t.shard(key)
	rel := span{lo, hi}
	sh.mu.Lock()
	kl := sh.held[key]
	for i, s := range kl.held {
		if s == rel {
			last := len(kl.held) - 1
			kl.held[i] = kl.held[last]
			kl.held = kl.held[:last]
			break
		}
	}
	// Grant, in order, every waiter whose range is now free of held ranges
	// and of earlier (still waiting) overlapping waiters.
	if len(kl.waiters) > 0 {
		keep := kl.waiters[:0]
		for _, w := range kl.waiters {
			ws := span{w.lo, w.hi}
			ok := true
			for _, s := range kl.held {
				if overlaps(s, ws) {
					ok = false
					break
				}
			}
			if ok {
				for _, k := range keep {
					if overlaps(span{k.lo, k.hi}, ws) {
						ok = false
						break
					}
				}
			}
			if ok {
				kl.held = append(kl.held, ws)
				w.ch <- struct{}{}
			} else {
				keep = append(keep, w)
			}
		}
		for i := len(keep); i < len(kl.waiters); i++ {
			kl.waiters[i] = nil
		}
		kl.waiters = keep
	}
	if len(kl.held) == 0 && len(kl.waiters) == 0 {
		delete(sh.held, key)
		if len(sh.free) < 64 {
			sh.free = append(sh.free, kl)
		}
	}
	sh.mu.Unlock()
}
