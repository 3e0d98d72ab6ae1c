package engine

import (
	"context"
	"errors"
	"testing"

	"mdtool/engine/layout"
	"mdtool/superblock"
)

// TestTakeover changes levels as md's takeovers do and checks that the
// data written before reads back the same, online and after a reopen
// from the members, that a spare recovers the role the new level adds
// (check: no mismatch), and the superblocks' new level, layout, chunk
// and raid_disks.
func TestTakeover(t *testing.T) {
	type step struct {
		level     layout.Level
		layout    int
		chunk     uint32 // sectors
		n         int
		degraded  int  // right after the change
		addSpare  bool // then add a spare and recover
		dropRole  int  // before the change: fail and remove the member in this role (-1: none)
		spareLeft bool // the change leaves a spare behind
	}
	for _, c := range []struct {
		name  string
		spec  spec
		steps []step
	}{
		{"raid1-raid5", spec{level: "raid1", n: 2, devMiB: []int{4}},
			[]step{{level: layout.RAID5, layout: layout.LeftSymmetric, chunk: 128, n: 2, dropRole: -1}}},
		{"raid1-raid5-raid1", spec{level: "raid1", n: 2, devMiB: []int{4}},
			[]step{{level: layout.RAID5, layout: layout.LeftSymmetric, chunk: 128, n: 2, dropRole: -1},
				{level: layout.RAID1, layout: 0, chunk: 0, n: 2, dropRole: -1}}},
		{"raid5ra-raid1-degraded", spec{level: "raid5", layout: "ra", n: 2, chunkKiB: 512, devMiB: []int{4}},
			[]step{{level: layout.RAID1, layout: 0, chunk: 0, n: 2, degraded: 1, dropRole: 1}}},
		{"raid0-raid5-raid0", spec{level: "raid0", n: 3, chunkKiB: 64, devMiB: []int{4}},
			[]step{{level: layout.RAID5, layout: layout.ParityLast, chunk: 128, n: 4, degraded: 1, addSpare: true, dropRole: -1},
				{level: layout.RAID0, layout: 0, chunk: 128, n: 3, dropRole: 3}}},
		{"raid5-raid6-raid5", spec{level: "raid5", n: 3, chunkKiB: 64, devMiB: []int{4}},
			[]step{{level: layout.RAID6, layout: layout.LeftSymmetric6, chunk: 128, n: 4, degraded: 1, addSpare: true, dropRole: -1},
				{level: layout.RAID5, layout: layout.LeftSymmetric, chunk: 128, n: 3, dropRole: -1, spareLeft: true}}},
		{"raid5pl-raid6-raid5", spec{level: "raid5", layout: "parity-last", n: 4, chunkKiB: 32, devMiB: []int{4}},
			[]step{{level: layout.RAID6, layout: layout.ParityLast, chunk: 64, n: 5, degraded: 1, addSpare: true, dropRole: -1},
				{level: layout.RAID5, layout: layout.ParityLast, chunk: 64, n: 4, dropRole: -1, spareLeft: true}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			mems := create(t, c.spec)
			a := open(t, mems, recoverOptions())
			data := make([]byte, a.Size())
			fillPattern(newRand(5), data)
			m := &model{b: data}
			mustWrite(t, a, m, data, 0)
			for _, s := range c.steps {
				if s.dropRole >= 0 {
					idx := -1
					for _, mi := range a.Members() {
						if mi.Role == s.dropRole && mi.Device >= 0 {
							idx = mi.Device
						}
					}
					if err := a.FailDevice(idx); err != nil {
						t.Fatalf("fail role %d: %v", s.dropRole, err)
					}
					if err := a.RemoveDevice(idx); err != nil {
						t.Fatalf("remove role %d: %v", s.dropRole, err)
					}
				}
				ev := a.Events()
				if err := a.ChangeLevel(s.level); err != nil {
					t.Fatalf("to %v: %v", s.level, err)
				}
				if a.Degraded() != s.degraded {
					t.Errorf("to %v: degraded %d, want %d", s.level, a.Degraded(), s.degraded)
				}
				if a.Events() != ev+1 {
					t.Errorf("to %v: events %d -> %d, md's level_store writes once", s.level, ev, a.Events())
				}
				checkContent(t, a, m)
				workload(t, a, m, uint64(s.level)+11, 40)
				checkContent(t, a, m)
				if s.addSpare {
					mems = append(mems, NewMemDevice(c.spec.devSize(0)))
					if _, err := a.AddDevice(mems[len(mems)-1], AddOptions{Replacement: -1}); err != nil {
						t.Fatal(err)
					}
					waitSync(t, a)
					if a.Degraded() != 0 {
						t.Fatalf("to %v: still degraded %d after the recovery", s.level, a.Degraded())
					}
				}
				if s.level != layout.RAID0 && a.Degraded() == 0 {
					if mm, err := a.Check(context.Background(), false); err != nil || mm != 0 {
						t.Errorf("to %v: check: %d mismatches, %v", s.level, mm, err)
					}
				}
				spares := 0
				for _, mi := range a.Members() {
					if mi.Role < 0 && mi.State == Spare {
						spares++
					}
				}
				if (spares > 0) != s.spareLeft {
					t.Errorf("to %v: %d spares, want any: %v", s.level, spares, s.spareLeft)
				}
				if err := a.Close(); err != nil {
					t.Fatal(err)
				}
				sb := readSB(t, mems[0])
				if sb.Level != int32(s.level) || int(sb.Layout) != s.layout || sb.ChunkSize != s.chunk || sb.RaidDisks != uint32(s.n) ||
					sb.NewLevel != 0 || sb.FeatureMap&superblock.FeatureRAID0Layout != 0 {
					t.Errorf("to %v: superblock level %d layout %d chunk %d raid_disks %d new_level %d features %#x",
						s.level, sb.Level, sb.Layout, sb.ChunkSize, sb.RaidDisks, sb.NewLevel, sb.FeatureMap)
				}
				a = open(t, mems, recoverOptions(), droppedIndexes(mems)...)
				if a.level != s.level || a.Degraded() != 0 && !s.addSpare && s.degraded == 0 {
					t.Errorf("reopened as %v, degraded %d", a.level, a.Degraded())
				}
				checkContent(t, a, m)
			}
			a.Close()
		})
	}
}

