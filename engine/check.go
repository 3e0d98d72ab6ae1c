package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"mdtool/engine/layout"
)

// ErrDegradedCheck: check/repair needs every member.
var ErrDegradedCheck = errors.New("engine: check needs a non-degraded array")

const checkPage = 8 // sectors compared at a time, like md's STRIPE_SECTORS

// Check scrubs the array like `echo check > sync_action`: it reads every
// stripe (every copy) under the stripe lock, recomputes parity (compares
// copies) and returns md's mismatch_cnt: the number of sectors in 4 KiB
// units that disagree. With repair it rewrites parity (or copies the first
// in-sync copy over the others), like `echo repair`.
//
// It runs as the array's sync action (SyncStatus shows its progress) and
// waits for a running action to end first.
func (a *Array) Check(ctx context.Context, repair bool) (uint64, error) {
	if a.closed.Load() {
		return 0, ErrClosed
	}
	if repair && a.opts.ReadOnly {
		return 0, ErrReadOnly
	}
	if a.Degraded() > 0 {
		return 0, ErrDegradedCheck
	}
	act := ActionCheck
	if repair {
		act = ActionRepair
	}
	ca := &checkAction{a: a, act: act, repair: repair}
	err := a.runSync(ctx, ca)
	return ca.mismatches, err
}

// checkAction is check and repair (syncAction): every stripe
// (syncStripe) or mirrored region (syncMirror) from the start, counting
// mismatches; nothing is checkpointed.
type checkAction struct {
	wholeRange
	a          *Array
	act        string
	repair     bool
	mismatches uint64
}

func (c *checkAction) name() string { return c.act }

func (c *checkAction) prepare() (total, from uint64, ok bool, err error) {
	a := c.a
	if a.degraded() > 0 {
		return 0, 0, false, ErrDegradedCheck
	}
	switch {
	case a.striped != nil:
		return a.striped.Stripes() * a.striped.ChunkSectors(), 0, true, nil
	case a.level == layout.RAID1 || a.level == layout.RAID10:
		return a.geo.ArraySectors(), 0, true, nil
	}
	return 0, 0, false, fmt.Errorf("engine: %v has no redundancy to check", a.level)
}

func (c *checkAction) unit(p, max uint64) (uint64, error) {
	a := c.a
	var mm, n, w uint64
	var err error
	if a.striped != nil {
		n = a.striped.ChunkSectors()
		mm, w, err = a.syncStripe(p/n, c.repair)
	} else {
		mm, n, w, err = a.syncMirror(p, max, c.repair)
	}
	c.mismatches += mm
	a.sc.mismatches.Add(mm)
	a.sc.written.Add(w)
	return n, err
}

// checkpoint is md_do_sync's progress record during a check or repair
// (MD_RECOVERY_SYNC is set for both): curr_resync_completed moves and
// MD_SB_CHANGE_CLEAN asks for a superblock update, but recovery_cp stays
// (it only moves past itself, and a clean array's is MaxSector), so the
// update is md_update_sb's clean one: on a clean array it bumps the
// events and the next one rolls them back. Like a resync's record, an
// active array leaves it to its next clean transition.
func (c *checkAction) checkpoint(uint64, bool) {
	a := c.a
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	if a.meta.inSync && !a.closed.Load() {
		if err := a.updateSuperLocked(false); err != nil {
			a.opts.Logf("md: superblock update: %v", err)
		}
	}
}

// finish: whether the check completed or was interrupted, md_do_sync ends
// by setting MD_SB_CHANGE_DEVS, which md_check_recovery writes out, and
// md_reap_sync_thread writes the superblocks again (md_update_sb(mddev,
// 1)): two forced event bumps. resync_offset is left as it was.
func (c *checkAction) finish(_ uint64, err error) error {
	a := c.a
	if a.closed.Load() {
		return err
	}
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	for i := 0; i < 2; i++ {
		a.meta.changeDevs = true
		if uerr := a.updateSuperLocked(true); uerr != nil {
			a.opts.Logf("md: superblock update: %v", uerr)
		}
	}
	return err
}

