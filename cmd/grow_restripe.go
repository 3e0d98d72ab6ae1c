package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"

	"mdtool/internal/daemon"
	"mdtool/internal/mdadm/plan"
	"mdtool/superblock"
)

// Restriping reshapes (--chunk, --layout, --raid-devices of a raid0/4/5/6,
// and the level changes mdadm 4.2 makes by restriping): Grow_reshape's
// checks, analyse_change, then reshape_array's sequence: the spare checks,
// the level the restripe runs at imposed (impose_level), the devices
// given added, the size check, the room for moving data_offset (mdtool
// has no backup file: without room it refuses before anything changes),
// and the reshape started by the daemon, which imposes the final level
// when the reshape ends (what mdadm's forked child does).

// restripe is analyse_change's reshape plus the values reshape_array
// derives from it.
type restripe struct {
	re                 levelChange
	newLevel           int
	oldChunk, newChunk int // bytes
	delta              int // info->delta_disks after analyse_change
	backupBlocks       uint64
	minOffset          uint64 // sectors
	newSize            uint64 // array sectors after the reshape
}

// backupBlocks is mdadm 4.2's compute_backup_blocks: the least common
// multiple of the old and new data stripes, in sectors.
func backupBlocks(newChunk, oldChunk, newData, oldData int) uint64 {
	a := uint64(oldChunk/512) * uint64(oldData)
	b := uint64(newChunk/512) * uint64(newData)
	g := a
	for r := b; r != 0; {
		g, r = r, g%r
	}
	if g == 0 {
		return 0
	}
	return uint64(oldChunk/512) * uint64(newChunk/512) * uint64(oldData) * uint64(newData) / g
}

// analyseRestripe is analyse_change for a raid0/4/5/6 (component in
// sectors, chunks in bytes, newChunk 0: unchanged, delta and newLayout
// unset when not given). A non-empty message is mdadm's refusal.
func analyseRestripe(md string, level, layout, raidDisks, chunk int, component uint64, newLevel, newLayout, delta, newChunk int) (restripe, string) {
	r := restripe{newLevel: newLevel, oldChunk: chunk}
	if newChunk != 0 {
		switch newLevel {
		case 0, 4, 5, 6, 10:
			if component%uint64(newChunk/512) != 0 {
				shrink := component &^ uint64(newChunk/512-1)
				return r, fmt.Sprintf("New chunk size (%dK) does not evenly divide device size (%dk)\n"+
					"mdtool: After shrinking any filesystem, \"mdadm --grow %s --size %d\"\n"+
					"mdtool: will shrink the array so the given chunk size would work.", newChunk/1024, component/2, md, shrink/2)
			}
		default:
			return r, "chunk size not meaningful for this level"
		}
	}
	re, msg := analyseLevel(level, layout, raidDisks, chunk, component, newLevel, newLayout, delta, newChunk)
	if msg != "" {
		return r, msg
	}
	r.re = re
	if newChunk == 0 {
		newChunk = chunk
	}
	r.newChunk = newChunk
	deltaParity := 0
	switch {
	case level == 0 && newLevel == 4 || level == 0 && newLevel == 5 || (level == 4 || level == 5) && newLevel == 6:
		deltaParity = 1
	case level == 0 && newLevel == 6:
		deltaParity = 2
	case (level == 4 || level == 5) && newLevel == 0 || level == 6 && (newLevel == 4 || newLevel == 5):
		deltaParity = -1
	}
	r.delta = delta
	if delta == unset {
		r.delta = deltaParity
	}
	if re.immediate {
		return r, ""
	}
	r.backupBlocks = backupBlocks(newChunk, chunk, re.afterData, re.beforeData)
	r.minOffset = r.backupBlocks / uint64(re.beforeData)
	r.newSize = component * uint64(re.afterData)
	return r, ""
}

