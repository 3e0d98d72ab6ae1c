package plan

import (
	"errors"
	"testing"

	"mdtool/bitmap"
	"mdtool/superblock"
)

// TestGrowBitmap090 checks add_internal_bitmap0's --grow bitmap
// (tests/05r1-add-internalbitmap: -Gb internal --bitmap-chunk=4 on a 0.90
// raid1 of 20000 KiB members): 4 KiB after the superblock, the chunk given
// or 64 MiB, the uuid in 0.90's word order, and a chunk too small for the
// 60 KiB room refused.
func TestGrowBitmap090(t *testing.T) {
	sb := &superblock.SuperblockV090{Level: 1, RaidDisks: 2, Size: 19904,
		SetUUID0: 0x01020304, SetUUID1: 0x05060708, SetUUID2: 0x090a0b0c, SetUUID3: 0x0d0e0f10}
	view := sb.V1View(20000 << 10)
	for _, c := range []struct {
		chunk, want uint64
	}{{4 << 10, 4 << 10}, {0, 64 << 20}} {
		off, h, err := GrowBitmap090(sb, view, c.chunk)
		if err != nil {
			t.Fatal(err)
		}
		if off != 8 || uint64(h.ChunkSize) != c.want || h.SyncSize != 19904*2 || h.UUID != sb.BitmapUUID090() ||
			h.DaemonSleep != DefaultBitmapDelay || h.Magic != bitmap.Magic || h.Events != 0 {
			t.Errorf("chunk %d: offset %d, header %+v", c.chunk, off, h)
		}
	}
	// 2 TiB of component in 60 KiB of bits needs chunks of at least 8 MiB.
	big := &superblock.SuperblockV090{Level: 5, RaidDisks: 3, Size: 1 << 31}
	if _, _, err := GrowBitmap090(big, big.V1View(1<<42), 4<<10); !errors.As(err, new(*bitmap.ChunkTooSmallError)) {
		t.Errorf("4 KiB chunk over 2 TiB: %v", err)
	}
	r0 := &superblock.SuperblockV090{Level: 0, RaidDisks: 2, Size: 19904}
	if _, _, err := GrowBitmap090(r0, r0.V1View(20000<<10), 0); !errors.Is(err, ErrBitmapLevel) {
		t.Errorf("raid0: %v", err)
	}
}
