package engine

import (
	"fmt"

	"mdtool/engine/layout"
)

// Recovery (md_do_sync with MD_RECOVERY_RECOVER, Linux 6.1): the members
// in Recovering state are rebuilt from redundancy, from the lowest
// recovery offset on, in member sectors. Each unit (a stripe for
// raid4/5/6, up to 64 KiB of a chunk for raid1/10) is rebuilt under the
// stripe or region lock, so user I/O goes on; a member's data becomes
// readable as soon as its unit is written. recovery_offset is recorded in
// the superblocks every 1/16 of the member or 5 minutes, whichever
// comes first (curr_resync_completed), and where the recovery stops. A re-added member (saved_raid_disk) is
// rebuilt only where the bitmap has bits set.

// bitmapChunks is what recovery needs to walk a bitmap (raid10).
type bitmapChunks interface {
	ChunkSectors() uint64
	Chunks() uint64
}

// recoverAction is the recovery (syncAction) of the members in
// Recovering state, from the lowest recovery offset on; a re-added
// member (bitmap-guided) skips the chunks the bitmap has clean.
type recoverAction struct {
	a       *Array
	targets []*member
	live    []*member // the targets still recovering, at the span's start
	total   uint64
	guided  bool // conf->fullsync unset: only the bitmap's dirty chunks
	still   bool // the array stays degraded after this recovery
	bm      syncBitmap
	hasBM   bool
	r10     bool
	needed  bool         // the bitmap marks the current span
	skipAll bool         // raid1/raid10 without a bitmap: md skips the whole recovery (recoverSkipsAll)
	io      bool         // a unit ran since the last checkpoint (see checkpoint)
	ces     *condEndSync // md_bitmap_cond_end_sync (condendsync.go)
}

func (r *recoverAction) name() string { return ActionRecover }

func (r *recoverAction) prepare() (total, from uint64, ok bool, err error) {
	a := r.a
	r.targets = a.recoveryTargets()
	if len(r.targets) == 0 {
		return 0, 0, false, nil
	}
	r.total = a.geo.DevSectors(r.targets[0].role)
	from = r.total
	r.guided = a.hasBM
	for _, t := range r.targets {
		from = min(from, t.recovery.Load())
		if t.savedRole < 0 {
			r.guided = false // conf->fullsync
		}
	}
	r.still = a.degraded()-len(r.targets) > 0
	r.skipAll = a.recoverSkipsAll(r.targets)
	r.bm, r.hasBM = a.bm.(syncBitmap)
	r.r10 = a.level == layout.RAID10
	if r.hasBM && !r.r10 {
		r.ces = newCondEndSync(r.bm, r.total, a.opts.Clock)
	}
	a.opts.Logf("md: recovery of %d member(s) from sector %d of %d (bitmap-guided: %v)", len(r.targets), from, r.total, r.guided)
	return r.total, from, true, nil
}

func (r *recoverAction) span(s, total uint64) (uint64, bool, error) {
	r.live = liveTargets(r.targets)
	if len(r.live) == 0 {
		return s, false, fmt.Errorf("%w: every member being recovered failed", ErrFailed)
	}
	if r.a.failed.Load() {
		return s, false, ErrFailed
	}
	span := total - s
	r.needed = true
	if r.skipAll {
		for _, t := range r.live {
			advance(t, total)
		}
		return total, false, nil
	}
	if r.hasBM && !r.r10 {
		var ns uint64
		r.needed, ns = r.bm.StartSync(s, r.still)
		span = min(ns, span)
	}
	end := s + span
	if r.guided && !r.needed {
		// Clean chunk: the re-added member holds it already.
		for _, t := range r.live {
			advance(t, end)
		}
		return end, false, nil
	}
	return end, true, nil
}

func (r *recoverAction) unit(p, max uint64) (uint64, error) {
	if r.ces != nil {
		r.ces.at(p)
	}
	n, w, err := r.a.recoverUnit(p, max, r.live, r.guided, r.still)
	r.io = true
	r.a.sc.written.Add(w)
	return n, err
}

func (r *recoverAction) spanDone(s uint64, work, aborted bool) {
	if work && r.hasBM && !r.r10 && r.needed && (aborted || r.ces == nil) {
		r.bm.EndSync(s, aborted)
	}
}

// checkpoint records the progress (md_do_sync's curr_resync_completed
// every 1/16). md sets MD_SB_CHANGE_CLEAN for it, but the superblocks are
// written only when the md thread (raid1d, raid10d, raid5d) next runs, and
// what wakes it is the recovery's I/O: while a recovery only skips chunks
// (a re-add whose chunks the bitmap has clean) nothing is written, and the
// end of the recovery records the position with the rest.
func (r *recoverAction) checkpoint(pos uint64, forced bool) {
	if !forced && !r.io {
		return
	}
	r.io = false
	r.a.recoveryCheckpoint(r.targets, pos, false)
}

