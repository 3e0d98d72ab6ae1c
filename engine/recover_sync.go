package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// The sync thread, after md.c's md_check_recovery / md_do_sync (Linux 6.1):
// one action at a time (resync, recovery, check, repair) runs on its own
// goroutine; it reports its position after every unit, is throttled by
// sync_speed_min/max and by user I/O, and can be interrupted (idle,
// frozen, Close), leaving its checkpoint behind.

const (
	syncMarks    = 10              // SYNC_MARKS
	syncMarkStep = 3 * time.Second // SYNC_MARK_STEP
	defSpeedMin  = 1000            // KiB/s, md's sysctl_speed_limit_min
	defSpeedMax  = 200000          // KiB/s, md's sysctl_speed_limit_max
)

type syncMark struct {
	t  time.Time
	io uint64
}

// syncCtl is the state of the sync thread.
type syncCtl struct {
	mu      sync.Mutex
	running bool
	action  string
	cancel  context.CancelFunc
	done    chan struct{} // closed when the running action ends
	frozen  bool
	last    string
	started time.Time
	total   uint64
	limits  SyncLimits
	marks   [syncMarks]syncMark
	lastMk  int
	lastIO  uint64 // userIO at the last idle check

	pos, io, written, mismatches, checkpoint atomic.Uint64

	// sleep waits d or until ctx ends (tests replace it).
	sleep func(ctx context.Context, d time.Duration)

	reconf    sync.Mutex // serialises configuration changes
	failedWhy atomic.Pointer[string]
	// disabled is md's recovery_disabled: an action failed (not
	// interrupted); the daemon does not retry it until a management
	// operation or StartAction.
	disabled atomic.Bool
	// spareHold: until this time (unix ns) no spare takes a role; set
	// by AddDevice with DeferRecovery (see spareorder.go).
	spareHold atomic.Int64
}

