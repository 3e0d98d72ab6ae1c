package plan

import (
	"errors"

	"mdtool/bitmap"
	"mdtool/superblock"
)

// DefaultBitmapDelay is mdadm's DEFAULT_BITMAP_DELAY: the daemon_sleep
// (seconds) --grow writes into a new bitmap.
const DefaultBitmapDelay = 5

// ErrBitmapLevel: mdadm's Grow_addbitmap refuses a level without
// redundancy ("Bitmaps not meaningful with level %s").
var ErrBitmapLevel = errors.New("plan: bitmaps not meaningful with this level")

// GrowBitmapSize is the size (sectors) mdadm 4.2's Grow_addbitmap gives
// add_internal_bitmap1: the component size (array.size*2, so rounded down
// to whole KiB), times raid_disks / copies for raid10.
func GrowBitmapSize(sb *superblock.Superblock) uint64 {
	size := sb.Size / 2 * 2
	if sb.Level == superblock.LevelRAID10 {
		near := uint64(sb.Layout & 255)
		far := uint64(sb.Layout >> 8 & 255)
		if near*far != 0 {
			size = size * uint64(sb.RaidDisks) / (near * far)
		}
	}
	return size
}

// GrowBitmap is mdadm 4.2's add_internal_bitmap1 for --grow on a kernel
// that can place the bitmap (may_change): from one in-sync member's
// superblock it returns the bitmap_offset (sectors from the superblock)
// and the bitmap superblock mdadm writes there (events 0). chunk is
// --bitmap-chunk in bytes, 0 for mdadm's choice (at least 64 MiB).
//
//   - 1.1/1.2: the bitmap goes 4 KiB after the superblock; the room runs
//     to the bad-block log (or to the data without one), less 4 KiB.
//   - 1.0: the room is what lies between the end of the data and the
//     superblock, less the bad-block log; the bitmap is put right below
//     the bad-block log, on a 4 KiB boundary.
//
// Errors: ErrBitmapLevel, bitmap.ErrNoRoom, *bitmap.ChunkTooSmallError,
// bitmap.ErrChunkTooLarge (mdadm: "failed to create internal bitmap -
// chunksize problem.").
func GrowBitmap(sb *superblock.Superblock, chunk uint64) (int32, bitmap.Header, error) {
	var h bitmap.Header
	if sb.Level <= 0 {
		return 0, h, ErrBitmapLevel
	}
	size := GrowBitmapSize(sb)
	var room, offset, bbl int64
	switch {
	case sb.SuperOffset > sb.DataOffset: // 1.0
		room = int64(sb.SuperOffset) - int64(sb.DataOffset) - int64(sb.DataSize)
		bbl = int64(sb.BBLogSize)
		if bbl < 8 {
			bbl = 8
		}
		if o := int64(sb.BBLogOffset); bbl < -o {
			bbl = -o
		}
		if room < 3*2 && sb.MaxDev <= 384 {
			room, offset, bbl = 3*2, 1*2, 0
		}
	default: // 1.1, 1.2
		room = int64(sb.DataOffset) - int64(sb.SuperOffset)
		bbl = int64(sb.BBLogSize)
		if bbl != 0 {
			room = int64(sb.BBLogOffset) + bbl
		} else {
			bbl = 8
		}
		room -= 4 * 2
		offset = 4 * 2
	}
	room -= bbl
	c, err := bitmap.ChooseChunk(room, size, chunk)
	if err != nil {
		return 0, h, err
	}
	if offset == 0 {
		offset = bitmap.BeforeSuperOffset(size, c, bbl)
	}
	h = bitmap.Header{
		Magic:       bitmap.Magic,
		Version:     bitmap.Version,
		UUID:        sb.SetUUID,
		ChunkSize:   uint32(c),
		DaemonSleep: DefaultBitmapDelay,
		SyncSize:    size,
	}
	return int32(offset), h, nil
}
