package engine

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"mdtool/superblock"
)

// Superblock state, as md.c keeps it (md_write_start, md_write_end,
// set_in_sync, md_update_sb, super_1_sync in Linux 6.1):
//
//   - The array is "clean" (in_sync) when no write is in flight and the
//     superblocks say so: resync_offset = recovery_cp (MaxSector unless a
//     resync is pending).
//   - The first write after clean marks it active: in_sync = 0, the
//     superblocks are rewritten with resync_offset = 0 and events+1, and
//     the write waits for that (MD_SB_CHANGE_PENDING).
//   - safe_mode_delay (200 ms) after the last write ends, it is marked
//     clean again. For such a clean<->dirty pair md "rolls back" the event
//     counter (can_decrease_events) when the array is not degraded, so
//     spares that were skipped stay current.
//   - Stopping the array marks it clean with a forced update (events+1).
//   - md_update_sb writes the bitmap superblock (events) before the md
//     superblocks.
const (
	stateActive   = 0 // in_sync = 0: writes go straight through
	stateClean    = 1 // in_sync = 1: the next write must mark active first
	stateChecking = 2 // set_in_sync is checking for writes in flight
)

const pendShards = 16

type pendShard struct {
	n    atomic.Int64
	last atomic.Int64 // UnixNano of the last write end
	_    [48]byte
}

// pending sums the writes in flight.
func (ms *metaState) pending() int64 {
	var n int64
	for i := range ms.pend {
		n += ms.pend[i].n.Load()
	}
	return n
}

// lastEnd is when the last write ended (UnixNano).
func (ms *metaState) lastEnd() int64 {
	var t int64
	for i := range ms.pend {
		t = max(t, ms.pend[i].last.Load())
	}
	return t
}

type metaState struct {
	mu    sync.Mutex    // serialises superblock updates
	state atomic.Uint32 // fast-path copy of the state above
	// Writes in flight and the time the last one ended, sharded like
	// md's per-cpu writes_pending so that concurrent writers do not share
	// a cache line.
	pend        [pendShards]pendShard
	events      uint64
	inSync      bool
	recoveryCP  uint64 // resync_offset to record when clean
	canDecrease bool
	changeDevs  bool        // MD_SB_CHANGE_DEVS
	devsDirty   atomic.Bool // a member failed since the superblocks were written
	// journalClean is MD_JOURNAL_CLEAN: the write journal covers the
	// writes in flight, so an active array records resync_offset
	// MaxSector; journalTail is the journal member's journal_tail.
	journalClean bool
	journalTail  uint64
}

// writeStart is md_write_start: count the write, and when the array is
// clean make it active (superblocks rewritten) before the write proceeds.
// key spreads concurrent writers over the pending shards; writeEnd must
// get the same key.
func (a *Array) writeStart(key uint64) error {
	if !a.redundant() {
		return nil
	}
	ps := &a.meta.pend[(key*0x9e3779b97f4a7c15)>>60%pendShards]
	ps.n.Add(1)
	if a.meta.state.Load() == stateActive {
		return nil
	}
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	if a.meta.inSync {
		a.meta.inSync = false
		if err := a.updateSuperLocked(false); err != nil {
			// Like md, carry on: the members that failed are faulty now.
			a.opts.Logf("md: superblock update: %v", err)
		}
	}
	a.meta.state.Store(stateActive)
	if a.failed.Load() {
		ps.n.Add(-1)
		return ErrFailed
	}
	return nil
}

// writeEnd is md_write_end.
func (a *Array) writeEnd(key uint64) {
	if !a.redundant() {
		return
	}
	ps := &a.meta.pend[(key*0x9e3779b97f4a7c15)>>60%pendShards]
	ps.last.Store(a.opts.Clock().UnixNano())
	ps.n.Add(-1)
}

// safeMode marks the array clean once no write has been in flight for
// SafeModeDelay (md's safemode timer + set_in_sync + md_update_sb).
func (a *Array) safeMode(now time.Time) {
	if a.opts.ReadOnly || !a.redundant() || a.opts.SafeModeDelay < 0 {
		return
	}
	if a.meta.state.Load() != stateActive || a.meta.pending() != 0 {
		return
	}
	if now.UnixNano()-a.meta.lastEnd() < int64(a.opts.SafeModeDelay) {
		return
	}
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	a.setInSyncLocked(false)
}

// setInSyncLocked is set_in_sync followed by md_update_sb. The checking
// state and the pending counter form a Dekker pair with writeStart: either
// the writer sees "checking" and takes the slow path (waiting for mu), or
// the check sees its pending count and gives up.
func (a *Array) setInSyncLocked(force bool) {
	if a.meta.inSync {
		if force || a.meta.changeDevs {
			a.updateSuperLocked(force)
		}
		return
	}
	a.meta.state.Store(stateChecking)
	if a.meta.pending() != 0 {
		a.meta.state.Store(stateActive)
		return
	}
	a.meta.inSync = true
	if err := a.updateSuperLocked(force); err != nil {
		a.opts.Logf("md: superblock update: %v", err)
	}
	a.meta.state.Store(stateClean)
}

