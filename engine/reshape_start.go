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
	// in sectors: negative moves it down and the reshape walks forwards
	// (what more data disks need), positive moves it up and it walks
	// backwards from the end (what fewer need); at least
	// ReshapeMinOffset either way. 0 chooses as mdadm 4.2 does
	// (reshapeOffsets); without the room that takes, StartReshape
	// returns a *NoRoomError (errors.Is ErrNoRoom).
	OffsetDelta int64
	// Backup, when set, makes the reshape an in-place one as mdadm 4.2
	// does with --backup-file: data_offset stays, the critical section
	// is kept in Backup while it moves (reshape_backup.go: growth;
	// reshape_slide.go: the same or fewer data devices).
	Backup BackupFile
	// StripeCache is the stripe cache (pages) mdadm 4.2 makes sure of
	// before the reshape (Grow.c update_cache_size): when the array's is
	// smaller (md's default 256, again after a level change) mdadm
	// writes StripeCache+1 to stripe_cache_size, and raid5_set_cache_size's
	// md_allow_write marks a clean array active, md's thread clean
	// again (two superblock updates; on an array that is not degraded
	// the second takes the event back).
	StripeCache int
	// SetArrayInfo: mdadm changes only raid_disks, through SET_ARRAY_INFO
	// (impose_reshape with chunk and layout unchanged):
	// update_array_info's md_update_sb before the reshape starts.
	SetArrayInfo bool
}

// defaultStripeCache is raid5's NR_STRIPES (stripe_cache_size's default).
const defaultStripeCache = 256

