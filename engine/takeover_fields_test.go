package engine

import (
	"testing"

	"mdtool/engine/layout"
)

// TestTakeoverRAID0DataSize: raid0_takeover_raid45 (Linux 6.1) sets every
// member's rdev->sectors to the component size, so the raid0's
// superblocks carry data_size = the component size, not the room the
// member has (mdadm -E: Avail Dev Size 37888 with 64 sectors unused after,
// in the grow-levels sequence).
func TestTakeoverRAID0DataSize(t *testing.T) {
	mems := create(t, spec{level: "raid5", layout: "parity-last", n: 4, chunkKiB: 64, devMiB: []int{4}})
	a := open(t, mems, recoverOptions())
	defer func() { a.Close() }()
	full := readSB(t, mems[0]).DataSize
	comp := a.geo.DevSectors(0) - 128
	if _, err := a.GrowSize(comp, true); err != nil {
		t.Fatal(err)
	}
	if err := a.FailDevice(3); err != nil {
		t.Fatal(err)
	}
	if err := a.RemoveDevice(3); err != nil {
		t.Fatal(err)
	}
	if err := a.ChangeLevel(layout.RAID0); err != nil {
		t.Fatal(err)
	}
	a.Close()
	for i := 0; i < 3; i++ {
		sb := readSB(t, mems[i])
		if sb.Level != 0 || sb.DataSize != comp || sb.Size != comp {
			t.Errorf("member %d: level %d data_size %d size %d, want 0 %d %d (data_size was %d)", i, sb.Level, sb.DataSize, sb.Size, comp, comp, full)
		}
	}
	a = open(t, mems[:3], recoverOptions())
	if a.level != layout.RAID0 || a.Size() != int64(3*comp)<<9 {
		t.Errorf("reopened: %v of %d bytes, want raid0 of %d", a.level, a.Size(), int64(3*comp)<<9)
	}
}

// TestAddBBLogOffset: a device added to a raid5 that was a raid0 gets its
// bad-block log where mdadm 4.2's write_init_super1 puts it for the
// component size the copied superblock now has (8 sectors of bitmap room
// from choose_bm_space, then the log: offset 16), not the offset 8 of
// the raid0 members (created with component size 0).
func TestAddBBLogOffset(t *testing.T) {
	s := spec{level: "raid0", n: 3, chunkKiB: 64, devMiB: []int{4}}
	mems := create(t, s)
	if sb := readSB(t, mems[0]); sb.BBLogOffset != 8 || sb.BBLogSize != 8 {
		t.Fatalf("raid0 member: bad-block log at %d size %d, want 8 8", sb.BBLogOffset, sb.BBLogSize)
	}
	a := open(t, mems, recoverOptions())
	defer a.Close()
	if err := a.ChangeLevel(layout.RAID5); err != nil {
		t.Fatal(err)
	}
	d := NewMemDevice(s.devSize(0))
	if _, err := a.AddDevice(d, AddOptions{Replacement: -1}); err != nil {
		t.Fatal(err)
	}
	waitSync(t, a)
	sb := readSB(t, d)
	if sb.BBLogOffset != 16 || sb.BBLogSize != 8 {
		t.Errorf("added device: bad-block log at %d size %d, want 16 8", sb.BBLogOffset, sb.BBLogSize)
	}
	if sb0 := readSB(t, mems[0]); sb0.BBLogOffset != 8 {
		t.Errorf("member 0's bad-block log moved to %d", sb0.BBLogOffset)
	}
}
