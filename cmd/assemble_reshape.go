package cmd

import "mdtool/superblock"

// servableReshape says whether the engine serves an array whose
// superblock records an active reshape: raid4/5/6 without a
// write-intent bitmap, with the level unchanged (the kernel's raid5_run
// refuses the rest too, or runs them through other personalities).
func servableReshape(sb *superblock.Superblock) bool {
	switch sb.Level {
	case superblock.LevelRAID4, superblock.LevelRAID5, superblock.LevelRAID6:
	default:
		return false
	}
	return sb.FeatureMap&superblock.FeatureBitmapOffset == 0 && sb.NewLevel == sb.Level
}

// reshapeRecovered is Assemble's exception for a member not yet in sync
// during a reshape: mdadm 4.2 counts it as available when its best[]
// slot i (twice the role) is at least raid_disks - delta_disks. The
// comparison is of the slot, not the role, as mdadm 4.2 makes it, so
// every role from (raid_disks - delta_disks) / 2 on counts: a device that
// fills a missing role of a growing reshape (raid0 growth through raid4)
// is assembled as mdadm assembles it, the kernel then treating it as in
// reshape by its recovery_offset.
func reshapeRecovered(sb *superblock.Superblock, i int) bool {
	if sb == nil || sb.FeatureMap&superblock.FeatureReshapeActive == 0 {
		return false
	}
	return i >= int(sb.RaidDisks)-int(int32(sb.DeltaDisks))
}
