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
// window of whole new stripes while user I/O is held back: the data is
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
	if a.rs.geo.Backwards || a.rs.geo.New.DataDisks() < a.rs.geo.Old.DataDisks() {
		return 0, 0, false, fmt.Errorf("%w: backwards reshape", ErrUnsupported)
	}
	total := a.rs.geo.New.ArraySectors()
	from := a.rs.progress.Load()
	if from >= total {
		return total, from, true, nil // only the switch is left (finish)
	}
	return total, from, true, nil
}

// minOffsetDiff is md's min_offset_diff in sectors.
func (a *Array) minOffsetDiff() int64 {
	var d int64
	first := true
	for _, m := range a.all {
		if m.role < 0 || !m.writable() {
			continue
		}
		if x := (m.newOff - m.dataOff) >> 9; first || x < d {
			d, first = x, false
		}
	}
	return d
}

// safeUpTo says whether writing the new stripes below array sector end
// leaves intact the old-geometry data a restart from cp reads: the new
// rows end at member sector rowEnd (+ new offset), the old rows from cp
// start at oldRow (+ data_offset).
func (ra *reshapeAction) safeUpTo(end, cp uint64) bool {
	g := ra.a.rs.geo
	if cp >= g.Old.ArraySectors() {
		return true
	}
	c := g.New.ChunkSectors()
	rowEnd := int64((end + g.New.StripeSectors() - 1) / g.New.StripeSectors() * c)
	oldRow := int64(cp / g.Old.StripeSectors() * g.Old.ChunkSectors())
	return rowEnd+ra.a.minOffsetDiff() <= oldRow
}

func (ra *reshapeAction) unit(p, max uint64) (uint64, error) {
	a := ra.a
	g := a.rs.geo
	st := g.New.StripeSectors()
	w := min(max, reshapeWindow) / st * st
	if w == 0 {
		w = st
	}
	for w > st && !ra.safeUpTo(p+w, p) {
		w -= st
	}
	if !ra.safeUpTo(p+w, p) {
		return 0, fmt.Errorf("%w: reshape at %d would overwrite data not yet moved (needs a backup file)", ErrUnsupported, p)
	}
	reshapeStep("move", p, a.rs.safe.Load(), g.New.ArraySectors())
	a.suspend()
	defer a.resume()
	if !ra.safeUpTo(p+w, a.rs.safe.Load()) {
		if err := a.recordReshape(); err != nil {
			return 0, err
		}
	}
	b := getZeroBuf(int(w) << 9)
	defer putBuf(b)
	rp := a.pers.(*reshapePers)
	if old := g.Old.ArraySectors(); p < old {
		n := min(w, old-p)
		if err := rp.old.read(b.b[:n<<9], p); err != nil {
			return 0, err
		}
	}
	if err := rp.mover.writeFull(b.b, p, int(w/st), false, nil); err != nil {
		return 0, err
	}
	a.rs.progress.Store(p + w)
	return w, nil
}

// checkpoint records reshape_progress in the superblocks.
func (ra *reshapeAction) checkpoint(uint64, bool) {
	if err := ra.a.recordReshape(); err != nil {
		ra.a.opts.Logf("md: reshape checkpoint: %v", err)
	}
}

func (ra *reshapeAction) finish(pos uint64, err error) error {
	a := ra.a
	if err != nil || pos < a.rs.geo.New.ArraySectors() {
		// interrupted: the superblocks record how far it got
		if rerr := a.recordReshape(); rerr != nil && err == nil {
			err = rerr
		}
		return err
	}
	return a.finishReshape()
}

// recordReshape writes reshape_progress into the superblocks as
// reshape_position (md's reshape_safe = reshape_progress).
func (a *Array) recordReshape() error {
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	if !a.reshaping() || a.rs.safe.Load() == a.rs.progress.Load() {
		return nil
	}
	reshapeStep("checkpoint", a.rs.progress.Load(), a.rs.safe.Load(), a.rs.geo.New.ArraySectors())
	a.rs.safe.Store(a.rs.progress.Load())
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
	a.geo, a.striped = g, g
	a.pers = &stripedPers{a: a, g: g, r6: a.level == layout.RAID6}
	a.size = int64(g.ArraySectors()) << 9
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
	}
	sb.DataOffset = uint64(m.newOff) >> 9
	sb.Layout = sb.NewLayout
	sb.ChunkSize = sb.NewChunk
	sb.FeatureMap &^= reshapeBits
	m.dataOff = m.newOff
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
