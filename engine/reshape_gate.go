package engine

import (
	"sync/atomic"
	"time"
)

// reshapeGate holds back only the user requests that touch the part of
// the array a reshape is moving, as md does (raid5.c make_stripe_request
// and reshape_request, Linux 6.1: a request whose stripes lie between
// reshape_progress and the end of the stripes being moved waits and
// retries; every other request goes on through the geometry of its side).
//
// The mover publishes the window it is about to move (array sectors, the
// same range in both geometries), then waits until every request that
// may have chosen its side without seeing that window is done; a request
// that sees the window and touches it waits for the window to be
// released and routes itself again. The requests that may not have seen
// the window are counted in two sharded counters, one per parity of an
// epoch the mover advances when it publishes a window (a sleepable RCU
// in miniature): the mover waits for the counter of the epoch before,
// which no new request increments, so requests arriving during the wait
// never delay it and requests elsewhere in the array never wait for it.
// A request costs two atomic loads of the epoch, one of the window and
// an increment and decrement of a counter shard; nothing is allocated.
type reshapeGate struct {
	win   atomic.Pointer[gateWindow]
	epoch atomic.Uint64
	users [2]inflightCounter
	// waiting counts the requests parked on a window (tests watch it).
	waiting atomic.Int64
}

// gateWindow is one window being moved: array sectors [lo, hi); done is
// closed when it is released.
type gateWindow struct {
	lo, hi uint64
	done   chan struct{}
}

func (w *gateWindow) overlaps(s, n uint64) bool { return s < w.hi && w.lo < s+n }

// enter admits a request on array sectors [s, s+n) (key spreads the
// counters as a.enter's key does): it returns once the request does not
// touch the window being moved and the mover will wait for it before it
// moves another; the result is passed to leave.
func (g *reshapeGate) enter(key, s, n uint64) uint64 {
	for {
		e := g.epoch.Load()
		g.users[e&1].add(key, 1)
		if g.epoch.Load() == e {
			w := g.win.Load()
			if w == nil || !w.overlaps(s, n) {
				return e
			}
			g.users[e&1].add(key, -1)
			g.waiting.Add(1)
			<-w.done
			g.waiting.Add(-1)
			continue
		}
		g.users[e&1].add(key, -1) // the mover moved on: count in the new epoch
	}
}

func (g *reshapeGate) leave(key, e uint64) { g.users[e&1].add(key, -1) }

// hold publishes the window [lo, hi) and returns once no request that
// might touch it without having seen it is in flight.
func (g *reshapeGate) hold(lo, hi uint64) *gateWindow {
	w := &gateWindow{lo: lo, hi: hi, done: make(chan struct{})}
	g.win.Store(w)
	before := g.epoch.Add(1) - 1
	for !g.users[before&1].zero() {
		time.Sleep(20 * time.Microsecond)
	}
	return w
}

// release ends the window (after reshape_progress moved past it) and
// lets the requests that waited for it route themselves again.
func (g *reshapeGate) release(w *gateWindow) {
	g.win.Store(nil)
	close(w.done)
}

// narrow replaces the held window w by [lo, hi) inside it: requests that
// waited for w route themselves again.
func (g *reshapeGate) narrow(w *gateWindow, lo, hi uint64) *gateWindow {
	n := &gateWindow{lo: lo, hi: hi, done: make(chan struct{})}
	g.win.Store(n)
	close(w.done)
	return n
}

// reshapeHoldHook, when set (engine tests), is called while a window is
// held, before its data moves: user requests that touch [lo, hi) wait,
// all others run.
var reshapeHoldHook func(lo, hi uint64)
