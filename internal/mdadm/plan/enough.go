package plan

import "mdtool/superblock"

// Enough is mdadm 4.2's enough() (util.c), the one home of the rule: can
// an array of this level, raid-disk count and layout serve all its data
// with the roles marked in avail (avail[role]; roles beyond len(avail)
// count as missing)? clean says the array was shut down cleanly, so
// parity need not be rebuilt before it can be trusted:
//
//   - linear, raid0: every role;
//   - raid1, multipath: one role;
//   - raid4: all but one, or (even when not clean) all but the parity
//     role, the last one;
//   - raid5: all but one when clean, else all;
//   - raid6: all but two when clean, else all;
//   - raid10: one role of every group of near×far consecutive roles
//     (wrapping), the groups starting at multiples of the near copies
//     (md's raid10 _enough() is the same walk);
//   - any other level: false.
//
// cmd (assemble, detail) and the daemon (--add's "has failed" check) ask
// it; create's refusal of too many missing devices uses it for raid10.
func Enough(level, raidDisks int, layout uint32, clean bool, avail []bool) bool {
	has := func(role int) bool { return role >= 0 && role < len(avail) && avail[role] }
	n := 0
	for i := 0; i < raidDisks; i++ {
		if has(i) {
			n++
		}
	}
	switch level {
	case superblock.LevelRAID10:
		near := superblock.RAID10Near(layout)
		copies := near * superblock.RAID10Far(layout)
		if raidDisks <= 0 || copies <= 0 {
			return false
		}
		first := 0
		for {
			cnt := 0
			for k, this := 0, first; k < copies; k, this = k+1, (this+1)%raidDisks {
				if has(this) {
					cnt++
				}
			}
			if cnt == 0 {
				return false
			}
			first = (first + near) % raidDisks
			if first == 0 {
				return true
			}
		}
	case superblock.LevelMultipath, superblock.LevelRAID1:
		return n >= 1
	case superblock.LevelLinear, superblock.LevelRAID0:
		return n == raidDisks
	case superblock.LevelRAID4:
		if n == raidDisks-1 && !has(raidDisks-1) {
			return true // only the parity role is missing
		}
		fallthrough
	case superblock.LevelRAID5:
		if clean {
			return n >= raidDisks-1
		}
		return n >= raidDisks
	case superblock.LevelRAID6:
		if clean {
			return n >= raidDisks-2
		}
		return n >= raidDisks
	}
	return false
}
