package engine

import (
	"context"
	"fmt"

	"mdtool/engine/layout"
	"mdtool/superblock"
)

// ActionReshape is md's sync_action while a reshape runs.
const ActionReshape = "reshape"

// reshapeWindow caps the array sectors moved in one unit.
const reshapeWindow = 2048

// reshapeAction is the sixth syncAction: it moves the array from the old
// geometry to the new one (raid5.c reshape_request, Linux 6.1), forwards
// only (growing raid4/5/6 with data_offset moved down, as mdadm 4.2
// does it without a backup file). The sync space is the new geometry's
// array sectors; the walk starts at reshape_progress. Each unit moves a
// window of whole new stripes while the user requests that touch it are
// held back (reshape_gate.go; the others run): the data is
// read through the old geometry (zeroes beyond the old array's end, as
// md fills them), written as full new stripes at the new data offset,
// and reshape_progress moves past it. Before a window would overwrite
// old-geometry data that a restart from the recorded reshape_position
// still needs, the superblocks record the current position (md's
// reshape_safe / writepos / safepos rule). The end switches the array to
// the new geometry as end_reshape, md_finish_reshape and
// raid5_finish_reshape do.
type reshapeAction struct {
	wholeRange
	a *Array
}

func (ra *reshapeAction) name() string { return ActionReshape }

func (ra *reshapeAction) prepare() (uint64, uint64, bool, error) {
	a := ra.a
	if !a.reshaping() {
		return 0, 0, false, nil
	}
	total := a.rs.geo.New.ArraySectors()
	from := min(a.rs.progress.Load(), total)
	if a.rs.geo.Backwards {
		from = total - from // the walk counts up; reshape_progress down from the end
	}
	a.markRecorded()
	return total, from, true, nil
}

// minOffsetDiff is md's min_offset_diff in sectors (raid5_run's rule).
func (a *Array) minOffsetDiff() int64 {
	return mdMinOffsetDiff(a.all, a.rs.geo.Backwards, nil)
}

// reshapeSectors is md's reshape_sectors (the larger chunk: what one
// step moves on each device) and the array sectors of one such row of
// the new geometry.
func (ra *reshapeAction) reshapeSectors() (r, row uint64) {
	g := ra.a.rs.geo
	r = max(g.Old.ChunkSectors(), g.New.ChunkSectors())
	return r, r * uint64(g.New.DataDisks())
}

// rows is the array range of n rows moved from reshape_progress p:
// above it going forwards, below it going backwards.
func (ra *reshapeAction) rows(p, n uint64) (lo, hi uint64) {
	_, row := ra.reshapeSectors()
	if ra.a.rs.geo.Backwards {
		return p - n*row, p
	}
	return p, p + n*row
}

// mdMustRecord is reshape_request's rule (Linux 6.1) for a step at
// reshape_progress p with reshape_safe s: the superblocks must record
// the position first when the step's writes (writepos) reach old data
// that a restart from the recorded position reads (safepos) while the
// data the step reads (readpos) lies beyond them, all per device, the
// read and safe points moved by a negative min_offset_diff and the write
// point by a positive one.
func (ra *reshapeAction) mdMustRecord(p, s uint64) bool {
	g := ra.a.rs.geo
	r, _ := ra.reshapeSectors()
	return mdRecordRule(p, s, r, uint64(g.Old.DataDisks()), uint64(g.New.DataDisks()), ra.mdOffsetDiff(), g.Backwards)
}

// mdRecordRule is mdMustRecord's arithmetic: r is reshape_sectors, od
// and nd the data disks before and after, d min_offset_diff.
func mdRecordRule(p, s, r, od, nd uint64, d int64, backwards bool) bool {
	writepos, readpos, safepos := p/nd, p/od, s/od
	if backwards {
		writepos -= r
		readpos += r
		safepos += r
	} else {
		writepos += r
		readpos -= min(r, readpos)
		safepos -= min(r, safepos)
	}
	if d < 0 {
		safepos += uint64(-d)
		readpos += uint64(-d)
	} else {
		writepos += uint64(d)
	}
	if backwards {
		return safepos > writepos && readpos < writepos
	}
	return safepos < writepos && readpos > writepos
}

// clear says whether writing the new rows [lo, hi) leaves intact the old
// data a restart from the recorded position s reads: forwards the old
// stripes from the one holding s on, backwards those below s. md's rule
// (mdMustRecord) is pessimistic where it gives up ("readpos behind
// writepos": no record helps, a backup must) and then records nothing,
// though with mdadm's smallest offset change a record before each step
// would keep a restart safe; the engine records then, or, with a backup
// file (an in-place shrink), keeps the rows in it instead
// (reshape_slide.go).
func (ra *reshapeAction) clear(lo, hi, s uint64) bool {
	g := ra.a.rs.geo
	if !g.Backwards && s >= g.Old.ArraySectors() {
		return true
	}
	return clearRule(lo, hi, s, g.Old.ChunkSectors(), uint64(g.Old.DataDisks()), uint64(g.New.DataDisks()),
		ra.a.minOffsetDiff(), g.Backwards)
}