// reshapeSetupLocked is what mdadm's setup of the reshape costs the
// superblocks before it starts (StripeCache, SetArrayInfo). Called with
// meta.mu held.
func (a *Array) reshapeSetupLocked(rq ReshapeStart) error {
	cur := a.stripeCache
	if cur == 0 {
		cur = defaultStripeCache
	}
	if rq.StripeCache > cur {
		a.stripeCache = rq.StripeCache + 1
		if a.allowWriteLocked() && a.opts.SafeModeDelay >= 0 {
			a.setInSyncLocked(false) // md_allow_write's safemode = 1: clean again at once
		}
	}
	if !rq.SetArrayInfo {
		return nil
	}
	a.meta.changeDevs = true
	return a.updateSuperLocked(true)
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

// StartReshape starts a restriping reshape of a raid4/5/6 as md's
// raid5_start_reshape does when mdadm 4.2 has set new_offset: added
// spares take the new roles (in sync: they only ever hold new-geometry
// data), every member's new data offset is data_offset + its new_offset,
// and the superblocks record the reshape at its start (0 forwards, the
// end backwards) before anything moves.
// The reshape then runs as a sync action (Reshape, or the sync thread).
func (a *Array) StartReshape(rq ReshapeStart) error {
	if a.journaled() {
		return ErrJournaled // check_reshape: EINVAL with a log
	}
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
	if a.opts.ReadOnly {
		return ErrReadOnly
	}
	if err := a.reshapeAllowed(); err != nil {
		return err
	}
	old := a.striped
	sh := reshapeShape{n: rq.RaidDisks, layout: old.Algorithm(), chunk: old.ChunkSectors()}
	if sh.n == 0 {
		sh.n = a.n
	}
	if rq.SetLayout {
		sh.layout = rq.Layout
	}
	if rq.ChunkSectors != 0 {
		sh.chunk = rq.ChunkSectors
	}
	delta := sh.n - a.n
	if delta == 0 && sh.layout == old.Algorithm() && sh.chunk == old.ChunkSectors() {
		return fmt.Errorf("%w: the reshape changes nothing", ErrUnsupported)
	}
	if err := a.reshapeDisksAllowed(delta, sh.n); err != nil {
		return err
	}
	parity := a.n - old.DataDisks()
	if c := max(old.ChunkSectors(), sh.chunk); delta < 0 && uint64(a.size>>9) > old.DevSectors(0)/c*c*uint64(sh.n-parity) {
		return ErrShrinkSize // raid5_start_reshape; mdadm 4.2 asks for --array-size first
	}
	min := ReshapeMinOffset(old.ChunkSectors(), sh.chunk, old.DataDisks(), sh.n-parity)
	a.suspend()
	defer a.resume()
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	if err := a.reshapeSetupLocked(rq); err != nil {
		return err
	}
	cfg := a.lockCfg()
	defer cfg.Unlock()
	var spares []*member
	if delta > 0 {
		var err error
		if spares, err = a.reshapeSpareRoles(delta, sh.n); err != nil {
			return err
		}
	}
	if rq.Backup != nil && sh.n-parity <= old.DataDisks() {
		return a.startInPlaceSlide(rq.Backup, sh, delta, spares, cfg)
	}
	if rq.Backup != nil {
		return a.startInPlace(rq.Backup, sh, delta, spares, cfg)
	}
	offs, backwards, err := a.reshapeOffsets(sh.n-parity-old.DataDisks(), min, rq.OffsetDelta)
	if err != nil {
		return err
	}
	for _, o := range offs {
		if err := a.bitmapRoomCheck(o); err != nil {
			return err
		}
	}
	sh.backwards = backwards
	rs, err := a.newReshapeGeometry(sh, delta, offs)
	if err != nil {
		return err
	}
	if delta < 0 && uint64(a.size>>9) > rs.New.ArraySectors() {
		return ErrShrinkSize
	}
	a.applyReshape(sh, delta, rs, offs, spares)
	cfg.Unlock() // the superblocks are written without cfgMu (the bitmap's writer takes it)
	return a.updateSuperLocked(true)
}

// reshapeShape is the geometry a reshape goes to.
type reshapeShape struct {
	n         int
	layout    int
	chunk     uint64
	backwards bool
	inPlace   bool // with a backup file, data_offset kept (reshape_slide.go)
}

// reshapeAllowed is what md 6.1 demands of any restriping reshape
// (raid5_check_reshape, raid5_start_reshape): a raid4/5/6 not already
// reshaping or syncing, not failed and not waiting for a resync.
func (a *Array) reshapeAllowed() error {
	switch {
	case a.level != layout.RAID4 && a.level != layout.RAID5 && a.level != layout.RAID6:
		return fmt.Errorf("%w: reshape of %v", ErrUnsupported, a.level)
	case a.reshaping():
		return ErrBusy
	case a.failed.Load() || a.degraded() > a.maxDegraded():
		return fmt.Errorf("%w: reshape of a failed array", ErrFailed)
	case a.syncBusy():
		return ErrBusy
	}
	a.meta.mu.Lock()
	dirty := a.meta.recoveryCP != superblock.MaxSector
	a.meta.mu.Unlock()
	if dirty {
		return ErrBusy // md: recovery_cp < MaxSector, -EBUSY
	}
	return nil
}

// reshapeDisksAllowed checks the new device count: raid6 keeps at least
// 4, raid4/5 at least 2 (raid5_check_reshape). A degraded array may grow:
// the spares fill the missing roles as the reshape passes
// (reshape_spares.go).
func (a *Array) reshapeDisksAllowed(delta, n int) error {
	least := 2
	if a.level == layout.RAID6 {
		least = 4
	}
	if n < least {
		return fmt.Errorf("%w: %v needs at least %d devices", ErrUnsupported, a.level, least)
	}
	return nil
}

// newReshapeGeometry builds both geometries of the reshape about to start
// and places reshape_progress at its start: 0 forwards, the array's end
// (raid5_size of the smaller geometry) backwards.
func (a *Array) newReshapeGeometry(sh reshapeShape, delta int, offs map[*member]int64) (*layout.Reshape, error) {
	old := a.striped
	p := layout.Params{Level: a.level, Layout: old.Algorithm(), ChunkSectors: old.ChunkSectors(), RaidDisks: sh.n,
		ComponentSectors: old.DevSectors(0)}
	rs, err := layout.NewReshape(p, layout.ReshapeParams{NewLevel: a.level, NewLayout: sh.layout, NewChunk: sh.chunk,
		DeltaDisks: delta, Backwards: sh.backwards, MinOffsetDiff: mdMinOffsetDiff(a.all, sh.backwards, offs),
		InPlace: sh.inPlace})
	if err != nil {
		return nil, err
	}
	if rs.Backwards {
		rs.Progress = rs.ArraySectors()
		rs.Safe = rs.Progress
	}
	return rs, nil
}

// applyReshape records the started reshape in the array and the
// superblocks (raid5_start_reshape, super_1_sync): spares take the free
// roles, lowest first, when devices are added; when they are removed the roles above the
// new count keep serving the old geometry until the end.
func (a *Array) applyReshape(sh reshapeShape, delta int, rs *layout.Reshape, offs map[*member]int64, spares []*member) {
	a.placeReshapeSpares(sh.n, a.n, spares)
	for _, m := range a.all {
		sb := m.ls.sb
		off := offs[m]
		m.newOff = m.dataOff + off*512
		sb.RaidDisks = uint32(sh.n)
		sb.DeltaDisks = int32(delta)
		sb.NewLevel, sb.NewLayout, sb.NewChunk = sb.Level, uint32(sh.layout), uint32(sh.chunk)
		sb.ReshapePosition = rs.Progress
		sb.NewOffset = int32(off)
		sb.FeatureMap |= superblock.FeatureReshapeActive | superblock.FeatureNewOffset
		sb.FeatureMap &^= superblock.FeatureReshapeBackwards
		if rs.Backwards {
			sb.FeatureMap |= superblock.FeatureReshapeBackwards
		}
	}
	if delta > 0 {
		a.n = sh.n
	}
	a.rs = &reshapeState{geo: rs}
	a.rs.rec.live = true
	a.rs.progress.Store(rs.Progress)
	a.rs.safe.Store(rs.Safe)
	a.geo, a.striped = rs.New, rs.New
	a.pers = a.newReshapePers()
	a.meta.changeDevs = true
}

// mdMinOffsetDiff is raid5_run's min_offset_diff (sectors) over the
// members with a role: the change of data offset with the least room,
// the largest one going forwards, the smallest going backwards. offs,
// when not nil, gives the changes about to be set.
func mdMinOffsetDiff(ms []*member, backwards bool, offs map[*member]int64) int64 {
	var d int64
	first := true
	for _, m := range ms {
		if m.role < 0 {
			continue
		}
		x := (m.newOff - m.dataOff) >> 9
		if offs != nil {
			x = offs[m]
		}
		if first || backwards && x < d || !backwards && x > d {
			d, first = x, false
		}
	}
	return d
}