// restripeLayout is Grow_reshape's reading of --layout (with the raid6
// non-standard layout refusal) for any level change or none.
func restripeLayout(o *growOptions, md string, level, layout, newLevel int) (int, error) {
	if o.layout == "" {
		if level == superblock.LevelRAID6 && newLevel == superblock.LevelRAID6 && layout >= 16 {
			return 0, exitMsg(ExitFailure, md+" has a non-standard layout.  If you wish to preserve this\n"+
				"       during the reshape, please specify --layout=preserve\n"+
				"       If you want to change it, specify a layout or use --layout=normalise")
		}
		return unset, nil
	}
	if level == newLevel {
		switch o.layout {
		case "normalise", "normalize":
			if level != superblock.LevelRAID6 {
				break
			}
			name, _ := plan.MapNum(plan.R6LayoutTable, layout)
			if len(name) > 2 && name[len(name)-2:] == "-6" {
				if l, ok := plan.MapName(plan.R6LayoutTable, name[:len(name)-2]); ok {
					return l, nil
				}
			}
			return unset, nil
		case "preserve":
			if level == superblock.LevelRAID6 {
				return layout, nil
			}
			return 0, exitf(ExitFailure, "%s in only meaningful when reshaping to RAID6", o.layout)
		}
	}
	return growLevelLayout(o, level, layout, newLevel)
}

// restripeRoom is set_new_data_offset's check that every member has room
// to move its data (min sectors): before it when the array grows, after
// it when it shrinks, the larger of the two otherwise. Without room mdadm
// 4.2 falls back to a backup file, which mdtool does not have. The first
// member's superblock stands for all (they agree on the offsets).
func restripeRoom(st *daemon.Status, delta int, min uint64) (bool, error) {
	sb, err := superblock.Parse(st.Superblock)
	if err != nil {
		return false, err
	}
	var before, after uint64
	dataSize := sb.Size
	if sb.Level <= 0 {
		dataSize = sb.DataSize // getinfo_super1: raid0 and linear use data_size
	}
	if sb.DataOffset < sb.SuperOffset { // 1.0
		if sb.DataOffset+dataSize < sb.SuperOffset {
			after = sb.SuperOffset - dataSize - sb.DataOffset
		}
		before = sb.DataOffset
	} else {
		earliest := sb.SuperOffset + (32+4)*2
		if sb.BBLogOffset != 0 && sb.BBLogSize != 0 {
			earliest = max(earliest, sb.SuperOffset+uint64(int64(sb.BBLogOffset))+uint64(sb.BBLogSize))
		}
		if earliest < sb.DataOffset {
			before = sb.DataOffset - earliest
		}
		if dev := memberSectors(st); dev > sb.DataOffset+dataSize {
			after = dev - dataSize - sb.DataOffset
		}
	}
	switch {
	case delta > 0:
		return before >= min, nil
	case delta < 0:
		return after >= min, nil
	case before > after:
		return before >= min, nil
	}
	return after >= min, nil
}

// memberSectors is the size of the first in-sync member (0 when unknown).
func memberSectors(st *daemon.Status) uint64 {
	for _, m := range st.Members {
		if m.State != "in_sync" || m.Path == "" || m.Remote != nil {
			continue
		}
		f, err := os.Open(m.Path)
		if err != nil {
			return 0
		}
		defer f.Close()
		n, err := f.Seek(0, 2)
		if err != nil || n < 0 {
			return 0
		}
		return uint64(n) / 512
	}
	return 0
}

// noBackupFile is reshape_array's refusal when the data cannot move and
// no backup file was given.
func noBackupFile(md string, r restripe, spares int) error {
	var need string
	if r.re.afterData != r.re.beforeData {
		need = fmt.Sprintf("Need to backup %dK of critical section..\nmdtool: ", r.backupBlocks/2)
	}
	if r.re.afterData <= r.re.beforeData {
		return exitMsg(ExitFailure, need+md+": Cannot grow - need backup-file\n"+
			"mdtool:  Please provide one with \"--backup=...\"")
	}
	if spares == 0 {
		return exitMsg(ExitFailure, need+md+": Cannot grow - need a spare or backup-file to backup critical section")
	}
	// mdadm 4.2 would back the critical section up on a spare.
	return exitMsg(ExitFailure, need+md+": Cannot grow - no room to move the data and mdtool keeps no backup of the critical section")
}

