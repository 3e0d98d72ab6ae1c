package engine

import (
	"fmt"

	"mdtool/engine/backupfile"
	"mdtool/superblock"
)

// In-place reshapes that keep or lower the number of data devices
// (mdadm 4.2 with --backup-file: data_offset stays, new_offset 0; Grow.c
// reshape_array's "started:" path and child_monitor).
//
// Same number of data devices (a layout or chunk change): the reshape
// runs forwards and every window's new stripes overwrite exactly the
// device range its old stripes occupy, so each window is backed up before
// it is written, into the two parts of mdadm's "-2" header in turn
// (child_monitor, grow_backup, forget_backup): a part is forgotten (the
// members flushed first, so the window it held is durable) before its
// data area is rewritten, and the range the live parts cover stays held
// (the gate), so that their data is the array's there. reshape_position
// is recorded by md's rule only: every 10 s (reshape_checkpoint) and at
// the end before the backup is forgotten. A restart with the file
// restores the parts and goes on after them, even when the superblocks
// hold an older position (readBackup's ahead): every window below the
// parts is durable.
//
// Fewer data devices (a shrink): md runs backwards from the new array's
// end, and reshape_position is recorded by md's rule only too
// (reshape_request's safety rule, every 10 s, the end). Above the rows
// where that rule gives up, it keeps a restart from the recorded position
// safe and the rows move without a backup. From the first row where a
// move would overwrite old data a restart from the recorded position
// reads (clear) with no record of md's first, or at Grow_restart's
// first_block (backDue), every window goes through the backup file's two
// parts as above (slideUnit, backwards), held; a restart with the file
// restores the parts and goes on from their lowest start
// (readBackup's ahead), one without it is refused wherever the engine
// may have moved rows past what the recorded position allows
// (shrinkNeedsBackup: ErrBackupNeeded).
//
// A graceful stop (interruption, the end) forgets the section (length 0)
// and lets the held range go.

// slideState is the backup of an in-place reshape that keeps or lowers
// the data devices.
type slideState struct {
	bf  BackupFile
	h   backupfile.Header
	pin *gateWindow // the range the live section holds, nil when none
	// back: a shrink keeps its rows in the backup from here on (backDue)
	back bool
	// the same count: the part the next window's backup goes to, the
	// size of part 0's area (the largest window), and whether a window
	// was written since the members were last flushed
	part  int
	win   uint64
	dirty bool
}

// firstBlock is Grow_restart's first_block for a shrink from od to nd
// data disks (chunks in sectors): a restart from a position at or above
// it needs no backup.
func firstBlock(oc, nc uint64, od, nd int) uint64 {
	if nd >= od || oc == 0 || nc == 0 {
		return 0 // not a shrink: no first_block
	}
	var nstripe, ostripe, first uint64
	for ostripe >= nstripe {
		ostripe += oc
		first = ostripe * uint64(od)
		nstripe = first / uint64(nd) / nc * nc
	}
	return first
}

// startInPlaceSlide is startReshape with a backup file for a reshape that
// keeps or lowers the data devices (the caller holds the array
// suspended, meta.mu and cfg): the reshape recorded with data_offset
// kept, forwards for the same count, backwards for a shrink, the backup
// file's header written empty first.
func (a *Array) startInPlaceSlide(bf BackupFile, sh reshapeShape, delta int, spares []*member, cfg *cfgUnlocker) error {
	offs := make(map[*member]int64, len(a.all))
	for _, m := range a.all {
		offs[m] = 0
	}
	sh.backwards, sh.inPlace = delta < 0, true
	rs, err := a.newReshapeGeometry(sh, delta, offs)
	if err != nil {
		return err
	}
	if delta < 0 && uint64(a.size>>9) > rs.New.ArraySectors() {
		return ErrShrinkSize
	}
	sl := &slideState{bf: bf, h: *a.newBackupHeader()}
	if err := sl.write(a, nil); err != nil {
		return err
	}
	a.applyReshape(sh, delta, rs, offs, spares)
	for _, m := range a.all {
		m.ls.sb.FeatureMap &^= superblock.FeatureNewOffset // super_1_sync: new_offset only when it differs
		m.ls.sb.NewOffset = 0
	}
	a.rs.slide = sl
	cfg.Unlock() // the superblocks are written without cfgMu (the bitmap's writer takes it)
	return a.updateSuperLocked(true)
}

