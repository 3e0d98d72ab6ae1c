package engine

import (
	"errors"
	"fmt"
	"io"

	"mdtool/engine/backupfile"
	"mdtool/engine/layout"
	"mdtool/superblock"
)

// In-place reshapes (mdadm 4.2 with --backup-file: data_offset stays,
// Grow.c reshape_array's "started:" path). Growing in place overwrites,
// in its first stripes, old data that a restart from the recorded
// reshape_position still reads (the critical section: md refuses to
// assemble there, "reshape_position too early for auto-recovery"). As
// mdadm's child does, the engine copies that section to the backup file
// (mdadm's format, engine/backupfile) before any of it is overwritten,
// moves it with user I/O suspended, records reshape_position past it and
// forgets the backup (length 0). A restart with the backup file
// (Options.ReshapeBackup, mdadm's --assemble --backup-file) restores the
// section into the new geometry and records its end when the
// superblocks still say it was in flight (Grow_restart's rules).

// BackupFile is a reshape's backup file (mdadm's --backup-file).
type BackupFile interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
}

// ErrBackupNeeded: the superblocks record an in-place reshape inside its
// critical section and no backup of it was found (Grow_restart's
// "Failed to find backup of critical section").
var ErrBackupNeeded = errors.New("failed to find backup of critical section")

// criticalEnd is Grow_restart's last_block for a growth from od to nd
// data disks (chunks in sectors): the first array sector from which the
// new stripes no longer overlap old data not yet moved.
func criticalEnd(oc, nc uint64, od, nd int) uint64 {
	var nstripe, ostripe, last uint64
	for nstripe >= ostripe {
		nstripe += nc
		last = nstripe * uint64(nd)
		ostripe = last / uint64(od) / oc * oc
	}
	return last
}

// inPlaceGeometry is the reshape geometry of an in-place growth and the
// end of its critical section: the first row boundary at or after
// Grow_restart's last_block and mdadm's backup blocks from which md
// would continue the reshape (raid5_run's check) and the next row
// overwrites only moved data (reshapeAction.clear).
func (a *Array) inPlaceGeometry(sh reshapeShape, delta int) (*layout.Reshape, uint64, error) {
	old := a.striped
	parity := a.n - old.DataDisks()
	od, nd := old.DataDisks(), sh.n-parity
	if nd <= od {
		return nil, 0, fmt.Errorf("%w: an in-place reshape (backup file) that does not add data devices", ErrUnsupported)
	}
	oc, nc := old.ChunkSectors(), sh.chunk
	row := max(oc, nc) * uint64(nd)
	start := max(criticalEnd(oc, nc, od, nd), ReshapeMinOffset(oc, nc, od, nd)*uint64(od))
	b := (start + row - 1) / row * row
	p := layout.Params{Level: a.level, Layout: old.Algorithm(), ChunkSectors: oc, RaidDisks: sh.n,
		ComponentSectors: old.DevSectors(0)}
	ost := old.StripeSectors()
	for ; b <= old.ArraySectors()/2; b += row {
		rs, err := layout.NewReshape(p, layout.ReshapeParams{Position: b, NewLevel: a.level, NewLayout: sh.layout,
			NewChunk: nc, DeltaDisks: delta})
		if err != nil || (b+row)/uint64(nd) > b/ost*oc {
			continue
		}
		rs.Progress, rs.Safe = 0, 0
		return rs, b, nil
	}
	return nil, 0, fmt.Errorf("%w: the critical section of this reshape is too large", ErrUnsupported)
}

