package cmd

import (
	"testing"

	"mdtool/superblock"
)

func TestServableReshape(t *testing.T) {
	for _, c := range []struct {
		level, newLevel int32
		features        uint32
		want            bool
	}{
		{superblock.LevelRAID5, superblock.LevelRAID5, superblock.FeatureReshapeActive | superblock.FeatureNewOffset, true},
		{superblock.LevelRAID6, superblock.LevelRAID6, superblock.FeatureReshapeActive, true},
		{superblock.LevelRAID4, superblock.LevelRAID4, superblock.FeatureReshapeActive, true},
		{superblock.LevelRAID5, superblock.LevelRAID6, superblock.FeatureReshapeActive, false},
		{superblock.LevelRAID5, superblock.LevelRAID5, superblock.FeatureReshapeActive | superblock.FeatureBitmapOffset, false},
		{superblock.LevelRAID10, superblock.LevelRAID10, superblock.FeatureReshapeActive, false},
		{superblock.LevelRAID0, superblock.LevelRAID0, superblock.FeatureReshapeActive, false},
	} {
		sb := &superblock.Superblock{Level: c.level, NewLevel: c.newLevel, FeatureMap: c.features}
		if got := servableReshape(sb); got != c.want {
			t.Errorf("level %d -> %d features %#x: %v, want %v", c.level, c.newLevel, c.features, got, c.want)
		}
	}
}
