package plan

import "testing"

// TestEnough checks Enough against md's and mdadm's rules, level by level,
// with the raid10 layouts written as mdadm's layout words.
func TestEnough(t *testing.T) {
	const (
		n2   = 0x102   // near=2
		n3   = 0x103   // near=3
		f2   = 0x201   // far=2
		o2   = 0x10201 // offset=2
		n2f2 = 0x202   // near=2, far=2
	)
	for _, tc := range []struct {
		level, disks int
		layout       uint32
		clean        bool
		avail        string // '1' = role present
		want         bool
	}{
		{LevelLinear, 2, 0, true, "11", true},
		{LevelLinear, 2, 0, true, "10", false},
		{LevelRAID0, 3, 0, true, "111", true},
		{LevelRAID0, 3, 0, true, "110", false},
		{LevelRAID1, 3, 0, false, "001", true},
		{LevelRAID1, 3, 0, true, "000", false},
		{LevelMultipath, 2, 0, false, "01", true},
		// raid4: one missing when clean; the parity role (last) missing
		// even when dirty; a data role missing when dirty is not enough.
		{LevelRAID4, 4, 0, true, "1101", true},
		{LevelRAID4, 4, 0, false, "1110", true},
		{LevelRAID4, 4, 0, false, "1101", false},
		{LevelRAID4, 4, 0, true, "1100", false},
		{LevelRAID5, 4, 2, true, "1011", true},
		{LevelRAID5, 4, 2, false, "1011", false},
		{LevelRAID5, 4, 2, false, "1111", true},
		{LevelRAID5, 4, 2, true, "1001", false},
		{LevelRAID6, 5, 2, true, "10011", true},
		{LevelRAID6, 5, 2, true, "10001", false},
		{LevelRAID6, 5, 2, false, "11110", false},
		{LevelRAID6, 5, 2, false, "11111", true},
		// raid10 near=2 on 4: mirror pairs (0,1) and (2,3).
		{LevelRAID10, 4, n2, true, "1010", true},
		{LevelRAID10, 4, n2, false, "0110", true},
		{LevelRAID10, 4, n2, true, "1100", false},
		{LevelRAID10, 4, n2, true, "0011", false},
		// near=2 on 3 devices: groups (0,1), (2,0), (1,2).
		{LevelRAID10, 3, n2, true, "100", false},
		{LevelRAID10, 3, n2, true, "101", true},
		{LevelRAID10, 3, n2, true, "011", true},
		// near=3 on 3: any one role holds everything.
		{LevelRAID10, 3, n3, true, "010", true},
		// far=2 and offset=2 on 4: groups (0,1), (1,2), (2,3), (3,0).
		{LevelRAID10, 4, f2, true, "1010", true},
		{LevelRAID10, 4, f2, true, "1001", false},
		{LevelRAID10, 4, o2, true, "0101", true},
		{LevelRAID10, 4, o2, true, "0110", false},
		// far=2 on 5 (odd): groups (0,1), (1,2), (2,3), (3,4), (4,0).
		{LevelRAID10, 5, f2, true, "10101", true},
		{LevelRAID10, 5, f2, true, "10010", false}, // (1,2) empty
		// near=2, far=2 on 4: groups of 4 starting at 0 and 2: one role.
		{LevelRAID10, 4, n2f2, true, "0001", true},
		{LevelRAID10, 4, n2f2, true, "0000", false},
		// avail shorter than raid-disks: the rest are missing.
		{LevelRAID1, 2, 0, true, "", false},
		{LevelRAID5, 3, 2, true, "1", false},
		{LevelRAID10, 4, n2, true, "10", false},
		// A layout without copies, and levels mdadm does not know.
		{LevelRAID10, 4, 0, true, "1111", false},
		{LevelFaulty, 1, 0, true, "1", false},
		{3, 2, 0, true, "11", false},
	} {
		avail := make([]bool, len(tc.avail))
		for i, c := range tc.avail {
			avail[i] = c == '1'
		}
		if got := Enough(tc.level, tc.disks, tc.layout, tc.clean, avail); got != tc.want {
			t.Errorf("Enough(level %d, %d disks, layout %#x, clean %v, %q) = %v, want %v",
				tc.level, tc.disks, tc.layout, tc.clean, tc.avail, got, tc.want)
		}
	}
}
