package plan

import (
	"errors"
	"testing"

	"mdtool/bitmap"
	"mdtool/superblock"
)

// TestGrowBitmap checks add_internal_bitmap1's --grow placement and chunk
// against what mdadm 4.2 --grow --bitmap=internal did in the VM (Linux
// 6.1) on 64 MiB members: the offset examine showed afterwards, the
// chunk and sync size of -X.
func TestGrowBitmap(t *testing.T) {
	r1 := &superblock.Superblock{Level: 1, RaidDisks: 2, Size: 129024, DataOffset: 2048, DataSize: 129024,
		SuperOffset: 8, BBLogOffset: 16, BBLogSize: 8}
	r5 := &superblock.Superblock{Level: 5, RaidDisks: 3, Size: 130048, DataOffset: 0, DataSize: 131040,
		SuperOffset: 131056, BBLogOffset: -8, BBLogSize: 8}
	r10 := &superblock.Superblock{Level: 10, RaidDisks: 4, Layout: 0x102, Size: 126976, DataOffset: 4096,
		DataSize: 126976, SuperOffset: 0, BBLogOffset: 16, BBLogSize: 8}
	for _, c := range []struct {
		name     string
		sb       *superblock.Superblock
		chunk    uint64
		offset   int32
		wantCh   uint32
		syncSize uint64
	}{
		{"raid1-1.2", r1, 0, 8, 64 << 20, 64512 * 2},
		{"raid1-1.2-128K", r1, 128 << 10, 8, 128 << 10, 64512 * 2},
		{"raid5-1.0", r5, 0, -16, 64 << 20, 65024 * 2},
		{"raid5-1.0-128K", r5, 128 << 10, -16, 128 << 10, 65024 * 2},
		{"raid5-1.0-4K", r5, 4 << 10, -16, 4 << 10, 65024 * 2},
		{"raid10-1.1", r10, 0, 8, 64 << 20, 126976 * 2},
	} {
		off, h, err := GrowBitmap(c.sb, c.chunk)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if off != c.offset || h.ChunkSize != c.wantCh || h.SyncSize != c.syncSize || h.Events != 0 ||
			h.DaemonSleep != 5 || h.Magic != bitmap.Magic || h.Version != bitmap.Version {
			t.Errorf("%s: offset %d, header %+v; want offset %d, chunk %d, sync size %d", c.name, off, h, c.offset, c.wantCh, c.syncSize)
		}
	}
	// 1.2 with the 4 KiB room of a small member: a 512-byte chunk
	// cannot cover 63 MiB in 30720 bits.
	if _, _, err := GrowBitmap(r1, 512); !errors.As(err, new(*bitmap.ChunkTooSmallError)) {
		t.Errorf("chunk 512 on a 4 KiB room: %v", err)
	}
	if _, _, err := GrowBitmap(&superblock.Superblock{Level: 0, SuperOffset: 8, DataOffset: 2048}, 0); !errors.Is(err, ErrBitmapLevel) {
		t.Errorf("raid0: %v", err)
	}
}