// clearRule is clear's arithmetic (below the old array's end going
// forwards): oc is the old chunk, od and nd the data disks before and
// after, d min_offset_diff.
func clearRule(lo, hi, s, oc, od, nd uint64, d int64, backwards bool) bool {
	ost := oc * od
	if backwards {
		if s == 0 {
			return true
		}
		oldEnd := int64((s + ost - 1) / ost * oc)
		return int64(lo/nd)+d >= oldEnd
	}
	oldStart := int64(s / ost * oc)
	return int64(hi/nd)+d <= oldStart
}

// unit moves rows of the new geometry from reshape_progress on (below it
// backwards) with the user requests that touch them held back (the
// gate): as many as fit the window without
// a superblock record in between; a step that md's rule (or clear) says
// needs one records reshape_position first. With a backup file the same
// count, and a shrink from where clear would ask (backDue), go window by
// window through the file instead (slideUnit).
func (ra *reshapeAction) unit(_, max uint64) (uint64, error) {
	a := ra.a
	g := a.rs.geo
	_, row := ra.reshapeSectors()
	want := uint64(1)
	if w := min(max, reshapeWindow) / row; w > 1 {
		want = w
	}
	reshapeStep("move", a.rs.progress.Load(), a.rs.safe.Load(), g.New.ArraySectors())
	// counted as a request: a configuration change waits for the move
	key := a.rs.progress.Load() >> 11
	if err := a.enter(key); err != nil {
		return 0, err
	}
	defer a.leave(key)
	p := a.rs.progress.Load()
	if sl := a.rs.slide; sl != nil {
		if !g.Backwards {
			return ra.slideUnit(p, want)
		}
		if lo, hi := ra.rows(p, 1); ra.backDue(p, lo, hi) {
			sl.back = true
			return ra.slideUnit(p, want)
		}
		sl.dirty = true // moved below: made durable before a backup goes below it
	}
	n := uint64(0)
	for ; n < want; n++ {
		at := p + n*row
		if g.Backwards {
			at = p - n*row
		}
		lo, hi := ra.rows(at, 1)
		back := n > 0 && ra.backDue(at, lo, hi)
		if !back && !ra.mustRecord(at, lo, hi) {
			continue
		}
		if n > 0 {
			break // the next unit records first (or backs up)
		}
		if err := a.recordReshape(); err != nil {
			return 0, err
		}
		if !ra.clear(lo, hi, a.rs.safe.Load()) {
			return 0, fmt.Errorf("%w: reshape at %d would overwrite data not yet moved (needs a backup file)", ErrUnsupported, p)
		}
	}
	lo, hi := ra.rows(p, n)
	w := a.rs.gate.hold(lo, hi)
	defer a.rs.gate.release(w)
	if reshapeHoldHook != nil {
		reshapeHoldHook(lo, hi)
	}
	if err := ra.move(lo, hi); err != nil {
		return 0, err
	}
	if g.Backwards {
		a.rs.progress.Store(lo)
	} else {
		a.rs.progress.Store(hi)
		a.reshapeRecovered()
	}
	return hi - lo, nil
}

// move copies the array sectors [lo, hi) from the old geometry (zeroes
// beyond the old array's end, as md fills them) to whole stripes of the
// new one at the new data offset.
func (ra *reshapeAction) move(lo, hi uint64) error {
	g := ra.a.rs.geo
	w := hi - lo
	b := getZeroBuf(int(w) << 9)
	defer putBuf(b)
	rp := ra.a.pers.(*reshapePers)
	if old := g.Old.ArraySectors(); lo < old {
		n := min(hi, old) - lo
		if err := rp.old.read(b.b[:n<<9], lo); err != nil {
			return err
		}
	}
	return rp.mover.writeFull(b.b, lo, int(w/g.New.StripeSectors()), false, nil)
}

// checkpoint: md_do_sync records no progress of a reshape
// (reshape_record.go); unit records as reshape_request does.
func (ra *reshapeAction) checkpoint(uint64, bool) {}