// startInPlace is startReshape for an in-place growth (the caller holds
// the array suspended, meta.mu and cfg): back the critical section up,
// record the reshape, move the section, record its end, forget the
// backup.
func (a *Array) startInPlace(bf BackupFile, sh reshapeShape, delta int, spares []*member, cfg *cfgUnlocker) error {
	rs, end, err := a.inPlaceGeometry(sh, delta)
	if err != nil {
		return err
	}
	offs := make(map[*member]int64, len(a.all))
	for _, m := range a.all {
		offs[m] = 0
	}
	buf := getZeroBuf(int(end) << 9)
	defer putBuf(buf)
	if err := a.pers.read(buf.b[:end<<9], 0); err != nil {
		return err
	}
	h := a.newBackupHeader()
	h.Mtime, h.Length = uint64(a.opts.Clock().Unix()), end
	if err := writeBackup(bf, h, buf.b[:end<<9]); err != nil {
		return err
	}
	a.applyReshape(sh, delta, rs, offs, spares)
	for _, m := range a.all {
		m.ls.sb.FeatureMap &^= superblock.FeatureNewOffset // super_1_sync: new_offset only when it differs
		m.ls.sb.NewOffset = 0
	}
	cfg.Unlock() // the superblocks are written without cfgMu (the bitmap's writer takes it)
	if err := a.updateSuperLocked(true); err != nil {
		return err
	}
	rp := a.pers.(*reshapePers)
	reshapeStep("move", 0, 0, rs.New.ArraySectors())
	if err := rp.mover.writeFull(buf.b[:end<<9], 0, int(end/rs.New.StripeSectors()), false, nil); err != nil {
		return err
	}
	if err := a.flushMembers(); err != nil {
		return err
	}
	a.rs.progress.Store(end)
	reshapeStep("checkpoint", end, 0, rs.New.ArraySectors())
	a.rs.safe.Store(end)
	if err := a.updateSuperLocked(true); err != nil {
		return err
	}
	h.Length, h.Mtime = 0, uint64(a.opts.Clock().Unix())
	return writeBackup(bf, h, nil) // forget_backup
}

// backupTag marks every backup header the engine writes (in the pad,
// which mdadm zeroes and ignores): an empty header is the engine's own
// (slideForgotten) only when it carries the tag.
var backupTag = [16]byte{'m', 'd', 't', 'o', 'o', 'l'}

// newBackupHeader is an empty version 1 header for this array, its data
// at mdadm's devstart, tagged as the engine's.
func (a *Array) newBackupHeader() *backupfile.Header {
	return &backupfile.Header{Version: 1, SetUUID: a.uuid, DevStart: backupfile.DataStart / 512, Tag: backupTag}
}

// writeBackup writes data at the header's devstart and the header 4 KiB
// before it (grow_backup), then makes both durable.
func writeBackup(bf BackupFile, h *backupfile.Header, data []byte) error {
	if data != nil {
		if _, err := bf.WriteAt(data, int64(h.DevStart)*512); err != nil {
			return fmt.Errorf("backup file: %w", err)
		}
	}
	if _, err := bf.WriteAt(backupfile.Encode(h), int64(h.DevStart)*512-4096); err != nil {
		return fmt.Errorf("backup file: %w", err)
	}
	if err := bf.Sync(); err != nil {
		return fmt.Errorf("backup file: %w", err)
	}
	return nil
}

// pendingRestore is a backup Grow_restart would restore: the sections'
// data and the reshape_position recorded after it.
type pendingRestore struct {
	sections []backupfile.Section
	data     [][]byte
	pos      uint64
}

// readReshapeBackup is Grow_restart for an in-place reshape recorded in
// ref: with a backup file that holds the section the recorded position
// needs, the superblocks' reshape_position moves (in memory) to the end
// of the backup, whose data openAssembled then writes in the new
// geometry. Without one, a position inside the critical section is
// ErrBackupNeeded.
func (a *Array) readReshapeBackup(ref *superblock.Superblock) (*pendingRestore, error) {
	if !reshapeActive(ref) || ref.FeatureMap&superblock.FeatureNewOffset != 0 {
		return nil, nil // RESHAPE_NO_BACKUP: data_offset moves, nothing to restore
	}
	forwards := int32(ref.DeltaDisks) >= 0
	pos := ref.ReshapePosition
	if bf := a.opts.ReshapeBackup; bf != nil && !a.opts.ReadOnly {
		pr, err := readBackup(bf, ref, pos, forwards, int32(ref.DeltaDisks) <= 0 && ref.NewLevel == ref.Level)
		if err != nil {
			return nil, err
		}
		if pr != nil {
			for _, m := range a.all {
				if reshapeActive(m.ls.sb) {
					m.ls.sb.ReshapePosition = pr.pos
				}
			}
			ref.ReshapePosition = pr.pos
			return pr, nil
		}
	}
	parity := 1
	if a.level == layout.RAID6 {
		parity = 2
	}
	nd := int(ref.RaidDisks) - parity
	od := nd - int(int32(ref.DeltaDisks))
	if od <= 0 || ref.ChunkSize == 0 || ref.NewChunk == 0 {
		return nil, nil
	}
	oc, nc := uint64(ref.ChunkSize), uint64(ref.NewChunk)
	switch {
	case nd > od && pos < criticalEnd(oc, nc, od, nd):
		return nil, ErrBackupNeeded
	case nd <= od && a.slideForgotten(ref):
		return nil, nil // mdtool stopped it cleanly: the position is exact
	case nd == od:
		return nil, ErrBackupNeeded // Grow_restart: no critical section rule for the same count
	case nd < od && shrinkNeedsBackup(pos, oc, nc, od, nd):
		return nil, ErrBackupNeeded // below first_block (Grow_restart), or rows kept in the backup
	}
	return nil, nil
}