func (r *recoverAction) finish(pos uint64, err error) error {
	a := r.a
	completed := err == nil && pos >= r.total
	if r.hasBM && r.r10 {
		if bc, ok := a.bm.(bitmapChunks); ok {
			// the raid10 bitmap is in array sectors: settle it as a whole
			for c := uint64(0); c < bc.Chunks(); c++ {
				r.bm.StartSync(c*bc.ChunkSectors(), r.still)
				r.bm.EndSync(c*bc.ChunkSectors(), !completed)
			}
		}
	}
	if !completed && r.hasBM && !r.r10 && !r.still {
		r.bm.CloseSync() // md_bitmap_close_sync ends what was synced
	}
	if !completed {
		// md_do_sync on interruption: recovery_offset = where it got to.
		a.recoveryCheckpoint(r.targets, ^uint64(0), true)
		return err
	}
	if r.hasBM && !r.still {
		r.bm.CloseSync()
	}
	a.finishRecovery(liveTargets(r.targets))
	a.clearMissed()
	return nil
}

func liveTargets(ts []*member) []*member {
	var out []*member
	for _, t := range ts {
		if t.State() == Recovering && !t.removed.Load() {
			out = append(out, t)
		}
	}
	return out
}

// advance moves a member's recovery position forward to s.
func advance(m *member, s uint64) {
	for {
		cur := m.recovery.Load()
		if cur >= s || m.recovery.CompareAndSwap(cur, s) {
			return
		}
	}
}

// recoveryCheckpoint records the targets' positions, at most at (md's
// record inside a unit), as their recovery_offset (curr_resync_completed)
// in the superblocks; force writes them even when nothing moved.
func (a *Array) recoveryCheckpoint(targets []*member, at uint64, force bool) {
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	changed := force
	low := ^uint64(0)
	for _, t := range targets {
		if t.State() != Recovering {
			continue
		}
		// md_update_sb: recovery_offset = curr_resync_completed, the
		// position md recorded, which may lie inside the unit just done
		if r := min(t.recovery.Load(), at); r > t.recCP.Load() {
			t.recCP.Store(r)
			changed = true
		}
		low = min(low, t.recCP.Load())
	}
	if low != ^uint64(0) {
		a.sc.checkpoint.Store(low)
	}
	if !changed || a.opts.ReadOnly {
		return
	}
	if err := a.updateSuperLocked(false); err != nil {
		a.opts.Logf("md: superblock update: %v", err)
	}
}

// finishRecovery is spare_active: the rebuilt members become in sync and
// the superblocks say so. A finished replacement takes over its role and
// the member it replaced becomes faulty.
func (a *Array) finishRecovery(done []*member) {
	if len(done) == 0 {
		return
	}
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	// md_do_sync ends by setting MD_SB_CHANGE_DEVS, which
	// md_check_recovery writes out before md_reap_sync_thread activates
	// the spares and writes the superblocks again: two event bumps.
	a.meta.changeDevs = true
	if err := a.updateSuperLocked(true); err != nil {
		a.opts.Logf("md: superblock update: %v", err)
	}
	for _, t := range done {
		t.state.Store(uint32(InSync))
		t.recovery.Store(0)
		t.recCP.Store(0)
		t.savedRole = -1
		a.opts.Logf("md: recovery of role %d onto device %d done", t.role, t.index)
	}
	a.sc.checkpoint.Store(a.sc.total)
	a.meta.changeDevs = true
	if err := a.updateSuperLocked(true); err != nil {
		a.opts.Logf("md: superblock update: %v", err)
	}
}

// recoverUnit rebuilds the unit at member sector s (at most max sectors)
// onto the live targets and returns the sectors covered and written.
func (a *Array) recoverUnit(s, max uint64, targets []*member, guided, still bool) (n, written uint64, err error) {
	switch {
	case a.striped != nil:
		c := a.striped.ChunkSectors()
		written, err = a.recoverStripe(s/c, targets)
		return min(c-s%c, max), written, err
	case a.level == layout.RAID10:
		return a.recoverRAID10(s, max, targets, guided, still)
	}
	return a.recoverMirror(s, max, targets)
}

