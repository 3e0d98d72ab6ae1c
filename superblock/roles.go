package superblock

// ActiveRole reports whether a dev_roles value is an active slot number,
// i.e. below RoleMax. This is the kernel's test for "not a spare" when it
// loads a member (super_1_load); RoleSpare, RoleFaulty and RoleJournal are
// not active.
func ActiveRole(role uint16) bool { return role < RoleMax }

// Role returns this device's own role, dev_roles[dev_number], or RoleSpare
// when dev_number is outside the table (as both mdadm's role_from_sb and
// the kernel's super_1_validate treat it).
func (sb *Superblock) Role() uint16 {
	if uint64(sb.DevNumber) < uint64(len(sb.DevRoles)) {
		return sb.DevRoles[sb.DevNumber]
	}
	return RoleSpare
}

// RoleCounts tallies the dev_roles table.
type RoleCounts struct {
	Active  int // entries below RoleMax
	Faulty  int // RoleFaulty entries
	Journal int // RoleJournal entries
	Spare   int // RoleSpare entries (unused table entries are RoleSpare too)
	Other   int // RoleMax..RoleJournal-1: reserved values
}

// CountRoles tallies the roles in sb.DevRoles.
func (sb *Superblock) CountRoles() RoleCounts {
	var c RoleCounts
	for _, r := range sb.DevRoles {
		switch {
		case ActiveRole(r):
			c.Active++
		case r == RoleSpare:
			c.Spare++
		case r == RoleFaulty:
			c.Faulty++
		case r == RoleJournal:
			c.Journal++
		default:
			c.Other++
		}
	}
	return c
}

// StateSlots returns how many slots mdadm --examine's "Array State" line
// covers: raid_disks, plus -delta_disks while a reshape that removes
// devices is active (FeatureReshapeActive with a negative delta_disks).
func (sb *Superblock) StateSlots() uint64 {
	n := uint64(sb.RaidDisks)
	if sb.FeatureMap&FeatureReshapeActive != 0 && sb.DeltaDisks < 0 {
		n += uint64(-int64(sb.DeltaDisks))
	}
	return n
}

// SlotCount returns how many dev_roles entries hold slot d. mdadm shows a
// slot as 'A' for 1, 'R' for 2 on levels above 0 (a replacement is under
// way), '.' for 0 and '?' otherwise; that text is the caller's.
func (sb *Superblock) SlotCount(d uint64) int {
	if d > 0xffff {
		return 0
	}
	n := 0
	for _, r := range sb.DevRoles {
		if uint64(r) == d {
			n++
		}
	}
	return n
}

// SlotCounts returns SlotCount(d) for every d < n, with n clamped to
// 1<<16 (no 16-bit role can equal a larger slot, so the rest are zero).
// Use n = sb.StateSlots() for mdadm's Array State.
func (sb *Superblock) SlotCounts(n uint64) []int {
	if n > 1<<16 {
		n = 1 << 16
	}
	counts := make([]int, n)
	for _, r := range sb.DevRoles {
		if uint64(r) < n {
			counts[r]++
		}
	}
	return counts
}