// syncStripe reads one stripe under its lock, rebuilds what fails to read,
// recomputes parity and counts the 4 KiB pages whose parity differs; with
// repair it rewrites the parity that differs.
func (a *Array) syncStripe(stripe uint64, repair bool) (mismatches, written uint64, err error) {
	sp := a.pers.(*stripedPers)
	g := sp.g
	c := g.ChunkSectors()
	size := int(c) << 9
	a.lockStripe(stripe, 0, c)
	w := sp.work()
	g.Row(stripe, &w.row)
	row := &w.row
	for d, role := range row.Data {
		w.db[d] = w.alloc(size)
		m := a.roles[role]
		w.ol.add(m, false, m.dataOff+int64(row.Sector)<<9, w.db[d], role)
	}
	oldP := w.alloc(size)
	mp := a.roles[row.P]
	w.ol.add(mp, false, mp.dataOff+int64(row.Sector)<<9, oldP, row.P)
	var oldQ []byte
	if sp.r6 {
		oldQ = w.alloc(size)
		mq := a.roles[row.Q]
		w.ol.add(mq, false, mq.dataOff+int64(row.Sector)<<9, oldQ, row.Q)
	}
	err = sp.runReads(w, stripe)
	if isReadError(err) {
		// md's check rebuilds what failed to read and rewrites it.
		err = nil
		for d, role := range row.Data {
			w.have[d] = !w.bad[role]
		}
		w.pb, w.qb = oldP, oldQ
		if rerr := sp.rebuild(w, 0, c); rerr != nil {
			err = rerr
		}
		for d, role := range row.Data {
			if w.bad[role] && err == nil {
				sp.rewrite(a.roles[role], w.db[d], int64(row.Sector), c)
				written += c
			}
		}
	}
	if err == nil {
		w.pb = w.alloc(size)
		if sp.r6 {
			w.qb = w.alloc(size)
		}
		sp.computeParity(w)
		bad := false
		for o := 0; o < size; o += checkPage << 9 {
			e := o + checkPage<<9
			pDiff := !w.bad[row.P] && !bytes.Equal(w.pb[o:e], oldP[o:e])
			qDiff := sp.r6 && !w.bad[row.Q] && !bytes.Equal(w.qb[o:e], oldQ[o:e])
			if pDiff || qDiff {
				mismatches += checkPage
				bad = true
			}
		}
		for _, pr := range [2]struct {
			role int
			b    []byte
		}{{row.P, w.pb}, {row.Q, w.qb}} {
			if pr.role < 0 {
				continue
			}
			if w.bad[pr.role] {
				sp.rewrite(a.roles[pr.role], pr.b, int64(row.Sector), c)
				written += c
			} else if bad && repair {
				m := a.roles[pr.role]
				if _, werr := m.dev.WriteAt(pr.b, m.dataOff+int64(row.Sector)<<9); werr != nil {
					a.failMember(m, werr)
				} else {
					written += c
				}
			}
		}
	}
	w.release()
	a.unlockStripe(stripe, 0, c)
	return mismatches, written, err
}

// syncMirror compares the copies of array sectors from s (at most max
// sectors, at most 64 KiB, within one mapping run) under the region lock,
// rewrites copies that fail to read and, with repair, copies that differ;
// it returns the mismatching sectors (4 KiB units) and the sectors done.
func (a *Array) syncMirror(s, max uint64, repair bool) (mismatches, done, written uint64, err error) {
	step := uint64(128) // 64 KiB
	if c := a.geo.ChunkSectors(); c > 0 && c < step {
		step = c
	}
	locs := make([]layout.Loc, a.geo.MaxCopies())
	var bufs [][]byte
	var run uint64
	locs, run = a.geo.Map(s, locs)
	n := min(run, step, max)
	a.lockRegions(s, n)
	bufs = bufs[:0]
	var badLocs []layout.Loc
	var goodLocs []layout.Loc
	for _, l := range locs {
		m := a.roles[l.Role]
		if !m.readable(l.Sector, n) {
			continue // a missing member (degraded resync)
		}
		b := make([]byte, n<<9)
		if _, rerr := m.dev.ReadAt(b, m.dataOff+int64(l.Sector)<<9); rerr != nil {
			a.stats.readErrors.add(s, 1)
			if !a.ioFailed(m, rerr) {
				badLocs = append(badLocs, l) // rewritten below
			}
			continue
		}
		bufs = append(bufs, b)
		goodLocs = append(goodLocs, l)
	}
	if len(bufs) == 0 {
		err = fmt.Errorf("%w: sector %d unreadable on every copy", ErrFailed, s)
	} else {
		for o := uint64(0); o < n; o += checkPage {
			e := min(o+checkPage, n)
			for _, b := range bufs[1:] {
				if !bytes.Equal(bufs[0][o<<9:e<<9], b[o<<9:e<<9]) {
					mismatches += e - o
					break
				}
			}
		}
		fix := badLocs
		if repair {
			for i, l := range goodLocs[1:] {
				if !bytes.Equal(bufs[0], bufs[i+1]) {
					fix = append(fix, l)
				}
			}
		}
		for _, l := range fix {
			m := a.roles[l.Role]
			off := m.dataOff + int64(l.Sector)<<9
			chk := make([]byte, len(bufs[0]))
			_, werr := m.dev.WriteAt(bufs[0], off)
			if werr == nil {
				_, werr = m.dev.ReadAt(chk, off)
			}
			if werr != nil {
				a.failMember(m, werr)
			} else {
				m.corrected.Add(1)
				written += n
			}
		}
	}
	a.unlockRegions(s, n)
	return mismatches, n, written, err
}