// recoverStripe rebuilds one stripe's blocks of the targets.
func (a *Array) recoverStripe(stripe uint64, targets []*member) (uint64, error) {
	sp := a.pers.(*stripedPers)
	g := sp.g
	c := g.ChunkSectors()
	a.lockStripe(stripe, 0, c)
	defer a.unlockStripe(stripe, 0, c)
	w := sp.work()
	defer w.release()
	g.Row(stripe, &w.row)
	row := &w.row
	ms := row.Sector
	var todo []*member
	lo := c // a recovery resumed inside the stripe starts at its offset
	for _, t := range targets {
		if r := t.recovery.Load(); r < ms+c && t.writable() {
			todo = append(todo, t)
			lo = min(lo, max(r, ms)-ms)
		}
	}
	if len(todo) == 0 {
		return 0, nil
	}
	n := c - lo
	var err error
	for attempt := 0; attempt < 4; attempt++ {
		w.freeBufs()
		for d, role := range row.Data {
			w.have[d] = sp.avail(w, role, ms+lo, n)
		}
		err = sp.gather(w, lo, n, false)
		if err == nil {
			err = sp.rebuild(w, lo, n)
		}
		if !isReadError(err) {
			break
		}
	}
	if err != nil {
		return 0, err
	}
	sp.computeParity(w)
	for _, t := range todo {
		var b []byte
		switch t.role {
		case row.P:
			b = w.pb
		case row.Q:
			b = w.qb
		default:
			for d, role := range row.Data {
				if role == t.role {
					b = w.db[d]
				}
			}
		}
		if b == nil {
			continue
		}
		w.ol.add(t, true, t.dataOff+int64(ms+lo)<<9, b, t.role)
	}
	a.run(w.ol.ops)
	var written uint64
	for i := range w.ol.ops {
		op := &w.ol.ops[i]
		if op.err != nil {
			a.stats.writeErrors.add(stripe, 1)
			a.failMember(op.m, op.err)
			continue
		}
		written += n
		advance(op.m, ms+c)
	}
	w.ol.ops = w.ol.ops[:0]
	return written, nil
}

// recoverMirror copies raid1 sectors [s, s+n) from an in-sync copy onto
// the targets.
func (a *Array) recoverMirror(s, max uint64, targets []*member) (n, written uint64, err error) {
	locs, run := a.geo.Map(s, make([]layout.Loc, 0, a.geo.MaxCopies()))
	n = min(run, 128, max)
	a.lockRegions(s, n)
	defer a.unlockRegions(s, n)
	written, err = a.copyOnto(locs, n, targets, nil)
	return n, written, err
}

// copyOnto reads n sectors of one array range (its copies in locs) from a
// readable copy and writes them onto the targets among locs whose data
// there is not valid yet (only onto only, when set).
func (a *Array) copyOnto(locs []layout.Loc, n uint64, targets []*member, only *member) (uint64, error) {
	isTarget := func(m *member) bool {
		for _, t := range targets {
			if t == m {
				return true
			}
		}
		return false
	}
	var need []layout.Loc
	for _, l := range locs {
		m := a.roles[l.Role]
		if m == nil || !isTarget(m) || (only != nil && m != only) || !m.writable() || m.recovery.Load() >= l.Sector+n {
			continue
		}
		need = append(need, l)
	}
	if len(need) == 0 {
		return 0, nil
	}
	buf := getBuf(int(n) << 9)
	defer putBuf(buf)
	b := buf.b
	got := false
	for _, l := range locs {
		m := a.roles[l.Role]
		if m == nil || !m.readable(l.Sector, n) {
			continue
		}
		if _, err := m.dev.ReadAt(b, m.dataOff+int64(l.Sector)<<9); err != nil {
			a.stats.readErrors.add(l.Sector, 1)
			a.ioFailed(m, err)
			continue
		}
		got = true
		break
	}
	if !got {
		return 0, fmt.Errorf("%w: no readable copy of member sector %d for recovery", ErrFailed, need[0].Sector)
	}
	var written uint64
	for _, l := range need {
		m := a.roles[l.Role]
		if _, err := m.dev.WriteAt(b, m.dataOff+int64(l.Sector)<<9); err != nil {
			a.stats.writeErrors.add(l.Sector, 1)
			a.failMember(m, err)
			continue
		}
		written += n
		advance(m, l.Sector+n)
	}
	return written, nil
}

// recoverRAID10 rebuilds member sectors [s, s+n) of each target from the
// other copies of the array sectors they hold.
func (a *Array) recoverRAID10(s, max uint64, targets []*member, guided, still bool) (n, written uint64, err error) {
	c := a.geo.ChunkSectors()
	n = min(c-s%c, 128, max)
	bm, hasBM := a.bm.(syncBitmap)
	locs := make([]layout.Loc, 0, a.geo.MaxCopies())
	for _, t := range targets {
		if t.recovery.Load() >= s+n {
			continue
		}
		v, ok := a.geo.Unmap(t.role, s)
		if !ok {
			advance(t, s+n) // space that holds no array data
			continue
		}
		if guided && hasBM {
			if need, _ := bm.StartSync(v, still); !need {
				advance(t, s+n)
				continue
			}
		}
		var run uint64
		locs, run = a.geo.Map(v, locs)
		m := min(n, run)
		a.lockRegions(v, m)
		w, cerr := a.copyOnto(locs, m, targets, t)
		a.unlockRegions(v, m)
		written += w
		if cerr != nil {
			return n, written, cerr
		}
		if m < n {
			// the rest of the unit maps elsewhere: the next call does it
			n = m
		}
	}
	return n, written, nil
}
