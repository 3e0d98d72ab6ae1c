package cmd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"mdtool/internal/daemon"
	"mdtool/internal/mdadm/plan"
	"mdtool/superblock"
)

// grow --level: mdadm 4.2's Grow_reshape -> reshape_array for a level
// change. analyseLevel is its analyse_change for the levels md can take
// over; a change that needs no data movement is made by the daemon
// (md's takeover: superblocks only), one that would restripe is refused
// before anything changes (mdtool cannot reshape in place yet).

const unset = -1 << 30 // mdadm's UnSet

// levelChange is analyse_change's struct reshape, as far as a level
// change needs it.
type levelChange struct {
	level                     int // the level the restripe runs at (re->level); the new one when immediate
	beforeLayout, afterLayout int
	beforeData, afterData     int
	parity                    int
	immediate                 bool // no restripe (backup_blocks == 0)
}

// analyseLevel is mdadm 4.2's analyse_change for a level change from
// level/layout/raidDisks/chunk (bytes) to newLevel with newLayout and
// delta (unset when not given) and newChunk (bytes, 0: unchanged).
// component is the component size in sectors. It returns mdadm's
// message when it refuses.
func analyseLevel(level, layout, raidDisks, chunk int, component uint64, newLevel, newLayout, delta, newChunk int) (levelChange, string) {
	var re levelChange
	deltaParity := 0
	switch level {
	case superblock.LevelRAID1:
		if newLevel > 1 && component&7 != 0 {
			return re, "Cannot convert RAID1 of this size - reduce size to multiple of 4K first."
		}
		if newLevel == superblock.LevelRAID0 {
			if delta != unset && delta != 0 {
				return re, "Cannot change number of disks with RAID1->RAID0 conversion"
			}
			return levelChange{level: 0, beforeData: 1, afterData: 1, immediate: true}, ""
		}
		if raidDisks != 2 && newLevel == superblock.LevelRAID5 {
			return re, "Can only convert a 2-device array to RAID5"
		}
		if newLevel != superblock.LevelRAID5 {
			return re, "Impossibly level change request for RAID1"
		}
		re.level, re.beforeData, re.afterData = 5, 1, 1
		if delta != unset && delta != 0 {
			re.afterData = 1 + delta
		}
		if re.afterData < 1 {
			return re, "Number of disks too small for RAID5"
		}
		re.beforeLayout = superblock.LayoutLeftSymmetric
		chunk = 65536
	case superblock.LevelRAID0:
		if newLevel == superblock.LevelRAID10 {
			return analyseRAID0To10(raidDisks, chunk, newLayout, delta, newChunk)
		}
		switch newLevel {
		case superblock.LevelRAID4:
			deltaParity = 1
			re.level = 4
		case superblock.LevelRAID0:
			re.level = 4
		case superblock.LevelRAID5:
			deltaParity = 1
			re.level, re.beforeLayout = 5, superblock.LayoutParityLast
			if newLayout == unset {
				newLayout = superblock.LayoutLeftSymmetric // map_name(r5layout, "default")
			}
		case superblock.LevelRAID6:
			deltaParity = 2
			re.level, re.beforeLayout = 6, superblock.LayoutParityLast
			if newLayout == unset {
				newLayout = superblock.LayoutLeftSymmetric
			}
		default:
			return re, "Impossible level change requested"
		}
		re.beforeData = raidDisks
	case superblock.LevelRAID4, superblock.LevelRAID5:
		if level == superblock.LevelRAID4 {
			layout = superblock.LayoutParityLast
		}
		switch newLevel {
		case superblock.LevelRAID0, superblock.LevelRAID4, superblock.LevelRAID5:
			if newLevel == superblock.LevelRAID0 {
				deltaParity = -1
			}
			re.level, re.beforeData, re.beforeLayout = level, raidDisks-1, layout
			if newLevel == superblock.LevelRAID5 {
				re.level = 5
			}
		case superblock.LevelRAID6:
			deltaParity = 1
			re.level, re.beforeData = 6, raidDisks-1
			switch {
			case layout >= superblock.LayoutLeftAsymmetric && layout <= superblock.LayoutParityFirst:
				re.beforeLayout = layout + superblock.LayoutLeftAsymmetric6
			case layout == superblock.LayoutParityLast:
				re.beforeLayout = layout
			default:
				return re, "Cannot convert an array with this layout"
			}
		case superblock.LevelRAID1:
			if raidDisks != 2 {
				return re, "Can only convert a 2-device array to RAID1"
			}
			if delta != unset && delta != 0 {
				return re, "Cannot set raid_disk when converting RAID5->RAID1"
			}
			return levelChange{level: 1, immediate: true}, ""
		default:
			return re, "Impossible level change requested"
		}
	case superblock.LevelRAID6:
		switch newLevel {
		case superblock.LevelRAID4, superblock.LevelRAID5, superblock.LevelRAID6:
			if newLevel != superblock.LevelRAID6 {
				deltaParity = -1
			}
			re.level, re.beforeData, re.beforeLayout = 6, raidDisks-2, layout
		default:
			return re, "Impossible level change requested"
		}
	case superblock.LevelRAID10:
		return analyseRAID10(layout, raidDisks, chunk, newLevel, delta, newChunk)
	default:
		return re, "Impossible level change requested"
	}
	if msg := afterLayout(&re, newLevel, newLayout, layout); msg != "" {
		return re, msg
	}
	if delta == unset {
		delta = deltaParity
	}
	re.afterData = re.beforeData + delta - deltaParity
	switch re.level {
	case 6:
		re.parity = 2
	case 4, 5:
		re.parity = 1
	}
	if newChunk == 0 {
		newChunk = chunk
	}
	if re.afterData == re.beforeData && re.afterLayout == re.beforeLayout && newChunk == chunk ||
		re.afterData == 1 && re.beforeData == 1 {
		re.level, re.immediate = newLevel, true
	}
	return re, ""
}