// readBackup reads and checks a backup file's header as Grow_restart
// does; nil when it holds nothing the restart needs. ahead (an in-place
// reshape that keeps or lowers the data devices, reshape_slide.go)
// trusts sections that lie beyond pos (below it for a shrink, which runs
// backwards): the engine records such a reshape by md's rule only, every
// window before its backup is durable, so the restart goes on from the
// backup's far end, its end forwards, its lowest start backwards. mdadm
// 4.2's Grow_restart moves pos there too when pos lies within the
// sections' span, and keeps it when the sections lie wholly beyond it: a
// backup the engine left that far ahead must be restarted by mdtool, or
// the rows between pos and the backup are moved twice.
func readBackup(bf BackupFile, ref *superblock.Superblock, pos uint64, forwards, ahead bool) (*pendingRestore, error) {
	hb := make([]byte, backupfile.Size)
	if _, err := bf.ReadAt(hb, 0); err != nil {
		return nil, nil // "Cannot read"
	}
	h, err := backupfile.Decode(hb)
	if err != nil || h.SetUUID != ref.SetUUID || !h.Needed(pos, forwards) {
		return nil, nil
	}
	if !backupfile.MtimeOK(uint64(ref.UTime.Seconds()), h.Mtime) {
		return nil, nil // too-old timestamp
	}
	if h.DevStart*512 >= 4096 {
		dup := make([]byte, backupfile.Size)
		if _, err := bf.ReadAt(dup, int64(h.DevStart)*512-4096); err != nil {
			return nil, nil
		}
		n := backupfile.OffPad1
		if h.Version == 2 {
			n = backupfile.OffPad
		}
		if string(dup[:n]) != string(hb[:n]) {
			return nil, nil // "Failed to verify secondary backup-metadata block"
		}
	}
	pr := &pendingRestore{sections: h.Sections(), pos: h.Restart(pos, forwards)}
	for _, s := range pr.sections {
		switch {
		case ahead && forwards:
			pr.pos = max(pr.pos, s.ArrayStart+s.Length) // Needed: some section ends at or after pos
		case ahead:
			pr.pos = min(pr.pos, s.ArrayStart) // Needed: some section starts below pos
		}
	}
	for _, s := range pr.sections {
		if s.Length > 1<<21 {
			return nil, fmt.Errorf("%w: backup section of %d sectors", ErrUnsupported, s.Length)
		}
		d := make([]byte, s.Length<<9)
		if _, err := bf.ReadAt(d, int64(s.DevStart)*512); err != nil {
			return nil, fmt.Errorf("backup file: %w", err)
		}
		pr.data = append(pr.data, d)
	}
	return pr, nil
}

// restoreBackup is restore_stripes and the superblock update of
// Grow_restart: the sections written as full stripes of the new
// geometry (they lie below the restart position), then reshape_position
// recorded.
func (a *Array) restoreBackup(pr *pendingRestore) error {
	if !a.reshaping() {
		return fmt.Errorf("%w: a reshape backup for an array not reshaping", ErrUnsupported)
	}
	rp := a.pers.(*reshapePers)
	st := a.rs.geo.New.StripeSectors()
	for i, s := range pr.sections {
		done := s.ArrayStart+s.Length <= pr.pos // forwards: below the restart position
		if a.rs.geo.Backwards {
			done = s.ArrayStart >= pr.pos
		}
		if s.ArrayStart%st != 0 || s.Length%st != 0 || !done {
			return fmt.Errorf("%w: backup section [%d, +%d) is not whole new stripes on the done side of %d",
				ErrUnsupported, s.ArrayStart, s.Length, pr.pos)
		}
		if err := rp.mover.writeFull(pr.data[i], s.ArrayStart, int(s.Length/st), false, nil); err != nil {
			return err
		}
	}
	if err := a.flushMembers(); err != nil {
		return err
	}
	a.opts.Logf("md: %s: restored the reshape's critical section from the backup file", a.mdName())
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	if err := a.updateSuperLocked(true); err != nil {
		return err
	}
	if sl := a.rs.slide; sl != nil {
		return sl.write(a, nil) // restored: the header holds no section any more
	}
	return nil
}