// write makes the header (and the section's data, when given) durable.
func (sl *slideState) write(a *Array, data []byte) error {
	sl.h.Mtime = uint64(a.opts.Clock().Unix())
	return writeBackup(sl.bf, &sl.h, data)
}

// forget is forget_backup: the header holds no section; the held range
// goes.
func (sl *slideState) forget(a *Array) error {
	if sl.pin != nil {
		a.rs.gate.release(sl.pin)
		sl.pin = nil
	}
	if sl.h.Length == 0 && sl.h.Length2 == 0 {
		return nil
	}
	sl.h.ArrayStart, sl.h.Length, sl.h.ArrayStart2, sl.h.Length2 = 0, 0, 0, 0
	return sl.write(a, nil)
}

// slideUnit moves the window of at most want rows from
// reshape_progress p (below it backwards: slideWindow) with mdadm's
// two-part backup (child_monitor's parts, used in turn): the window
// before is made durable (the members flushed), the part this window's
// backup goes to is forgotten (forget_backup: it held the window before
// that one, durable now), the window is backed up into that part
// (grow_backup: its data, then the header naming both parts) and its new
// stripes written. The range the live parts cover stays held (the gate)
// until a part is forgotten: their data is the array's there.
// reshape_position is recorded by md's rule only (every 10 s:
// reshape_checkpoint; backwards also reshape_request's safety rule; the
// same count never asks for more), so it may lie behind the backup: a
// restart (readReshapeBackup) restores the parts and continues after
// them (below them backwards), since every window before them is
// durable.
func (ra *reshapeAction) slideUnit(p, want uint64) (uint64, error) {
	a := ra.a
	g := a.rs.geo
	sl := a.rs.slide
	if sl.dirty { // the window before must be durable before a record or before its backup goes
		if err := a.flushMembers(); err != nil {
			return 0, err
		}
		sl.dirty = false
	}
	if ra.timerDue() || g.Backwards && ra.mdMustRecord(p, a.rs.safe.Load()) {
		if err := a.recordReshape(); err != nil {
			return 0, err
		}
	}
	lo, hi := ra.slideWindow(p, want)
	if hi <= lo {
		return 0, fmt.Errorf("%w: reshape window at %d is empty", ErrUnsupported, p)
	}
	if sl.win == 0 {
		_, row := ra.reshapeSectors()
		sl.win = max(reshapeWindow/row, 1) * row
	}
	q := sl.part
	if err := sl.forgetPart(a, q); err != nil {
		return 0, err
	}
	hlo, hhi := lo, hi // held: the other part's window (live) and this one
	if o := sl.section(1 - q); o.Length != 0 {
		hlo, hhi = min(lo, o.ArrayStart), max(hi, o.ArrayStart+o.Length)
	}
	w := a.rs.gate.hold(hlo, hhi)
	if sl.pin != nil {
		close(sl.pin.done) // what it held beyond this hold is forgotten and durable
	}
	sl.pin = w
	if reshapeHoldHook != nil {
		reshapeHoldHook(lo, hi)
	}
	b, err := ra.readOld(lo, hi)
	if err != nil {
		return 0, err
	}
	defer putBuf(b)
	if err := sl.writePart(a, q, b.b, lo); err != nil {
		return 0, err
	}
	sl.part = 1 - q
	// the hook's recorded argument is where the window starts (p): what
	// a kill now finds in flight is this window's stripes
	next := hi
	if g.Backwards {
		next = lo
	}
	reshapeStep("backup", next, p, g.New.ArraySectors())
	rp := a.pers.(*reshapePers)
	if err := rp.mover.writeFull(b.b, lo, int((hi-lo)/g.New.StripeSectors()), false, nil); err != nil {
		return 0, err
	}
	a.rs.progress.Store(next)
	if !g.Backwards {
		a.reshapeRecovered()
	}
	sl.dirty = true
	return hi - lo, nil
}