// runRestripe is reshape_array from the spare checks on, for a change
// analyseRestripe found to need a restripe.
func runRestripe(env *Env, o *growOptions, cl *daemon.Client, st *daemon.Status, md string, r restripe) error {
	if err := levelSpares(o, st, r.newLevel, r.re); err != nil {
		return err
	}
	if int64(r.newSize) < st.Size/512 {
		return exitMsg(ExitFailure, fmt.Sprintf("this change will reduce the size of the array.\n"+
			"       use --grow --array-size first to truncate array.\n"+
			"       e.g. mdadm --grow %s --array-size %d", md, r.newSize/2))
	}
	spares := len(o.add)
	for _, m := range st.Members {
		if m.State == "spare" {
			spares++
		}
	}
	if inPlace(o) {
		if err := createBackupFile(env, o, md, r, st.ComponentSectors); err != nil {
			return err
		}
	} else {
		ok, err := restripeRoom(st, r.re.afterData-r.re.beforeData, r.minOffset)
		if err != nil {
			return exitf(ExitFailure, "%s: cannot get superblock: %v", md, err)
		}
		if !ok {
			return noBackupFile(md, r, spares)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), growTimeout)
	defer cancel()
	// sysfs_freeze_array: no recovery onto the spares given while the
	// level changes and the reshape is set up; the reshape starts when
	// the array is unfrozen.
	if _, err := cl.Call(ctx, daemon.Request{Op: daemon.OpAction, Action: "frozen"}); err != nil {
		return exitf(ExitFailure, "%s is performing resync/recovery and cannot be reshaped", md)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), growTimeout)
		defer cancel()
		_, _ = cl.Call(ctx, daemon.Request{Op: daemon.OpAction, Action: "idle"})
	}()
	if r.re.level != st.Level {
		lv := r.re.level
		name, _ := plan.LevelName(lv)
		if _, err := cl.Call(ctx, daemon.Request{Op: daemon.OpLevel, Level: &lv}); err != nil {
			return exitf(ExitFailure, "%s: could not set level to %s", md, name)
		}
		if o.verbose >= 0 {
			fmt.Fprintf(env.Stderr, "mdtool: level of %s changed to %s\n", md, name)
		}
	}
	if err := growAddDevices(env, o, md); err != nil {
		return err
	}
	req := backupRequest(restripeRequest(r), o)
	slideSetup(&req, o, r, st.ComponentSectors)
	if _, err := cl.Call(ctx, req); err != nil {
		if r.re.level != st.Level {
			// mdtool's own refusal (the engine's): take the array back
			// to its level, so that the refused change changes nothing.
			lv := st.Level
			if _, rerr := cl.Call(ctx, daemon.Request{Op: daemon.OpLevel, Level: &lv}); rerr != nil {
				name, _ := plan.LevelName(lv)
				fmt.Fprintf(env.Stderr, "mdtool: %s: could not set level back to %s (%v)\n", md, name, rerr)
			}
		}
		var oe *daemon.OpError
		if errors.As(err, &oe) && oe.Code == daemon.CodeBusy {
			return exitf(ExitFailure, "Cannot set device shape for %s: Device or resource busy", md)
		}
		return exitf(ExitFailure, "Cannot set device shape for %s: %v", md, err)
	}
	if r.newLevel != r.re.level && inPlace(o) {
		// mdadm's child keeps its stderr only on the in-place path (the
		// one moving data_offset sends it to /dev/null: manage_fork_fds)
		startReshapeMonitor(env, o, md, r.newLevel) // reshape_monitor.go
	}
	return nil
}

