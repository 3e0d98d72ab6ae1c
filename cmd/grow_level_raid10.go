package cmd

import (
	"context"
	"path/filepath"
	"sort"

	"mdtool/internal/daemon"
	"mdtool/superblock"
)

// raid10 <-> raid0 level changes as mdadm 4.2 makes them: Grow_reshape
// first removes one member of each mirror pair of a near-2 raid10
// (remove_disks_for_takeover), then analyse_change's raid10 and raid0
// cases decide, and the level write is md's raid0_takeover_raid10 or
// raid10_takeover_raid0 (the daemon's existing level operation).

func init() {
	takeovers[[2]int{superblock.LevelRAID10, superblock.LevelRAID0}] = true
	takeovers[[2]int{superblock.LevelRAID0, superblock.LevelRAID10}] = true
}

// raid10Near2 is raid10's near=2 layout word (far 1, not offset).
const raid10Near2 = 1<<8 + 2

// analyseRAID10 is analyse_change's raid10 case for a new level other
// than raid10: only raid0, from a near layout whose copies divide the
// devices, with the devices that leaves and the same chunk.
func analyseRAID10(layout, raidDisks, chunk, newLevel, delta, newChunk int) (levelChange, string) {
	var re levelChange
	if newLevel != superblock.LevelRAID0 {
		return re, "RAID10 can only be changed to RAID0"
	}
	if layout&^0xff != 0x100 {
		return re, "Cannot Grow RAID10 with far/offset layout"
	}
	copies := layout & 0xff
	if copies == 0 || raidDisks%copies != 0 {
		return re, "RAID10 layout too complex for Grow operation"
	}
	newDisks := raidDisks / copies
	if delta == unset {
		delta = newDisks - raidDisks
	}
	if delta != newDisks-raidDisks {
		return re, "New number of raid-devices impossible for RAID10"
	}
	if newChunk != 0 && newChunk != chunk {
		return re, "Cannot change chunk-size with RAID10 Grow"
	}
	return levelChange{level: superblock.LevelRAID0, beforeData: newDisks, afterData: newDisks, immediate: true}, ""
}

// analyseRAID0To10 is analyse_change's raid0 -> raid10 case: near=2
// over twice the devices by default; a layout gives the copies, or the
// devices added do. md's takeover always makes near=2 over twice the
// devices; mdadm would then set the other device counts by a raid10
// reshape (not immediate here: refused before anything changes).
func analyseRAID0To10(raidDisks, chunk, newLayout, delta, newChunk int) (levelChange, string) {
	var re levelChange
	if newLayout == unset && delta == unset {
		newLayout, delta = raid10Near2, raidDisks
	}
	if newLayout == unset {
		copies := 1 + delta/raidDisks
		if raidDisks*(copies-1) != delta {
			return re, "Impossible number of devices for RAID0->RAID10"
		}
		newLayout = 0x100 + copies
	}
	if delta == unset {
		copies := newLayout & 0xff
		if newLayout != 0x100+copies {
			return re, "New layout impossible for RAID0->RAID10"
		}
		delta = (copies - 1) * raidDisks
	}
	if newChunk != 0 && newChunk != chunk {
		return re, "Cannot change chunk-size with RAID0->RAID10"
	}
	re = levelChange{level: superblock.LevelRAID10, beforeData: raidDisks + delta, afterData: raidDisks + delta, beforeLayout: newLayout}
	// impose_level leaves the new layout aside; only the raid_disks
	// md's takeover did not reach would need a reshape afterwards.
	re.immediate = delta == raidDisks
	return re, ""
}

// prepareRAID0 is what Grow_reshape does first for --level=0: it
// removes an internal bitmap without a word (md takes no level change
// with one), then a near-2 raid10 loses one member of each mirror pair
// (removeForTakeover).
func prepareRAID0(cl *daemon.Client, st *daemon.Status) error {
	if err := dropBitmapForRAID0(cl, st, superblock.LevelRAID0); err != nil {
		return err
	}
	return removeForTakeover(cl, st)
}

// removeForTakeover is Grow_reshape's remove_disks_for_takeover for a
// near-2 raid10 with an even number of devices going to raid0: in the
// order mdadm reads the array's members from sysfs, each mirror pair
// keeps its first in-sync member; every other member (the second of
// each pair, faulty ones, spares) is failed and removed as mdadm writes
// "faulty", "none" and "remove" to it (failures ignored, as there).
// When a pair has no in-sync member nothing changes and mdadm exits 1
// without a message.
func removeForTakeover(cl *daemon.Client, st *daemon.Status) error {
	if st.Level != superblock.LevelRAID10 || st.Layout != raid10Near2 || st.RaidDisks%2 != 0 {
		return nil
	}
	members := sysfsOrder(st.Members)
	kept := map[int]bool{}
	for slot := 0; slot < st.RaidDisks; slot += 2 {
		found := false
		for i, m := range members {
			if !kept[i] && m.State == "in_sync" && m.Role >= slot && m.Role < slot+2 {
				kept[i], found = true, true
				break
			}
		}
		if !found {
			return exitStatus(ExitFailure)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), growTimeout)
	defer cancel()
	for i, m := range members {
		if kept[i] {
			continue
		}
		if m.State != "faulty" {
			_, _ = cl.Call(ctx, daemon.Request{Op: daemon.OpFail, Device: m.Path})
		}
		_, _ = cl.Call(ctx, daemon.Request{Op: daemon.OpRemove, Device: m.Path})
	}
	return nil
}

// sysfsOrder is the order in which mdadm's sysfs_read lists an array's
// members: readdir of /sys/block/mdX/md, whose dev-NAME entries kernfs
// keeps sorted by the hash of their name, then by name. NAME is the
// kernel's name of the member (its /dev node, symlinks resolved); an
// image file stands for a loop device of its base name. Empty slots
// are left out.
func sysfsOrder(ms []daemon.MemberStatus) []daemon.MemberStatus {
	type entry struct {
		m    daemon.MemberStatus
		name string
		hash uint32
	}
	var es []entry
	for _, m := range ms {
		if m.Path == "" || m.State == "missing" {
			continue
		}
		p := m.Path
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		name := "dev-" + filepath.Base(p)
		es = append(es, entry{m, name, kernfsNameHash(name)})
	}
	sort.SliceStable(es, func(i, j int) bool {
		if es[i].hash != es[j].hash {
			return es[i].hash < es[j].hash
		}
		return es[i].name < es[j].name
	})
	out := make([]daemon.MemberStatus, len(es))
	for i, e := range es {
		out[i] = e.m
	}
	return out
}

// kernfsNameHash is Linux's kernfs_name_hash for a name without a
// namespace on a 64-bit machine: partial_name_hash over the bytes,
// end_name_hash (hash_long to 32 bits), 31 bits, 0/1 and INT_MAX
// reserved.
func kernfsNameHash(name string) uint32 {
	var h uint64
	for i := 0; i < len(name); i++ {
		c := uint64(int64(int8(name[i]))) // char is signed on x86
		h = (h + c<<4 + c>>4) * 11
	}
	const goldenRatio64 = 0x61C8864680B583EB
	x := uint32(h*goldenRatio64>>32) & 0x7fffffff
	if x < 2 {
		x += 2
	}
	if x >= 0x7fffffff {
		x = 0x7fffffff - 1
	}
	return x
}