// slideWindow is the window of at most want rows slideUnit moves from
// reshape_progress p: forwards up to the new array's end; backwards down
// to 0 and not past a row md's rule records before (mdMustRecord: the
// next unit records first, where md would).
func (ra *reshapeAction) slideWindow(p, want uint64) (lo, hi uint64) {
	g := ra.a.rs.geo
	_, row := ra.reshapeSectors()
	if !g.Backwards {
		return p, min(p+want*row, g.New.ArraySectors())
	}
	s := ra.a.rs.safe.Load()
	n := min(uint64(1), p/row)
	for ; n > 0 && n < want && (n+1)*row <= p; n++ {
		if ra.mdMustRecord(p-n*row, s) {
			break
		}
	}
	return p - n*row, p
}

// section is part q (0 or 1) of the header.
func (sl *slideState) section(q int) backupfile.Section {
	if q == 0 {
		return backupfile.Section{DevStart: sl.h.DevStart, ArrayStart: sl.h.ArrayStart, Length: sl.h.Length}
	}
	return backupfile.Section{DevStart: sl.h.DevStart + sl.h.DevStart2, ArrayStart: sl.h.ArrayStart2, Length: sl.h.Length2}
}

// forgetPart is forget_backup of part q: the header no longer names it
// (written and synced before the part's data is overwritten).
func (sl *slideState) forgetPart(a *Array, q int) error {
	if sl.section(q).Length == 0 {
		return nil
	}
	if q == 0 {
		sl.h.ArrayStart, sl.h.Length = 0, 0
	} else {
		sl.h.ArrayStart2, sl.h.Length2 = 0, 0
	}
	return sl.write(a, nil)
}

// writePart is grow_backup into part q: d (array sectors from s) written
// to the part's data area (part 1 sl.win sectors after part 0), then the
// "-2" header naming both parts, synced.
func (sl *slideState) writePart(a *Array, q int, d []byte, s uint64) error {
	n := uint64(len(d)) >> 9
	sl.h.Version, sl.h.DevStart2 = 2, sl.win
	off := sl.h.DevStart
	if q == 1 {
		off += sl.win
	}
	if _, err := sl.bf.WriteAt(d, int64(off)*512); err != nil {
		return fmt.Errorf("backup file: %w", err)
	}
	if q == 0 {
		sl.h.ArrayStart, sl.h.Length = s, n
	} else {
		sl.h.ArrayStart2, sl.h.Length2 = s, n
	}
	return sl.write(a, nil)
}

// backDue says whether a shrink with a backup file keeps the row
// [lo, hi) at reshape_progress at, and every row after it, in the backup
// file (slideUnit) instead of moving it under the record rule: at or
// below Grow_restart's first_block (rounded up to rows), or where the
// move would overwrite old data a restart from the recorded position
// reads (clear) and md's rule records nothing first, or would even after
// a record there (md's rule gives up: "readpos behind writepos").
func (ra *reshapeAction) backDue(at, lo, hi uint64) bool {
	sl := ra.a.rs.slide
	if sl == nil || !ra.a.rs.geo.Backwards {
		return false
	}
	if sl.back || at <= ra.tailTop() || !ra.clear(lo, hi, at) {
		return true
	}
	s := ra.a.rs.safe.Load()
	return !ra.clear(lo, hi, s) && !ra.timerDue() && !ra.mdMustRecord(at, s)
}

// tailTop is firstBlock rounded up to the rows of the reshape.
func (ra *reshapeAction) tailTop() uint64 {
	g := ra.a.rs.geo
	_, row := ra.reshapeSectors()
	fb := firstBlock(g.Old.ChunkSectors(), g.New.ChunkSectors(), g.Old.DataDisks(), g.New.DataDisks())
	return (fb + row - 1) / row * row
}