// afterLayout is analyse_change's choice of the layout the restripe
// ends at, from which the new level is one takeover away.
func afterLayout(re *levelChange, newLevel, newLayout, layout int) string {
	switch newLevel {
	case superblock.LevelRAID0, superblock.LevelRAID4:
		if re.level != 4 && re.level != 5 {
			if newLevel == 0 {
				return "Cannot covert to RAID0 from this level"
			}
			return "Cannot convert to RAID4 from this level"
		}
		if re.level == 4 {
			re.beforeLayout, re.afterLayout = 0, 0
		} else {
			re.afterLayout = superblock.LayoutParityLast
		}
	case superblock.LevelRAID5:
		switch re.level {
		case 5:
			re.afterLayout = re.beforeLayout
			if newLayout != unset {
				re.afterLayout = newLayout
			}
		case 6:
			if newLayout == unset {
				newLayout = re.beforeLayout
			}
			if newLayout == superblock.LayoutParityLast {
				re.afterLayout = newLayout
				break
			}
			if name, ok := plan.MapNum(plan.R5LayoutTable, newLayout); ok {
				l, ok := plan.MapName(plan.R6LayoutTable, name+"-6")
				if !ok {
					return "Cannot find RAID6 layout to convert to"
				}
				re.afterLayout = l
				break
			}
			name, ok := plan.MapNum(plan.R6LayoutTable, newLayout)
			if !ok || !strings.HasSuffix(name, "-6") {
				return "Please specify new layout"
			}
			re.afterLayout = newLayout
		default:
			return "Cannot convert to RAID5 from this level"
		}
	case superblock.LevelRAID6:
		if re.level != 6 {
			return "Impossible level change"
		}
		re.afterLayout = layout
		if newLayout != unset {
			re.afterLayout = newLayout
		}
	default:
		return "Impossible level change requested"
	}
	return ""
}