func (ra *reshapeAction) finish(pos uint64, err error) error {
	a := ra.a
	if err != nil || pos < a.rs.geo.New.ArraySectors() {
		// interrupted: the superblocks record how far it got
		if rerr := a.recordReshape(); rerr != nil && err == nil {
			err = rerr
		}
		if ferr := ra.endSlide(); ferr != nil && err == nil {
			err = ferr
		}
		return err
	}
	if a.rs.slide != nil {
		// the backup may lie ahead of reshape_position (reshape_slide.go):
		// record the end before it is forgotten and its hold goes
		if err := a.recordReshape(); err != nil {
			return err
		}
	}
	if err := ra.endSlide(); err != nil {
		return err
	}
	return a.finishReshape()
}

// recordReshape writes reshape_progress into the superblocks as
// reshape_position (md's reshape_safe = reshape_progress).
func (a *Array) recordReshape() error {
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	if !a.reshaping() {
		return nil
	}
	a.markRecorded()
	if a.rs.safe.Load() == a.rs.progress.Load() {
		return nil
	}
	reshapeStep("checkpoint", a.rs.progress.Load(), a.rs.safe.Load(), a.rs.geo.New.ArraySectors())
	a.rs.safe.Store(a.rs.progress.Load())
	a.reshapeRecordRecovery()
	return a.updateSuperLocked(true)
}

// finishReshape switches the array to the new geometry: data_offset
// becomes the new one (the data area grows by what it moved down,
// md_finish_reshape), layout and chunk the new ones, the reshape bits go
// (super_1_sync writes none once reshape_position is MaxSector), and the
// array has the new geometry's size.
func (a *Array) finishReshape() error {
	a.suspend()
	defer a.resume()
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	g := a.rs.geo.New
	a.cfgMu.Lock() // the bitmap's writer reads the offsets under cfgMu.RLock
	for _, m := range a.all {
		m.finishReshape()
	}
	a.cfgMu.Unlock()
	a.dropRemovedRoles(g.RaidDisks())
	a.reshapeRecoveredAll()
	a.geo, a.striped = g, g
	a.pers = &stripedPers{a: a, g: g, r6: a.level == layout.RAID6}
	if !a.grow.external || a.size>>9 > int64(g.ArraySectors()) {
		a.size = int64(g.ArraySectors()) << 9 // md_set_array_sectors: not over an external size
	}
	a.unit = int64(g.IOOpt())
	a.maxReq = max(a.opts.MaxRequest/a.unit, 1) * a.unit
	a.rs.done.Store(true)
	reshapeStep("finish", g.ArraySectors(), a.rs.safe.Load(), g.ArraySectors())
	a.opts.Logf("md: %s: reshape done", a.mdName())
	return a.updateSuperLocked(true)
}

// finishReshape is md_finish_reshape for one member, and the fields
// super_1_sync then writes.
func (m *member) finishReshape() {
	sb := m.ls.sb
	if m.dataOff > m.newOff {
		sb.DataSize += uint64(m.dataOff-m.newOff) >> 9
	} else {
		sb.DataSize -= uint64(m.newOff-m.dataOff) >> 9
	}
	sb.DataOffset = uint64(m.newOff) >> 9
	sb.Layout = sb.NewLayout
	sb.ChunkSize = sb.NewChunk
	sb.FeatureMap &^= reshapeBits
	m.dataOff = m.newOff
}

// dropRemovedRoles ends a reshape that removed devices as
// raid5_finish_reshape and remove_and_add_spares do: the members of the
// roles from n on are no longer in sync, leave their roles and become
// spares.
func (a *Array) dropRemovedRoles(n int) {
	if len(a.roles) <= n {
		return
	}
	a.cfgMu.Lock()
	defer a.cfgMu.Unlock()
	for _, m := range a.roles[n:] {
		if m == nil {
			continue
		}
		m.role = -1
		if m.State() != Faulty {
			m.state.Store(uint32(Spare))
		}
	}
	a.roles = a.roles[:n:n]
	a.n = n
}

// adoptFinishedReshape: power was cut while the superblocks of a finished
// reshape were written. The freshest superblock (ref) says it is done; a
// member whose own superblock (one event older) still records the
// reshape has its data in the new geometry too, at its new offset.
func (a *Array) adoptFinishedReshape(ref *superblock.Superblock) {
	if reshapeActive(ref) {
		return
	}
	for _, m := range a.all {
		if reshapeActive(m.ls.sb) && m.ls.sb.Events+1 >= ref.Events {
			m.finishReshape()
		}
	}
}

// Reshape runs (or continues) the reshape recorded in the superblocks to
// its end, like the sync thread does on its own; it returns when it is
// done or ctx ends (the position is then recorded).
func (a *Array) Reshape(ctx context.Context) error {
	if !a.reshaping() {
		return nil
	}
	return a.runSync(ctx, &reshapeAction{a: a})
}