// droppedIndexes are the members whose superblock no longer belongs to
// the array's current state (removed: not given to Open again).
func droppedIndexes(mems []*MemDevice) []int {
	var out []int
	newest := uint64(0)
	for _, d := range mems {
		if ls, err := loadSuper(d.Reopen(), -1); err == nil {
			newest = max(newest, ls.sb.Events)
		}
	}
	for i, d := range mems {
		if ls, err := loadSuper(d.Reopen(), -1); err != nil || ls.sb.Events+1 < newest {
			out = append(out, i)
		}
	}
	return out
}

// TestTakeoverRefused: the changes md's takeovers refuse change nothing.
func TestTakeoverRefused(t *testing.T) {
	for _, c := range []struct {
		spec  spec
		level layout.Level
	}{
		{spec{level: "raid1", n: 3, devMiB: []int{4}}, layout.RAID5},                                      // raid5_takeover_raid1: 2 devices only
		{spec{level: "raid5", n: 3, chunkKiB: 64, devMiB: []int{4}}, layout.RAID0},                        // not parity-last
		{spec{level: "raid5", layout: "parity-last", n: 3, chunkKiB: 64, devMiB: []int{4}}, layout.RAID0}, // parity not missing
		{spec{level: "raid6", n: 4, chunkKiB: 64, devMiB: []int{4}}, layout.RAID5},                        // not a -6 layout
		{spec{level: "raid0", n: 2, chunkKiB: 64, devMiB: []int{4, 5}}, layout.RAID5},                     // two zones
		{spec{level: "raid10", n: 4, chunkKiB: 64, devMiB: []int{4}}, layout.RAID5},
	} {
		t.Run(c.spec.String(), func(t *testing.T) {
			mems := create(t, c.spec)
			a := open(t, mems, recoverOptions())
			defer a.Close()
			ev := a.Events()
			err := a.ChangeLevel(c.level)
			if !errors.Is(err, ErrTakeover) {
				t.Fatalf("ChangeLevel to %v: %v, want ErrTakeover", c.level, err)
			}
			if a.Events() != ev || a.level == c.level {
				t.Errorf("refused change left events %d -> %d, level %v", ev, a.Events(), a.level)
			}
		})
	}
}