// growLevelLayout is Grow_reshape's reading of --layout for a level
// change: preserve keeps raid5's layout as its -6 form, normalise is
// refused, other names are looked up for the new level.
func growLevelLayout(o *growOptions, level, layout, newLevel int) (int, error) {
	switch o.layout {
	case "":
		return unset, nil
	case "normalise", "normalize":
		return 0, exitf(ExitFailure, "%s is only meaningful when reshaping a RAID6 array.", o.layout)
	case "preserve":
		if level == superblock.LevelRAID5 && newLevel == superblock.LevelRAID6 {
			name, _ := plan.MapNum(plan.R5LayoutTable, layout)
			l, ok := plan.MapName(plan.R6LayoutTable, name+"-6")
			if !ok {
				return unset, nil
			}
			return l, nil
		}
		return 0, exitf(ExitFailure, "%s in only meaningful when reshaping to RAID6", o.layout)
	}
	var l int
	var ok bool
	switch newLevel {
	case superblock.LevelRAID5:
		l, ok = plan.MapName(plan.R5LayoutTable, o.layout)
	case superblock.LevelRAID6:
		l, ok = plan.MapName(plan.R6LayoutTable, o.layout)
	case superblock.LevelRAID10:
		v, err := plan.ParseLayout(newLevel, o.layout)
		l, ok = int(v), err == nil
	default:
		return 0, exitf(ExitFailure, "layout not meaningful with this level")
	}
	if !ok {
		return 0, exitf(ExitFailure, "layout %s not understood for this level", o.layout)
	}
	return l, nil
}

// takeovers are the level changes the engine makes without moving data
// (md's takeover functions).
var takeovers = map[[2]int]bool{{1, 5}: true, {5, 1}: true, {0, 4}: true, {0, 5}: true, {4, 0}: true, {5, 0}: true, {5, 6}: true, {6, 5}: true}

// growLevel changes the level of a running array as mdadm 4.2 does when
// no restripe is needed: the spare checks, "level of MD changed to
// raidN", then the devices given are added (a spare then recovers the
// role the new level adds).
func growLevel(env *Env, o *growOptions, md string) error {
	newLevel, err := plan.ParseLevel(o.level)
	if err != nil {
		return usagef("invalid raid level: %s", o.level)
	}
	if o.chunk != "" {
		return exitf(ExitFailure, "Cannot change array level in the same operation as changing chunk size.")
	}
	cl, st, err := growDial(o, md)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := dropBitmapForRAID0(cl, st, newLevel); err != nil {
		return err
	}
	if newLevel == st.Level {
		o.level = ""
		if o.layout == "" && o.chunk == "" && (o.raidDevices == 0 || o.raidDevices == st.RaidDisks) {
			if o.verbose >= 0 {
				fmt.Fprintf(env.Stderr, "mdtool: %s: no change requested\n", md)
			}
			return nil
		}
		return growReshape(env, o, md)
	}
	if o.chunk != "" {
		// Grow_reshape's first check (mdadm 4.2 makes it for the same
		// level too; that case is left to growReshape here)
		return exitf(ExitFailure, "Cannot change array level in the same operation as changing chunk size.")
	}
	newLayout, err := growLevelLayout(o, st.Level, st.Layout, newLevel)
	if err != nil {
		return err
	}
	newChunk := 0
	if o.chunk != "" {
		kib, err := plan.ParseSize(o.chunk)
		if err != nil {
			return usagef("invalid chunk/rounding value: %s", o.chunk)
		}
		newChunk = int(kib) * 1024
	}
	delta := unset
	if o.raidDevices != 0 {
		delta = o.raidDevices - st.RaidDisks
	}
	if st.SyncAction != "idle" && st.SyncAction != "" {
		return exitf(ExitFailure, "%s is performing resync/recovery and cannot be reshaped", md)
	}
	if newLevel == superblock.LevelRAID0 {
		if err := prepareRAID0(cl, st); err != nil {
			return err
		}
	}
	re, msg := analyseLevel(st.Level, st.Layout, st.RaidDisks, int(st.ChunkBytes), st.ComponentSectors, newLevel, newLayout, delta, newChunk)
	if msg != "" {
		return exitf(ExitFailure, "%s", msg)
	}
	if err := levelSpares(o, st, newLevel, re); err != nil {
		return err
	}
	if re.immediate && newLevel == superblock.LevelRAID0 && st.Level == superblock.LevelRAID5 && st.Layout != superblock.LayoutParityLast {
		// impose_level: only a parity-last raid5 becomes a raid0; mdadm
		// 4.2 gives up without a word.
		return exitStatus(ExitFailure)
	}
	if !re.immediate {
		r, msg := analyseRestripe(md, st.Level, st.Layout, st.RaidDisks, int(st.ChunkBytes), st.ComponentSectors, newLevel, newLayout, delta, newChunk)
		if msg != "" {
			return exitMsg(ExitFailure, msg)
		}
		return runRestripe(env, o, cl, st, md, r) // grow_restripe.go
	}
	if !takeovers[[2]int{st.Level, newLevel}] {
		return exitf(ExitFailure, "%s", levelUnsupported(st, newLevel))
	}
	lv := newLevel
	ctx, cancel := context.WithTimeout(context.Background(), growTimeout)
	defer cancel()
	name, _ := plan.LevelName(newLevel)
	if _, err := cl.Call(ctx, daemon.Request{Op: daemon.OpLevel, Level: &lv}); err != nil {
		var oe *daemon.OpError
		if errors.As(err, &oe) && oe.Code == daemon.CodeBusy {
			return exitf(ExitFailure, "%s: could not set level to %s%s", md, name, levelBusyBitmap(st))
		}
		return exitf(ExitFailure, "%s: could not set level to %s (%v)", md, name, err)
	}
	if o.verbose >= 0 {
		fmt.Fprintf(env.Stderr, "mdtool: level of %s changed to %s\n", md, name)
	}
	if err := growAddDevices(env, o, md); err != nil {
		return err
	}
	return nil
}

