package engine

import (
	"mdtool/bitmap"
	"mdtool/superblock"
)

// placeAddedBBLog places the bad-block log of a device being added as
// mdadm 4.2's write_init_super1 does for the superblock it copied from a
// member: the log follows the room kept for a bitmap (the bitmap's area
// when the array has one, else choose_bm_space of the component size
// sb.Size, 8 sectors from the superblock), or, when the data starts too
// early for that, sits just before the data; on 1.0 it is 8 sectors
// before the superblock when there is room. Where mdadm sets nothing the
// copied fields stay. The copy's own log says nothing: a raid0 created
// with component size 0 has its log at 8, while a spare added after the
// raid0 became a raid5 of known size gets it at 16, as md's members show.
func placeAddedBBLog(sb *superblock.Superblock, minor int, bms *bitmap.Header) {
	space := bitmap.ChooseSpace(sb.Size)
	off := int64(8)
	if sb.FeatureMap&superblock.FeatureBitmapOffset != 0 && bms != nil {
		space = bitmap.AreaSize(bms, 4096) >> 9
		off = int64(sb.BitmapOffset)
	}
	if minor == 0 {
		space += 8
		if sb.SuperOffset < sb.Size+space {
			space = sb.SuperOffset - min(sb.Size, sb.SuperOffset)
		}
		if space >= 8 {
			sb.BBLogSize, sb.BBLogOffset = 8, -8
		}
		return
	}
	switch {
	case int64(sb.DataOffset) >= int64(sb.SuperOffset)+off+int64(space)+8:
		sb.BBLogSize, sb.BBLogOffset = 8, int32(off+int64(space))
	case sb.DataOffset >= sb.SuperOffset+16:
		sb.BBLogSize, sb.BBLogOffset = 8, int32(sb.DataOffset-8-sb.SuperOffset)
	}
}
