package engine

import (
	"fmt"

	"mdtool/engine/layout"
	"mdtool/superblock"
)

// ReshapeStart asks for a restriping reshape of a raid4/5/6: more or
// fewer devices, a new layout, a new chunk size, or several at once.
type ReshapeStart struct {
	// RaidDisks is the new number of devices (0: unchanged); when it
	// grows, spares take the new roles; when it shrinks, the array size
	// must already fit the new geometry (mdadm's --array-size first).
	RaidDisks int
	// Layout is the new layout (md's algorithm number), used when
	// SetLayout is true; otherwise the layout is unchanged.
	Layout    int
	SetLayout bool
	// ChunkSectors is the new chunk size in sectors (0: unchanged).
	ChunkSectors uint64
	// OffsetDelta is new_offset, the move of every member's data_offset
	// in sectors (negative: down, which a growing reshape needs);
	// 0 chooses mdadm 4.2's: down by MinOffsetChange.
	OffsetDelta int64
}

// MinOffsetChange is mdadm 4.2's min_offset_change for a reshape from
// oldData to newData data disks with chunk sectors: the backup blocks
// (the least common multiple of the old and new data stripes) over the
// old data disks.
func MinOffsetChange(chunk uint64, oldData, newData int) uint64 {
	a, b := chunk*uint64(oldData), chunk*uint64(newData)
	g := a
	for r := b; r != 0; {
		g, r = r, g%r
	}
	return a / g * b / uint64(oldData)
}

// spaceBefore is the room between a v1.1/1.2 member's metadata (the
// superblock area, the bad-block log) and its data: mdadm
// getinfo_super1's space_before without a bitmap. 1.0 keeps its
// metadata at the end: no room before the data.
func spaceBefore(sb *superblock.Superblock) uint64 {
	if sb.DataOffset < sb.SuperOffset {
		return 0
	}
	earliest := sb.SuperOffset + (32+4)*2
	if sb.BBLogOffset != 0 && sb.BBLogSize != 0 {
		earliest = max(earliest, sb.SuperOffset+uint64(int64(sb.BBLogOffset))+uint64(sb.BBLogSize))
	}
	if earliest >= sb.DataOffset {
		return 0
	}
	return sb.DataOffset - earliest
}

// ErrNoRoom: the members have too little room before their data to move
// it down for the reshape (mdadm then needs a backup file).
var ErrNoRoom = fmt.Errorf("%w: insufficient head-space for reshape", ErrUnsupported)

// StartReshape starts growing a raid4/5/6 onto its spares as md's
// raid5_start_reshape does when mdadm 4.2 has set new_offset: the spares
// take the new roles (in sync: they only ever hold new-geometry data),
// every member's new data offset is data_offset + OffsetDelta, and the
// superblocks record the reshape at position 0 before anything moves.
// The reshape then runs as a sync action (Reshape, or the sync thread).
func (a *Array) StartReshape(rq ReshapeStart) error {
	if err := a.refuse090("a reshape"); err != nil {
		return err
	}
	if err := a.startReshape(rq); err != nil {
		return err
	}
	if !a.opts.NoAutoSync && !a.opts.NoDaemon {
		a.checkRecovery() // md_wakeup_thread: the sync thread takes it up
	}
	return nil
}

func (a *Array) startReshape(rq ReshapeStart) error {
	if rq.RaidDisks == 0 {
		rq.RaidDisks = a.n
	}
	if a.opts.ReadOnly {
		return ErrReadOnly
	}
	switch {
	case a.level != layout.RAID4 && a.level != layout.RAID5 && a.level != layout.RAID6:
		return fmt.Errorf("%w: reshape of %v", ErrUnsupported, a.level)
	case a.reshaping():
		return ErrBusy
	case a.hasBM:
		return fmt.Errorf("%w: reshape with a write-intent bitmap", ErrUnsupported)
	case a.failed.Load() || a.Degraded() != 0:
		return fmt.Errorf("%w: reshape of a degraded array", ErrUnsupported)
	case rq.RaidDisks <= a.n,
		rq.SetLayout && rq.Layout != a.striped.Algorithm(),
		rq.ChunkSectors != 0 && rq.ChunkSectors != a.striped.ChunkSectors():
		return fmt.Errorf("%w: only adding devices", ErrUnsupported)
	case a.syncBusy():
		return ErrBusy
	}
	delta := rq.RaidDisks - a.n
	old := a.striped
	parity := a.n - old.DataDisks()
	min := MinOffsetChange(old.ChunkSectors(), old.DataDisks(), rq.RaidDisks-parity)
	off := rq.OffsetDelta
	if off == 0 {
		off = -int64(min)
	}
	if off > -int64(min) {
		return fmt.Errorf("%w: data_offset must move down by at least %d sectors", ErrUnsupported, min)
	}
	a.suspend()
	defer a.resume()
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	a.cfgMu.Lock()
	defer a.cfgMu.Unlock()
	var spares []*member
	for _, m := range a.all {
		if m.role < 0 && m.State() == Spare && !m.removed.Load() && len(spares) < delta {
			spares = append(spares, m)
		}
	}
	if len(spares) < delta {
		return fmt.Errorf("%w: %d spares for %d new devices", ErrUnsupported, len(spares), delta)
	}
	for _, m := range a.all {
		if m.removed.Load() || m.State() == Faulty {
			continue
		}
		if spaceBefore(m.ls.sb) < uint64(-off) {
			return ErrNoRoom
		}
	}
	p := layout.Params{Level: a.level, Layout: old.Algorithm(), ChunkSectors: old.ChunkSectors(), RaidDisks: rq.RaidDisks,
		ComponentSectors: old.DevSectors(0)}
	rs, err := layout.NewReshape(p, layout.ReshapeParams{NewLevel: a.level, NewLayout: p.Layout, NewChunk: p.ChunkSectors,
		DeltaDisks: delta, MinOffsetDiff: off})
	if err != nil {
		return err
	}
	for i, m := range spares {
		m.role = a.n + i
		m.state.Store(uint32(InSync))
		a.roles = append(a.roles, m)
	}
	for _, m := range a.all {
		sb := m.ls.sb
		m.newOff = m.dataOff + off*512
		sb.RaidDisks = uint32(rq.RaidDisks)
		sb.DeltaDisks = int32(delta)
		sb.NewLevel, sb.NewLayout, sb.NewChunk = sb.Level, sb.Layout, sb.ChunkSize
		sb.ReshapePosition = 0
		sb.NewOffset = int32(off)
		sb.FeatureMap |= superblock.FeatureReshapeActive | superblock.FeatureNewOffset
	}
	a.n = rq.RaidDisks
	a.rs = &reshapeState{geo: rs}
	a.geo, a.striped = rs.New, rs.New
	a.pers = a.newReshapePers()
	a.meta.changeDevs = true
	return a.updateSuperLocked(true)
}