// stopWrites is __md_stop_writes: flush the bitmap, then, when the array
// was written (or devices changed), mark it clean with a forced update.
func (a *Array) stopWrites() error {
	if !a.redundant() {
		return nil
	}
	var errs []error
	if f, ok := a.bm.(interface{ Flush() error }); ok {
		if err := f.Flush(); err != nil {
			errs = append(errs, err)
		}
	} else {
		// md_bitmap_flush: run the daemon three times with its clock
		// rewound, which clears every idle bit.
		t := a.opts.Clock()
		for i := 1; i <= 3; i++ {
			if err := a.bm.Tick(t.Add(time.Duration(i) * time.Hour)); err != nil {
				errs = append(errs, err)
				break
			}
		}
	}
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	if !a.meta.inSync || a.meta.changeDevs {
		a.meta.inSync = true
		if err := a.updateSuperLocked(true); err != nil {
			errs = append(errs, err)
		}
		a.meta.state.Store(stateClean)
	}
	return errors.Join(errs...)
}

// updateSuperLocked is md_update_sb. force is MD_SB_CHANGE_DEVS or a stop.
func (a *Array) updateSuperLocked(force bool) error {
	if a.opts.ReadOnly || a.opts.NotPersistent { // md_update_sb: !mddev->persistent
		return nil
	}
	if a.meta.changeDevs || a.meta.devsDirty.Swap(false) {
		force = true
		a.meta.changeDevs = false
	}
	// A clean<->dirty transition may leave spares alone, unless devices
	// changed or the array is degraded.
	nospares := !force && a.degraded() == 0
	if nospares && a.meta.inSync && a.meta.recoveryCP == superblock.MaxSector && a.meta.canDecrease && a.meta.events != 1 {
		a.meta.events--
		a.meta.canDecrease = false
	} else {
		a.meta.events++
		a.meta.canDecrease = nospares
	}
	utime := superblock.MakeTime(a.opts.Clock().Unix(), 0)
	var errs []error
	for attempt := 0; attempt < 4; attempt++ {
		if err := a.bm.SetEvents(a.meta.events, a.degraded() > 0); err != nil {
			errs = append(errs, fmt.Errorf("bitmap superblock: %w", err))
		}
		var wg sync.WaitGroup
		var failedMu sync.Mutex
		var failed []*member
		var head *member
		if a.multipath() {
			head = a.mpListHead()
		}
		for _, m := range a.all {
			if !m.writable() && m.State() != Spare && m.State() != Journal {
				continue // faulty members get no superblock writes
			}
			if a.multipath() && m != head {
				continue // md_update_sb: "only need to write one superblock"
			}
			// md gives the journal raid_disk 0: never skipped as a spare
			if m.role < 0 && m.State() != Journal && (m.sbEvents == a.meta.events || (nospares && m.sbEvents+1 == a.meta.events)) {
				continue
			}
			buf := a.syncSuper(m, utime)
			wg.Add(1)
			go func(m *member, buf []byte) {
				defer wg.Done()
				err := writeDurable(m.dev, buf, int64(m.ls.offset)*512)
				if err != nil {
					failedMu.Lock()
					failed = append(failed, m)
					failedMu.Unlock()
					return
				}
				m.sbEvents = a.meta.events
			}(m, buf)
		}
		wg.Wait()
		if len(failed) == 0 {
			return errors.Join(errs...)
		}
		// super_written -> md_error: the member is faulty; rewrite the
		// others so they record it.
		for _, m := range failed {
			errs = append(errs, fmt.Errorf("superblock write to device %d failed", m.index))
			m.state.Store(uint32(Faulty))
			a.logLines(failureLines(a.level, a.mdName(), a.devName(m), a.degraded(), a.n, false, a.checkRedundancy() != nil))
		}
		if err := a.checkRedundancy(); err != nil {
			a.setFailed(fmt.Sprintf("superblock writes failed: %v", err))
		}
	}
	return errors.Join(errs...)
}

// writeDurable writes p at off and makes it durable (md_super_write uses
// REQ_PREFLUSH | REQ_FUA).
func writeDurable(d Device, p []byte, off int64) error {
	if f, ok := d.(FUAWriter); ok {
		if err := d.Flush(); err != nil {
			return err
		}
		_, err := f.WriteAtFUA(p, off)
		return err
	}
	if _, err := d.WriteAt(p, off); err != nil {
		return err
	}
	return d.Flush()
}

