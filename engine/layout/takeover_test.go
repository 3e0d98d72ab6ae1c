package layout

import "testing"

// TestTakeoverLayouts: the takeovers rest on md's layouts agreeing.
// raid5_compute_sector places data and P of a raid6 with a "-6" layout
// (and parity-last) over n+1 devices exactly where the raid5 layout puts
// them over n, Q on the last device (raid6_takeover, and back by
// raid5_takeover_raid6); a raid5 parity-last over n+1 devices is a
// raid0 of n (raid45_takeover_raid0, raid0_takeover_raid45); a 2-device
// left-symmetric raid5 is a mirror (raid5_takeover_raid1).
func TestTakeoverLayouts(t *testing.T) {
	const chunk, comp = 16, 16 * 40
	mk := func(level Level, l, n int) *Striped {
		g, err := NewStriped(Params{Level: level, Layout: l, ChunkSectors: chunk, RaidDisks: n, ComponentSectors: comp})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	pairs := [][2]int{{LeftAsymmetric, LeftAsymmetric6}, {RightAsymmetric, RightAsymmetric6}, {LeftSymmetric, LeftSymmetric6},
		{RightSymmetric, RightSymmetric6}, {ParityFirst, ParityFirst6}, {ParityLast, ParityLast}}
	for _, p := range pairs {
		for n := 3; n <= 7; n++ {
			r5, r6 := mk(RAID5, p[0], n), mk(RAID6, p[1], n+1)
			if r5.ArraySectors() != r6.ArraySectors() {
				t.Fatalf("layouts %d/%d n=%d: sizes %d, %d", p[0], p[1], n, r5.ArraySectors(), r6.ArraySectors())
			}
			for s := uint64(0); s < r5.ArraySectors(); s += chunk / 2 {
				a, b := r5.Locate(s), r6.Locate(s)
				if a.Role != b.Role || a.Sector != b.Sector || a.P != b.P || b.Q != n {
					t.Fatalf("layouts %d/%d n=%d sector %d: raid5 %+v, raid6 %+v", p[0], p[1], n, s, a, b)
				}
			}
		}
	}
	for n := 2; n <= 6; n++ {
		r0, err := New(Params{Level: RAID0, Layout: -1, ChunkSectors: chunk, RaidDisks: n, DevSectors: repeat(comp, n)})
		if err != nil {
			t.Fatal(err)
		}
		r5 := mk(RAID5, ParityLast, n+1)
		if r0.ArraySectors() != r5.ArraySectors() {
			t.Fatalf("raid0 %d: sizes %d, %d", n, r0.ArraySectors(), r5.ArraySectors())
		}
		var locs []Loc
		for s := uint64(0); s < r0.ArraySectors(); s += chunk / 2 {
			locs, _ = r0.Map(s, locs)
			if a := r5.Locate(s); a.Role != locs[0].Role || a.Sector != locs[0].Sector || a.P != n {
				t.Fatalf("raid0 %d sector %d: %+v, raid5 parity-last %+v", n, s, locs[0], a)
			}
		}
	}
	m := mk(RAID5, LeftSymmetric, 2)
	for s := uint64(0); s < m.ArraySectors(); s += chunk / 2 {
		if a := m.Locate(s); a.Sector != s || a.Role+a.P != 1 {
			t.Fatalf("2-device raid5 sector %d: %+v", s, a)
		}
	}
}

func repeat(v uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = v
	}
	return out
}
