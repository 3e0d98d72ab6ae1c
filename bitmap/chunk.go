package bitmap

import (
	"errors"
	"fmt"
)

// ErrNoRoom is returned by [ChooseChunk] when there is no space for a
// bitmap at all (mdadm's add_internal_bitmap1 returns -ENOSPC).
var ErrNoRoom = errors.New("bitmap: no room for a bitmap")

// ErrChunkTooLarge is returned by [ChooseChunk] when the chunk needed does
// not fit the 32-bit chunksize field. (mdadm 4.2 would silently truncate
// it; this needs a device of petabytes.)
var ErrChunkTooLarge = errors.New("bitmap: chunk size does not fit in 32 bits")

// ChunkTooSmallError is returned by [ChooseChunk] when the requested chunk
// would give more bits than fit in the room (mdadm: -EINVAL, "Given bitmap
// chunk size not supported.").
type ChunkTooSmallError struct {
	Requested uint64 // bytes
	Min       uint64 // smallest chunk that fits, bytes
}

// Error names the requested and the minimum chunk size.
func (e *ChunkTooSmallError) Error() string {
	return fmt.Sprintf("bitmap: chunk size %d too small, need at least %d bytes", e.Requested, e.Min)
}

// ChooseChunk is the tail of mdadm 4.2's add_internal_bitmap1: it picks the
// bitmap chunk size (bytes) for a bitmap covering syncSize sectors.
//
// room is the space for the bitmap in sectors, after the caller subtracted
// the bad-block-log size (for a create: [ChooseSpace] of the device size;
// see md-format.md §2.2). requested is the --bitmap-chunk in bytes, 0 when
// not given. Exactly as mdadm:
//
//	if requested == 0 and room > 256: room = 256   (cap the bitmap at 128 KiB)
//	room <= 1: ErrNoRoom
//	max_bits = (room*512 - 256) * 8
//	min_chunk = 4096; bits = syncSize*512/min_chunk + 1
//	while bits > max_bits: min_chunk *= 2; bits = (bits+1)/2
//	requested == 0: max(min_chunk, 64 MiB)
//	requested < min_chunk: *ChunkTooSmallError
//
// So the default is 64 MiB up to about 64 TiB of syncSize and doubles
// beyond. requested is returned unchanged when it is large enough; mdadm's
// option parser has already insisted on a power of two.
func ChooseChunk(room int64, syncSize uint64, requested uint64) (uint64, error) {
	if requested == 0 && room > 128*2 {
		room = 128 * 2
	}
	if room <= 1 {
		return 0, ErrNoRoom
	}
	maxBits := uint64(room*512-HeaderSize) * 8
	minChunk := uint64(4096)
	bits := syncSize*512/minChunk + 1
	for bits > maxBits {
		minChunk *= 2
		bits = (bits + 1) / 2
	}
	chunk := requested
	if requested == 0 {
		chunk = minChunk
		if chunk < DefaultChunk {
			chunk = DefaultChunk
		}
	} else if requested < minChunk {
		return 0, &ChunkTooSmallError{Requested: requested, Min: minChunk}
	}
	if chunk == 0 || chunk > 1<<31 {
		return 0, ErrChunkTooLarge
	}
	return chunk, nil
}

// ChooseSpace is mdadm 4.2's choose_bm_space: the sectors a create leaves
// for the bitmap on a member of devSectors sectors (before the bad-block
// log's 8 sectors are added): 0 below 64 sectors, 8 (4 KiB) up to 8 GiB,
// 128 (64 KiB) up to 200 GiB, 256 (128 KiB) above.
func ChooseSpace(devSectors uint64) uint64 {
	switch {
	case devSectors < 64*2:
		return 0
	case devSectors-64*2 >= 200*1024*1024*2:
		return 128 * 2
	case devSectors-4*2 > 8*1024*1024*2:
		return 64 * 2
	}
	return 4 * 2
}

// BeforeSuperOffset is the bitmap_offset (sectors, negative) mdadm 4.2
// gives a 1.0 bitmap that is placed before the superblock (the "movable"
// case of add_internal_bitmap1): the bitmap starts on a 4 KiB boundary with
// room for header and bits, below the bad-block log of bblSectors:
//
//	bits = syncSize*512/chunk + 1
//	room = ceil((ceil(bits/8) + 256) / 4096) * 8
//	offset = -room - bblSectors
//
// (bits is one more than needed when chunk divides the size: mdadm's
// formula, kept.) It returns 0 for chunk 0.
func BeforeSuperOffset(syncSize, chunk uint64, bblSectors int64) int64 {
	if chunk == 0 {
		return 0
	}
	bits := syncSize*512/chunk + 1
	room := int64((bits+7)/8+HeaderSize+4095) / 4096 * 8
	return -room - bblSectors
}