// syncSuper is super_1_sync: update m's superblock image from the array
// state and return the bytes to write (the superblock rounded up to the
// member's logical block size, the rest of the 4 KiB area as read).
func (a *Array) syncSuper(m *member, utime superblock.Time) []byte {
	sb := m.ls.sb
	keep := sb.FeatureMap & (superblock.FeatureBadBlocks | superblock.FeatureRAID0Layout | superblock.FeatureJournal)
	if a.reshaping() {
		keep |= sb.FeatureMap & reshapeBits // the reshape fields stay as they were
		sb.ReshapePosition = a.rs.safe.Load()
	}
	sb.FeatureMap = keep
	if a.hasBM && a.bmFile == nil { // md records no bitmap file
		sb.FeatureMap |= superblock.FeatureBitmapOffset
		sb.BitmapOffset = a.bitmapOffsetFor(m)
	}
	sb.Pad0 = 0
	sb.Pad3 = [32]byte{}
	sb.RecoveryOffset = 0
	sb.UTime = utime
	sb.Events = a.meta.events
	sb.Size = a.superDevSectors(sb.Size)
	switch {
	case a.meta.inSync:
		sb.ResyncOffset = a.meta.recoveryCP
	case a.meta.journalClean:
		// super_1_sync: MD_JOURNAL_CLEAN, the log covers what is in flight
		sb.ResyncOffset = superblock.MaxSector
	default:
		sb.ResyncOffset = 0
	}
	if m.State() == Journal {
		sb.RecoveryOffset = a.meta.journalTail // journal_tail shares the field
	}
	sb.CntCorrectedRead = m.corrected.Load()
	if m.failFast {
		sb.DevFlags |= superblock.DevFlagFailFast
	} else {
		sb.DevFlags &^= superblock.DevFlagFailFast
	}
	if m.writeMostly {
		sb.DevFlags |= superblock.DevFlagWriteMostly
	} else {
		sb.DevFlags &^= superblock.DevFlagWriteMostly
	}
	if m.role >= 0 && m.State() == Recovering {
		// super_1_sync: the recorded recovery_offset (a checkpoint), and
		// MD_FEATURE_RECOVERY_BITMAP for a bitmap-guided re-add.
		sb.FeatureMap |= superblock.FeatureRecoveryOffset
		sb.RecoveryOffset = m.recCP.Load()
		if m.savedRole >= 0 && a.hasBM {
			sb.FeatureMap |= superblock.FeatureRecoveryBitmap
		}
	}
	if m.replacement && m.role >= 0 {
		sb.FeatureMap |= superblock.FeatureReplacement
	}
	maxDev := 0
	for _, o := range a.all {
		if o.removed.Load() {
			continue
		}
		if d := int(o.ls.sb.DevNumber) + 1; d > maxDev {
			maxDev = d
		}
	}
	if maxDev > int(sb.MaxDev) {
		sb.MaxDev = uint32(maxDev)
	}
	if len(sb.DevRoles) < int(sb.MaxDev) {
		r := make([]uint16, sb.MaxDev)
		copy(r, sb.DevRoles)
		sb.DevRoles = r
	}
	for i := range sb.DevRoles[:sb.MaxDev] {
		sb.DevRoles[i] = superblock.RoleSpare
	}
	for _, o := range a.all {
		i := o.ls.sb.DevNumber
		if i >= sb.MaxDev || o.removed.Load() {
			continue
		}
		switch o.State() {
		case Faulty:
			sb.DevRoles[i] = superblock.RoleFaulty
		case InSync, Recovering:
			sb.DevRoles[i] = uint16(o.role)
		case Journal:
			sb.DevRoles[i] = superblock.RoleJournal
		default:
			sb.DevRoles[i] = superblock.RoleSpare
		}
	}
	if m.ls.v090 != nil {
		return a.sync090(m)
	}
	if a.multipath() {
		// super_1_sync leaves dev_number as loaded
		desc := sb.DevNumber
		sb.DevNumber = mpDevNumber(m)
		defer func() { sb.DevNumber = desc }()
	}
	enc := sb.MarshalWithChecksum()
	size := (int64(len(enc)) + m.lbs - 1) / m.lbs * m.lbs
	if size > int64(len(m.ls.raw)) {
		size = int64(len(m.ls.raw))
	}
	out := make([]byte, size)
	copy(out, m.ls.raw[:size])
	copy(out, enc)
	copy(m.ls.raw, enc)
	return out
}

// bitmapOffsetFor keeps the member's own bitmap offset (all members of an
// array carry the same one; the kernel writes mddev->bitmap_info.offset).
func (a *Array) bitmapOffsetFor(m *member) int32 { return m.ls.sb.BitmapOffset }
