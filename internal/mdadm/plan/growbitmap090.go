package plan

import (
	"mdtool/bitmap"
	"mdtool/superblock"
)

// room090 is the room (sectors) of a 0.90 member's bitmap: 60 KiB after
// the 4 KiB superblock, which add_internal_bitmap0's max_bits allows.
const room090 = 60 * 2

// GrowBitmap090 is mdadm 4.2's add_internal_bitmap0 for --grow on an array
// with 0.90 metadata: the bitmap 4 KiB after the superblock (bitmap_offset
// 8, the only place md's location_store accepts for 0.90), at most 60 KiB;
// its chunk at least 64 MiB unless given, a given chunk too small for 60
// KiB refused (*bitmap.ChunkTooSmallError). sb is the member's 0.90
// superblock, view its v1 view (superblock.V1View). The bitmap's uuid is
// the set_uuid words in memory order (uuid_from_super0).
func GrowBitmap090(sb *superblock.SuperblockV090, view *superblock.Superblock, chunk uint64) (int32, bitmap.Header, error) {
	var h bitmap.Header
	if view.Level <= 0 {
		return 0, h, ErrBitmapLevel
	}
	size := GrowBitmapSize(view)
	c, err := bitmap.ChooseChunk(room090, size, chunk)
	if err != nil {
		return 0, h, err
	}
	h = bitmap.Header{
		Magic:       bitmap.Magic,
		Version:     bitmap.Version,
		UUID:        sb.BitmapUUID090(),
		ChunkSize:   uint32(c),
		DaemonSleep: DefaultBitmapDelay,
		SyncSize:    size,
	}
	return superblock.Size090 >> 9, h, nil
}
