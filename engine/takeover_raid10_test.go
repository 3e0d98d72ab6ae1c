package engine

import (
	"context"
	"errors"
	"testing"

	"mdtool/engine/layout"
	"mdtool/superblock"
)

// TestTakeoverRAID10 takes a near-2 raid10 over into raid0 once one
// member of each mirror pair is failed and removed (mdadm's
// remove_disks_for_takeover), and that raid0 back into a raid10 whose
// odd roles two spares recover: the data reads back the same through
// both changes, online and after reopening from the members; the
// superblocks say what md's takeovers write (level, layout,
// raid_disks, size, each member's new role); the recovered raid10's
// check finds no mismatch.
func TestTakeoverRAID10(t *testing.T) {
	s := spec{level: "raid10", n: 4, chunkKiB: 64, devMiB: []int{4}}
	mems := create(t, s)
	a := open(t, mems, recoverOptions())
	defer func() { a.Close() }()
	data := make([]byte, a.Size())
	fillPattern(newRand(17), data)
	m := &model{b: data}
	mustWrite(t, a, m, data, 0)
	size10, dev10 := a.Size(), readSB(t, mems[0]).Size

	// roles 1 and 2 leave: the raid0 is members 0 (role 0 -> 0) and 3
	// (role 3 -> 1).
	if err := a.ChangeLevel(layout.RAID0); !errors.Is(err, ErrTakeover) {
		t.Fatalf("raid10 with its mirrors: %v, want ErrTakeover (all mirrors must be already degraded)", err)
	}
	for _, role := range []int{1, 2} {
		if err := a.FailDevice(role); err != nil {
			t.Fatal(err)
		}
		if err := a.RemoveDevice(role); err != nil {
			t.Fatal(err)
		}
	}
	ev := a.Events()
	if err := a.ChangeLevel(layout.RAID0); err != nil {
		t.Fatalf("to raid0: %v", err)
	}
	if a.Events() != ev+1 || a.Degraded() != 0 || a.Size() != size10 {
		t.Errorf("raid0: events %d -> %d, degraded %d, size %d (raid10's %d)", ev, a.Events(), a.Degraded(), a.Size(), size10)
	}
	checkContent(t, a, m)
	workload(t, a, m, 23, 40)
	checkContent(t, a, m)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	for i, want := range map[int]uint16{0: 0, 3: 1} {
		sb := readSB(t, mems[i])
		if sb.Level != 0 || sb.Layout != 0 || sb.RaidDisks != 2 || sb.ChunkSize != 128 || sb.Size != dev10 ||
			sb.FeatureMap&superblock.FeatureRAID0Layout != 0 || sb.Role() != want || sb.DataSize%128 != 0 {
			t.Errorf("raid0 member %d: level %d layout %d raid_disks %d chunk %d size %d features %#x role %d (want %d) data_size %d (create_strip_zones: a whole number of chunks)",
				i, sb.Level, sb.Layout, sb.RaidDisks, sb.ChunkSize, sb.Size, sb.FeatureMap, sb.Role(), want, sb.DataSize)
		}
	}
	r0 := []*MemDevice{mems[0], mems[3]}
	a = open(t, r0, recoverOptions())
	if a.level != layout.RAID0 {
		t.Fatalf("reopened as %v", a.level)
	}
	checkContent(t, a, m)

	ev = a.Events()
	if err := a.ChangeLevel(layout.RAID10); err != nil {
		t.Fatalf("to raid10: %v", err)
	}
	if a.Events() != ev+1 || a.Degraded() != 2 {
		t.Errorf("raid10: events %d -> %d, degraded %d, want 2", ev, a.Events(), a.Degraded())
	}
	checkContent(t, a, m)
	workload(t, a, m, 29, 40)
	spares := []*MemDevice{NewMemDevice(s.devSize(0)), NewMemDevice(s.devSize(0))}
	for i, d := range spares {
		// one batch, as the daemon adds the devices of one --add
		if _, err := a.AddDevice(d, AddOptions{Replacement: -1, DeferRecovery: i == 0}); err != nil {
			t.Fatal(err)
		}
	}
	waitSync(t, a)
	if a.Degraded() != 0 {
		t.Fatalf("raid10 still degraded %d after the recovery", a.Degraded())
	}
	checkContent(t, a, m)
	if mm, err := a.Check(context.Background(), false); err != nil || mm != 0 {
		t.Errorf("raid10 check: %d mismatches, %v", mm, err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	all := append(r0, spares...)
	roles := map[uint16]bool{}
	for i, d := range all {
		sb := readSB(t, d)
		if sb.Level != 10 || sb.Layout != 0x102 || sb.RaidDisks != 4 || sb.ChunkSize != 128 || sb.Size != dev10 {
			t.Errorf("raid10 member %d: level %d layout %#x raid_disks %d chunk %d size %d", i, sb.Level, sb.Layout, sb.RaidDisks, sb.ChunkSize, sb.Size)
		}
		if i < 2 && (sb.Role() != uint16(2*i) || sb.DataSize != dev10) {
			t.Errorf("raid0 member %d is in role %d (want %d), data_size %d (want the zone's %d)", i, sb.Role(), 2*i, sb.DataSize, dev10)
		}
		roles[sb.Role()] = true
	}
	if len(roles) != 4 || !roles[1] || !roles[3] {
		t.Errorf("roles after the recovery: %v", roles)
	}
	a = open(t, all, recoverOptions())
	if a.level != layout.RAID10 || a.Degraded() != 0 || a.Size() != size10 {
		t.Errorf("reopened as %v, degraded %d, size %d", a.level, a.Degraded(), a.Size())
	}
	checkContent(t, a, m)
}

// TestTakeoverRAID10Refused: what raid0_takeover_raid10 and
// raid10_takeover refuse changes nothing.
func TestTakeoverRAID10Refused(t *testing.T) {
	for _, c := range []struct {
		spec  spec
		level layout.Level
		drop  []int // roles failed and removed first
	}{
		{spec{level: "raid10", layout: "f2", n: 4, chunkKiB: 64, devMiB: []int{4}}, layout.RAID0, []int{1, 3}},
		{spec{level: "raid10", layout: "o2", n: 4, chunkKiB: 64, devMiB: []int{4}}, layout.RAID0, []int{1, 3}},
		{spec{level: "raid10", n: 3, chunkKiB: 64, devMiB: []int{4}}, layout.RAID0, []int{1}},          // odd disk number
		{spec{level: "raid10", n: 4, chunkKiB: 64, devMiB: []int{4}}, layout.RAID0, []int{1}},          // one pair still mirrored
		{spec{level: "raid10", layout: "n3", n: 6, chunkKiB: 64, devMiB: []int{4}}, layout.RAID0, nil}, // near=3
		{spec{level: "raid0", n: 2, chunkKiB: 64, devMiB: []int{4, 5}}, layout.RAID10, nil},            // two zones
	} {
		t.Run(c.spec.String(), func(t *testing.T) {
			mems := create(t, c.spec)
			a := open(t, mems, recoverOptions())
			defer a.Close()
			for _, r := range c.drop {
				if err := a.FailDevice(r); err != nil {
					t.Fatal(err)
				}
				if err := a.RemoveDevice(r); err != nil {
					t.Fatal(err)
				}
			}
			ev, deg := a.Events(), a.Degraded()
			if err := a.ChangeLevel(c.level); !errors.Is(err, ErrTakeover) {
				t.Fatalf("ChangeLevel to %v: %v, want ErrTakeover", c.level, err)
			}
			if a.Events() != ev || a.level == c.level || a.Degraded() != deg {
				t.Errorf("refused change left events %d -> %d, level %v, degraded %d -> %d", ev, a.Events(), a.level, deg, a.Degraded())
			}
		})
	}
}
