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
// end; the record rule keeps the windows safe down to the critical
// section at the bottom (Grow_restart's first_block, or where clear
// fails). There each row is backed up before it moves and the file then
// holds the moved row and the next one below (tailUnit), held, so that a
// restart restores both and lands above 0.
//
// A graceful stop (interruption, the end) forgets the section (length 0)
// and lets the held range go.

// slideState is the backup of an in-place reshape that keeps or lowers
// the data devices.
type slideState struct {
	bf  BackupFile
	h   backupfile.Header
	pin *gateWindow // the range the live section holds, nil when none
	// tail: where a shrink's bottom section began (0: not reached)
	tail uint64
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
	sl := &slideState{bf: bf, h: backupfile.Header{Version: 1, SetUUID: a.uuid, DevStart: backupfile.DataStart / 512}}
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

// hold publishes the window [lo, hi) together with the range the live
// section holds, then lets the old hold go.
func (sl *slideState) hold(g *reshapeGate, lo, hi uint64) *gateWindow {
	if sl == nil || sl.pin == nil {
		return g.hold(lo, hi)
	}
	w := g.hold(min(lo, sl.pin.lo), max(hi, sl.pin.hi))
	close(sl.pin.done)
	sl.pin = nil
	return w
}

// slideUnit moves the window of want rows from reshape_progress p of a
// reshape that keeps the data devices, with mdadm's two-part backup
// (child_monitor's parts, used in turn): the window before is made
// durable (the members flushed), the part this window's backup goes to is
// forgotten (forget_backup: it held the window before that one, durable
// now), the window is backed up into that part (grow_backup: its data,
// then the header naming both parts) and its new stripes written. The
// range the live parts cover stays held (the gate) until a part is
// forgotten: their data is the array's there. reshape_position is
// recorded by md's rule only (every 10 s: reshape_checkpoint; the same
// count never asks for more), so it may lie behind the backup: a restart
// (readReshapeBackup) restores the parts and continues after them, since
// every window below them is durable.
func (ra *reshapeAction) slideUnit(p, want uint64) (uint64, error) {
	a := ra.a
	g := a.rs.geo
	sl := a.rs.slide
	_, row := ra.reshapeSectors()
	hi := min(p+want*row, g.New.ArraySectors())
	if hi <= p {
		return 0, fmt.Errorf("%w: reshape window at %d is empty", ErrUnsupported, p)
	}
	if sl.dirty { // the window before must be durable before a record or before its backup goes
		if err := a.flushMembers(); err != nil {
			return 0, err
		}
		sl.dirty = false
	}
	if ra.timerDue() {
		if err := a.recordReshape(); err != nil {
			return 0, err
		}
	}
	if sl.win == 0 {
		sl.win = max(reshapeWindow/row, 1) * row
	}
	q := sl.part
	if err := sl.forgetPart(a, q); err != nil {
		return 0, err
	}
	lo := p // held: the other part's window (live) and this one
	if o := sl.section(1 - q); o.Length != 0 {
		lo = min(lo, o.ArrayStart)
	}
	w := a.rs.gate.hold(lo, hi)
	if sl.pin != nil {
		close(sl.pin.done) // what it held beyond [lo, hi) is forgotten and durable
	}
	sl.pin = w
	if reshapeHoldHook != nil {
		reshapeHoldHook(p, hi)
	}
	b, err := ra.readOld(p, hi)
	if err != nil {
		return 0, err
	}
	defer putBuf(b)
	if err := sl.writePart(a, q, b.b, p); err != nil {
		return 0, err
	}
	sl.part = 1 - q
	// the hook's recorded argument is the window's start here: what a
	// kill now finds in flight is this window's stripes
	reshapeStep("backup", hi, p, g.New.ArraySectors())
	rp := a.pers.(*reshapePers)
	if err := rp.mover.writeFull(b.b, p, int((hi-p)/g.New.StripeSectors()), false, nil); err != nil {
		return 0, err
	}
	a.rs.progress.Store(hi)
	a.reshapeRecovered()
	sl.dirty = true
	return hi - p, nil
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

// tailDue says whether a shrink with a backup file must back up its
// bottom section before moving the row at reshape_progress at ([lo, hi)):
// at or below Grow_restart's first_block (rounded up to rows), or where
// the record rule cannot keep a restart safe.
func (ra *reshapeAction) tailDue(at, lo, hi uint64) bool {
	sl := ra.a.rs.slide
	if sl == nil || !ra.a.rs.geo.Backwards || sl.tail != 0 {
		return false
	}
	return at <= ra.tailTop() || !ra.clear(lo, hi, at)
}

// tailTop is firstBlock rounded up to the rows of the reshape.
func (ra *reshapeAction) tailTop() uint64 {
	g := ra.a.rs.geo
	_, row := ra.reshapeSectors()
	fb := firstBlock(g.Old.ChunkSectors(), g.New.ChunkSectors(), g.Old.DataDisks(), g.New.DataDisks())
	return (fb + row - 1) / row * row
}

// tailUnit moves the row below reshape_progress p of a shrink's bottom
// section (mdadm's two-part backup): the header holds the row to move
// (and the row moved before), held; after the move it holds the moved row
// and the next one below, so that a restart (Grow_restart: both sections
// restored, the position their lower start) never needs old data a move
// overwrote; then the position is recorded. A restart thus lands on a
// position above 0 except in the last row, where md 6.1 refuses a
// backwards reshape at 0 ("too early for auto-recovery").
func (ra *reshapeAction) tailUnit(p uint64) (uint64, error) {
	a := ra.a
	sl := a.rs.slide
	_, row := ra.reshapeSectors()
	if p < row {
		return 0, fmt.Errorf("%w: reshape at %d below one row", ErrUnsupported, p)
	}
	lo := p - row
	if sl.tail == 0 {
		if err := a.recordReshape(); err != nil {
			return 0, err
		}
		w := sl.hold(&a.rs.gate, lo, p)
		sl.pin = w
		b, err := ra.readOld(lo, p)
		if err != nil {
			return 0, err
		}
		err = ra.writeSections(b.b, lo, nil, 0)
		putBuf(b)
		if err != nil {
			return 0, err
		}
		sl.tail = p
	}
	w := sl.hold(&a.rs.gate, lo, p)
	sl.pin = w
	if reshapeHoldHook != nil {
		reshapeHoldHook(lo, p)
	}
	b, err := ra.readOld(lo, p)
	if err != nil {
		return 0, err
	}
	defer putBuf(b)
	rp := a.pers.(*reshapePers)
	if err := rp.mover.writeFull(b.b, lo, int(row/a.rs.geo.New.StripeSectors()), false, nil); err != nil {
		return 0, err
	}
	a.rs.progress.Store(lo)
	if lo > 0 {
		sl.pin = sl.hold(&a.rs.gate, lo-row, p)
		nb, err := ra.readOld(lo-row, lo)
		if err != nil {
			return 0, err
		}
		err = ra.writeSections(b.b, lo, nb.b, lo-row)
		putBuf(nb)
		if err != nil {
			return 0, err
		}
	}
	if err := a.recordReshape(); err != nil { // md_update_sb's preflush makes the row durable first
		return 0, err
	}
	if lo > 0 {
		sl.pin = a.rs.gate.narrow(sl.pin, lo-row, p)
	}
	return row, nil
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

// writeSections writes the backup file: the section of d1 at array
// sector s1 and, when d2 is given, a second one at s2 (md_backup_data-2,
// its data devstart2 after the first's), then the header.
func (ra *reshapeAction) writeSections(d1 []byte, s1 uint64, d2 []byte, s2 uint64) error {
	a := ra.a
	sl := a.rs.slide
	n1 := uint64(len(d1)) >> 9
	sl.h.Version, sl.h.ArrayStart, sl.h.Length = 1, s1, n1
	sl.h.DevStart2, sl.h.ArrayStart2, sl.h.Length2 = 0, 0, 0
	if d2 != nil {
		sl.h.Version, sl.h.DevStart2, sl.h.ArrayStart2, sl.h.Length2 = 2, n1, s2, uint64(len(d2))>>9
		if _, err := sl.bf.WriteAt(d2, int64(sl.h.DevStart+n1)*512); err != nil {
			return fmt.Errorf("backup file: %w", err)
		}
	}
	if err := sl.write(a, d1); err != nil {
		return err
	}
	at := s1 + n1 // forwards: the far end of the window
	switch {
	case d2 != nil:
		at = s2
	case a.rs.geo.Backwards:
		at = s1
	}
	reshapeStep("backup", at, a.rs.safe.Load(), a.rs.geo.New.ArraySectors())
	return nil
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
// array's header with no section: mdtool stopped the reshape cleanly
// (forget_backup after recording the position). mdadm 4.2's Grow_restart
// refuses that for the same count; mdtool continues.
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
	return err == nil && h.SetUUID == ref.SetUUID && len(h.Sections()) == 0
}

// attachSlide gives an assembled in-place reshape that keeps or lowers
// the data devices its backup file (Options.ReshapeBackup) to continue
// with; without one a shrink continues until its bottom section, where
// the move refuses.
func (a *Array) attachSlide(ref *superblock.Superblock) {
	bf := a.opts.ReshapeBackup
	if !a.reshaping() || bf == nil || a.opts.ReadOnly || ref.FeatureMap&superblock.FeatureNewOffset != 0 {
		return
	}
	if g := a.rs.geo; g.New.DataDisks() > g.Old.DataDisks() {
		return
	}
	a.rs.slide = &slideState{bf: bf, h: backupfile.Header{Version: 1, SetUUID: a.uuid, DevStart: backupfile.DataStart / 512}}
}

// UsesReshapeBackup says whether the running reshape writes its backup
// file (Options.ReshapeBackup or ReshapeStart.Backup) as it goes: the
// caller keeps it open until the reshape ends.
func (a *Array) UsesReshapeBackup() bool {
	return a.reshaping() && a.rs.slide != nil
}
