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