// restripeRequest is impose_reshape's change as one daemon request:
// raid_disks, layout and chunk of the level the restripe runs at, and
// the level to impose when it ends.
func restripeRequest(r restripe) daemon.Request {
	parity := r.re.parity
	req := daemon.Request{Op: daemon.OpReshape, RaidDisks: r.re.afterData + parity}
	if r.re.level != superblock.LevelRAID4 && r.re.afterLayout != r.re.beforeLayout {
		l := r.re.afterLayout
		req.Layout = &l
	}
	if r.newChunk != r.oldChunk {
		req.ChunkSectors = uint64(r.newChunk / 512)
	}
	if r.newLevel != r.re.level {
		lv := r.newLevel
		req.FinalLevel = &lv
	}
	return req
}

// growSameLevel is Grow_reshape for --raid-devices, --chunk or --layout of
// a raid0/4/5/6 without a level change.
func growSameLevel(env *Env, o *growOptions, cl *daemon.Client, st *daemon.Status, md string) error {
	switch st.Level {
	case superblock.LevelRAID0, superblock.LevelRAID4, superblock.LevelRAID5, superblock.LevelRAID6:
	case superblock.LevelRAID10:
		return exitf(ExitFailure, "reshape of this level is not supported yet")
	default:
		if o.chunk != "" {
			// analyse_change's first test (tests/07changelevels: raid1 -n4 --chunk 32)
			return exitf(ExitFailure, "chunk size not meaningful for this level")
		}
		return exitf(ExitFailure, "reshape of this level is not supported yet")
	}
	if o.raidDevices > st.RaidDisks {
		spares := len(o.add)
		for _, m := range st.Members {
			if m.State == "spare" {
				spares++
			}
		}
		if need := o.raidDevices - st.RaidDisks; spares < need && !o.force {
			s := "s"
			if need == 1 {
				s = ""
			}
			return exitMsg(ExitFailure, fmt.Sprintf("Need %d spare%s to avoid degraded array, and only have %d.\n"+
				"       Use --force to over-ride this check.", need, s, spares))
		}
	}
	if st.SyncAction != "idle" && st.SyncAction != "" && st.SyncAction != "frozen" {
		return exitf(ExitFailure, "%s is performing resync/recovery and cannot be reshaped", md)
	}
	if o.layout == "" && o.chunk == "" && (o.raidDevices == 0 || o.raidDevices == st.RaidDisks) {
		if o.verbose >= 0 {
			fmt.Fprintf(env.Stderr, "mdtool: %s: no change requested\n", md)
		}
		return nil
	}
	newLayout, err := restripeLayout(o, md, st.Level, st.Layout, st.Level)
	if err != nil {
		return err
	}
	newChunk, err := growChunk(o)
	if err != nil {
		return err
	}
	delta := unset
	if o.raidDevices != 0 {
		delta = o.raidDevices - st.RaidDisks
	}
	r, msg := analyseRestripe(md, st.Level, st.Layout, st.RaidDisks, int(st.ChunkBytes), st.ComponentSectors, st.Level, newLayout, delta, newChunk)
	if msg != "" {
		return exitMsg(ExitFailure, msg)
	}
	if r.re.immediate {
		if err := levelSpares(o, st, st.Level, r.re); err != nil {
			return err
		}
		if (newLayout == unset || newLayout == st.Layout) && r.newChunk == int(st.ChunkBytes) && r.delta == 0 {
			return nil // nothing to set
		}
		return exitf(ExitFailure, "changing the chunk size or layout of an array with one data device is not supported yet")
	}
	return runRestripe(env, o, cl, st, md, r)
}

// growChunk is --chunk in bytes (0: not given).
func growChunk(o *growOptions) (int, error) {
	if o.chunk == "" {
		return 0, nil
	}
	kib, err := plan.ParseChunk(o.chunk)
	if err != nil {
		return 0, usagef("invalid chunk/rounding value: %s", o.chunk)
	}
	return int(kib) * 1024, nil
}