// levelSpares is reshape_array's two spare checks.
func levelSpares(o *growOptions, st *daemon.Status, newLevel int, re levelChange) error {
	spares := len(o.add)
	for _, m := range st.Members {
		if m.State == "spare" {
			spares++
		}
	}
	need := max(re.beforeData, re.afterData) + re.parity - st.RaidDisks
	plural := func(n int) string {
		if n == 1 {
			return ""
		}
		return "s"
	}
	if !o.force && newLevel > 1 && st.Level > 1 && need > spares {
		return exitMsg(ExitFailure, fmt.Sprintf("Need %d spare%s to avoid degraded array, and only have %d.\n"+
			"       Use --force to over-ride this check.", need, plural(need), spares))
	}
	need = max(re.beforeData, re.afterData) - st.RaidDisks
	if (newLevel > 1 || newLevel == 0) && need > spares {
		return exitf(ExitFailure, "Need %d spare%s to create working array, and only have %d.", need, plural(need), spares)
	}
	return nil
}

// levelUnsupported words a level change mdadm 4.2 makes by a takeover
// mdtool does not have.
func levelUnsupported(st *daemon.Status, newLevel int) string {
	from, _ := plan.LevelName(st.Level)
	to, _ := plan.LevelName(newLevel)
	return fmt.Sprintf("changing the level from %s to %s is not supported yet", from, to)
}

// growAddDevices adds the devices given with --add as "mdtool manage MD
// --add" does (mdadm's Grow_reshape adds them after the level change).
func growAddDevices(env *Env, o *growOptions, md string) error {
	if len(o.add) == 0 {
		return nil
	}
	args := []string{"manage", "--run-dir", o.runDir}
	if o.verbose < 0 {
		args = append(args, "--quiet")
	}
	args = append(append(args, md, "--add"), o.add...)
	if rc := Main(args, env); rc != 0 {
		return exitStatus(ExitFailure)
	}
	return nil
}