// shrinkNeedsBackup says whether the restart of an in-place shrink (od
// to nd data disks, chunks oc and nc in sectors) from the recorded
// reshape_position pos may need old data the engine overwrote: whether,
// walking down from pos, the engine reaches a row it keeps in the backup
// file (backDue: at or below first_block's row, or one that clear
// refuses against pos) before md's rule records (the position would then
// be a later one). Without the backup file such a restart is refused
// (ErrBackupNeeded).
func shrinkNeedsBackup(pos, oc, nc uint64, od, nd int) bool {
	r := max(oc, nc)
	row := r * uint64(nd)
	fb := firstBlock(oc, nc, od, nd)
	top := (fb + row - 1) / row * row
	for at := pos; ; at -= row {
		if at != pos && mdRecordRule(at, pos, r, uint64(od), uint64(nd), 0, true) {
			return false
		}
		if at <= top || at < row || !clearRule(at-row, at, pos, oc, uint64(od), uint64(nd), 0, true) {
			return true
		}
	}
}

// readOld reads the array sectors [lo, hi) through the old geometry
// (zeroes beyond its end).
func (ra *reshapeAction) readOld(lo, hi uint64) (*buf, error) {
	g := ra.a.rs.geo
	b := getZeroBuf(int(hi-lo) << 9)
	rp := ra.a.pers.(*reshapePers)
	if old := g.Old.ArraySectors(); lo < old {
		n := min(hi, old) - lo
		if err := rp.old.read(b.b[:n<<9], lo); err != nil {
			putBuf(b)
			return nil, err
		}
	}
	return b, nil
}

// endSlide forgets the backup when the reshape stops or ends.
func (ra *reshapeAction) endSlide() error {
	if sl := ra.a.rs.slide; sl != nil {
		return sl.forget(ra.a)
	}
	return nil
}

// slideForgotten says whether the backup file given for the restart of
// an in-place reshape that keeps or lowers the data devices holds this
// array's header with no section, written by the engine (backupTag): it
// stopped the reshape cleanly (forget_backup after recording the
// position), or it had moved nothing since it recorded it (the header
// written empty at the start or after a restore; every window moved
// after that leaves a part live). mdadm 4.2's Grow_restart refuses an
// empty header for the same count; mdtool continues from its own. An
// empty header mdadm's child wrote (forget_backup between two windows,
// with md possibly far beyond the recorded position) has no tag: the
// restart is refused as mdadm refuses it.
func (a *Array) slideForgotten(ref *superblock.Superblock) bool {
	bf := a.opts.ReshapeBackup
	if bf == nil {
		return false
	}
	hb := make([]byte, backupfile.Size)
	if _, err := bf.ReadAt(hb, 0); err != nil {
		return false
	}
	h, err := backupfile.Decode(hb)
	return err == nil && h.SetUUID == ref.SetUUID && h.Tag == backupTag && len(h.Sections()) == 0
}

// attachSlide gives an assembled in-place reshape that keeps or lowers
// the data devices its backup file (Options.ReshapeBackup) to continue
// with; without one a shrink (assembled only where shrinkNeedsBackup
// allows) continues until md's rule gives up, where the move refuses.
func (a *Array) attachSlide(ref *superblock.Superblock) {
	bf := a.opts.ReshapeBackup
	if !a.reshaping() || bf == nil || a.opts.ReadOnly || ref.FeatureMap&superblock.FeatureNewOffset != 0 {
		return
	}
	if g := a.rs.geo; g.New.DataDisks() > g.Old.DataDisks() {
		return
	}
	a.rs.slide = &slideState{bf: bf, h: *a.newBackupHeader()}
}

// UsesReshapeBackup says whether the running reshape writes its backup
// file (Options.ReshapeBackup or ReshapeStart.Backup) as it goes: the
// caller keeps it open until the reshape ends.
func (a *Array) UsesReshapeBackup() bool {
	return a.reshaping() && a.rs.slide != nil
}