func (s *syncCtl) init() {
	s.action = ActionIdle
	s.last = ActionIdle
	s.sleep = func(ctx context.Context, d time.Duration) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

// setFailed records why the array stopped (MD_BROKEN).
func (a *Array) setFailed(why string) {
	if a.sc.failedWhy.Load() == nil {
		a.sc.failedWhy.Store(&why)
	}
	a.failed.Store(true)
}

// claim takes the sync slot for action (md's MD_RECOVERY_RUNNING). It
// fails when an action runs or the array is closed.
func (a *Array) claim(parent context.Context, action string) (context.Context, bool) {
	s := &a.sc
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running || a.closed.Load() {
		return nil, false
	}
	ctx, cancel := context.WithCancel(parent)
	s.running = true
	s.action = action
	s.cancel = cancel
	s.done = make(chan struct{})
	return ctx, true
}

// claimWait claims the slot, waiting for a running action to end.
func (a *Array) claimWait(ctx context.Context, action string) (context.Context, error) {
	for {
		if a.closed.Load() {
			return nil, ErrClosed
		}
		if c, ok := a.claim(ctx, action); ok {
			return c, nil
		}
		a.sc.mu.Lock()
		done := a.sc.done
		running := a.sc.running
		a.sc.mu.Unlock()
		if !running {
			continue
		}
		select {
		case <-done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// begin starts the progress accounting of the claimed action.
func (a *Array) begin(action string, total, start uint64) {
	s := &a.sc
	s.mu.Lock()
	defer s.mu.Unlock()
	s.action = action
	s.total = total
	s.started = a.opts.Clock()
	s.pos.Store(start)
	s.io.Store(0)
	s.written.Store(0)
	s.mismatches.Store(0)
	s.checkpoint.Store(start)
	for i := range s.marks {
		s.marks[i] = syncMark{t: s.started}
	}
	s.lastMk = 0
	s.lastIO = a.userIO.load()
}

// release gives the slot back. record says an action ran (it becomes
// last_sync_action).
func (a *Array) release(record bool) {
	s := &a.sc
	s.mu.Lock()
	if record && s.action != "" {
		s.last = s.action
	}
	s.action = ActionIdle
	s.running = false
	s.cancel()
	close(s.done)
	s.mu.Unlock()
}

// stopSync interrupts the running action; with wait, until it ended.
func (a *Array) stopSync(wait bool) {
	s := &a.sc
	s.mu.Lock()
	if !s.running {
		s.mu.Unlock()
		return
	}
	s.cancel()
	done := s.done
	s.mu.Unlock()
	if wait {
		<-done
	}
}

// step records that the action reached pos (sync-space sectors) after
// doing io sectors of work, then throttles like md_do_sync.
func (a *Array) step(ctx context.Context, pos, io uint64) error {
	s := &a.sc
	s.pos.Store(pos)
	s.io.Add(io)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		now := a.opts.Clock()
		lim := a.SyncLimitsOf()
		s.mu.Lock()
		if now.Sub(s.marks[s.lastMk].t) >= syncMarkStep {
			s.lastMk = (s.lastMk + 1) % syncMarks
			s.marks[s.lastMk] = syncMark{t: now, io: s.io.Load()}
		}
		oldest := s.marks[(s.lastMk+1)%syncMarks]
		if oldest.t.IsZero() || oldest.t.Before(s.started) {
			oldest = syncMark{t: s.started}
		}
		cur := s.io.Load()
		speed := (cur-oldest.io)/2/(uint64(now.Sub(oldest.t)/time.Second)+1) + 1
		io := a.userIO.load()
		idle := io == s.lastIO
		s.lastIO = io
		s.mu.Unlock()
		if speed <= lim.MinKBps {
			return nil
		}
		if speed > lim.MaxKBps {
			s.sleep(ctx, 500*time.Millisecond)
			continue
		}
		if !idle {
			// is_mddev_idle failed: give user I/O a chance.
			s.sleep(ctx, 2*time.Millisecond)
		}
		return ctx.Err()
	}
}

// speed is md's sync_speed in KiB/s.
func (a *Array) speed() uint64 {
	s := &a.sc
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return 0
	}
	now := a.opts.Clock()
	oldest := s.marks[(s.lastMk+1)%syncMarks]
	if oldest.t.IsZero() || oldest.t.Before(s.started) {
		oldest = syncMark{t: s.started}
	}
	dt := uint64(now.Sub(oldest.t) / time.Second)
	if dt == 0 {
		dt = 1
	}
	return (s.io.Load() - oldest.io) / dt / 2
}

// suspend waits until no user request is in flight and holds new ones
// back (mddev_suspend), so that roles and members can change.
func (a *Array) suspend() {
	a.sc.reconf.Lock()
	a.suspMu.Lock()
	a.suspended.Store(true)
	a.suspMu.Unlock()
	for !a.inflight.zero() {
		time.Sleep(50 * time.Microsecond)
	}
}

func (a *Array) resume() {
	a.suspMu.Lock()
	a.suspended.Store(false)
	a.suspCond.Broadcast()
	a.suspMu.Unlock()
	a.sc.reconf.Unlock()
}

// checkRecovery is md_check_recovery: when no action runs (and the
// array is not frozen), spares take missing or faulty roles
// (remove_and_add_spares) and a recovery or a pending resync starts in
// the background.
func (a *Array) checkRecovery() {
	if a.multipath() {
		a.mpCheckRecovery()
		return
	}
	if a.opts.ReadOnly || !a.redundant() || a.closed.Load() || a.failed.Load() {
		return
	}
	a.sc.mu.Lock()
	frozen := a.sc.frozen
	a.sc.mu.Unlock()
	if frozen {
		return
	}
	a.freeFaultySlots()
	if a.sparesHeld() || !a.syncWork() {
		return
	}
	ctx, ok := a.claim(context.Background(), "")
	if !ok {
		return
	}
	if old, sp := a.pendingReplacement(); sp != nil {
		a.sc.mu.Lock()
		a.sc.action = ActionRecover
		a.sc.mu.Unlock()
		a.startReplace(ctx, old, sp, true, false)
		return
	}
	act := a.pickAction()
	if act == "" {
		a.release(false)
		return
	}
	a.sc.mu.Lock()
	a.sc.action = act // visible in SyncStatus before the goroutine runs
	a.sc.mu.Unlock()
	go a.runAction(ctx, act, true)
}

// syncWork tells, without taking the sync slot, whether checkRecovery
// may have something to start (so that idle ticks never hold the slot).
func (a *Array) syncWork() bool {
	if a.reshaping() {
		return true // md_check_recovery: the reshape goes on before anything else
	}
	if holes, spares := a.sparePlan(); len(holes) > 0 && len(spares) > 0 {
		return true
	}
	a.cfgMu.RLock()
	rec := len(a.recoveryTargets()) > 0
	mirrors := a.striped == nil
	deg := a.degraded()
	a.cfgMu.RUnlock()
	if rec {
		return true
	}
	if _, sp := a.pendingReplacement(); sp != nil {
		return true
	}
	need, _ := a.NeedsResync()
	return need && (deg == 0 || mirrors)
}

// pickAction decides what the sync thread does next (holding the slot).
func (a *Array) pickAction() string {
	if a.reshaping() && !a.failed.Load() {
		return ActionReshape
	}
	a.assignSpares()
	if a.failed.Load() {
		return ""
	}
	if len(a.recoveryTargets()) > 0 {
		return ActionRecover
	}
	if need, _ := a.NeedsResync(); need && (a.degraded() == 0 || a.striped == nil) {
		return ActionResync
	}
	return ""
}

// newAction is the syncAction of a background sync_action (nil for an
// unknown one).
func (a *Array) newAction(act string) syncAction {
	switch act {
	case ActionRecover:
		return &recoverAction{a: a}
	case ActionResync:
		return &resyncAction{a: a}
	case ActionCheck, ActionRepair:
		return &checkAction{a: a, act: act, repair: act == ActionRepair}
	case ActionReshape:
		return &reshapeAction{a: a}
	}
	return nil
}

// runAction runs a claimed action and releases the slot. Unless
// NoAutoSync is set it then goes on with what md_check_recovery would
// start next (a waiting spare, the resync after a recovery) without
// giving the slot up in between, so WaitSync sees one busy period.
func (a *Array) runAction(ctx context.Context, act string, chain bool) {
	for {
		var err error
		if sa := a.newAction(act); sa != nil {
			err = a.drive(ctx, sa)
		}
		if err != nil && ctx.Err() == nil {
			a.opts.Logf("md: %s failed: %v", act, err)
			a.sc.disabled.Store(true)
		}
		if err != nil || ctx.Err() != nil || !chain || a.opts.NoAutoSync || a.closed.Load() {
			break
		}
		a.sc.mu.Lock()
		frozen := a.sc.frozen
		a.sc.mu.Unlock()
		if frozen {
			break
		}
		next := a.pickAction()
		if next == "" {
			break
		}
		a.sc.mu.Lock()
		a.sc.last = act
		a.sc.action = next
		a.sc.mu.Unlock()
		act = next
	}
	a.release(true)
}

// assignSpares is remove_and_add_spares: faulty members leave their
// roles and spares take the roles without an in-sync member, as
// recovering members from sector 0.
func (a *Array) assignSpares() int {
	return a.placeSpares(func(holes []int, spares []*member) int {
		n := 0
		take := func(r int, sp *member, guided bool) {
			if old := a.roles[r]; old != nil {
				old.role = -1 // hot_remove_disk: the faulty member leaves its slot
			}
			sp.role = r
			if !guided {
				sp.savedRole = -1
			}
			sp.replacement = false
			sp.recovery.Store(0)
			sp.recCP.Store(0)
			sp.state.Store(uint32(Recovering))
			a.roles[r] = sp
			n++
			a.opts.Logf("md: recovery of role %d onto device %d (bitmap-guided: %v)", r, sp.index, guided)
		}
		free := make(map[int]bool, len(holes))
		for _, r := range holes {
			free[r] = true
		}
		// A replacement whose member failed takes over the role and goes on
		// recovering from where it is.
		for _, m := range a.all {
			if r := m.role; m.replacement && r >= 0 && free[r] && m.State() == Recovering && !m.removed.Load() && a.roles[r] != m {
				if old := a.roles[r]; old != nil {
					old.role = -1
				}
				m.replacement = false
				a.roles[r] = m
				delete(free, r)
				n++
				a.opts.Logf("md: replacement device %d takes over role %d", m.index, r)
			}
		}
		takeSparesInKernelOrder(spares, holes, free, func(r int, sp *member, guided bool) { take(r, sp, guided) })
		return n
	})
}

// placeSpares runs place on the missing or faulty roles (holes) and the
// spares when there are both and spares are not held, with the array
// suspended and its configuration locked (the plan taken again under the
// locks), and records what place put into roles (the count it returns)
// in one superblock update (MD_SB_CHANGE_DEVS). It returns that count.
func (a *Array) placeSpares(place func(holes []int, spares []*member) int) int {
	if a.opts.ReadOnly || a.sparesHeld() {
		return 0
	}
	if holes, spares := a.sparePlan(); len(holes) == 0 || len(spares) == 0 {
		return 0
	}
	a.suspend()
	defer a.resume()
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	a.cfgMu.Lock()
	a.failMu.Lock()
	n := 0
	// A batch of adds may have begun while this call waited for the array.
	if !a.sparesHeld() {
		n = place(a.sparePlanLocked())
	}
	a.failMu.Unlock()
	a.cfgMu.Unlock()
	if n > 0 {
		a.meta.changeDevs = true
		if err := a.updateSuperLocked(true); err != nil {
			a.opts.Logf("md: superblock update: %v", err)
		}
	}
	return n
}

func (a *Array) sparePlan() (holes []int, spares []*member) {
	a.cfgMu.RLock()
	defer a.cfgMu.RUnlock()
	return a.sparePlanLocked()
}

func (a *Array) sparePlanLocked() (holes []int, spares []*member) {
	for r, m := range a.roles {
		if m == nil || m.removed.Load() || m.State() == Faulty {
			holes = append(holes, r)
		}
	}
	for _, m := range a.all {
		if m.role < 0 && !m.removed.Load() && m.State() == Spare {
			spares = append(spares, m)
		}
		if m.replacement && m.role >= 0 && a.roles[m.role] != m && m.State() == Recovering && !m.removed.Load() {
			spares = append(spares, m) // may take over a failed role
		}
	}
	return holes, spares
}

// recoveryTargets lists the members being recovered.
func (a *Array) recoveryTargets() []*member {
	var out []*member
	for _, m := range a.roles {
		if m != nil && m.State() == Recovering && !m.removed.Load() {
			out = append(out, m)
		}
	}
	return out
}
