package superblock

import (
	"reflect"
	"testing"
)

func TestActiveRole(t *testing.T) {
	for _, c := range []struct {
		r    uint16
		want bool
	}{{0, true}, {1, true}, {0xfeff, true}, {RoleMax, false}, {RoleJournal, false}, {RoleFaulty, false}, {RoleSpare, false}} {
		if got := ActiveRole(c.r); got != c.want {
			t.Errorf("ActiveRole(%#x) = %v", c.r, got)
		}
	}
}

func TestRoles(t *testing.T) {
	sb := mkSB(2)
	sb.RaidDisks = 3
	// dev 0 active slot 0, dev 1 slot 1, dev 2 replacing slot 1, dev 3 faulty,
	// dev 4 journal, dev 5 reserved value.
	sb.DevRoles[2], sb.DevRoles[3], sb.DevRoles[4], sb.DevRoles[5] = 1, RoleFaulty, RoleJournal, 0xff00
	if got := sb.SlotCounts(sb.StateSlots()); !reflect.DeepEqual(got, []int{1, 2, 0}) {
		t.Errorf("SlotCounts = %v", got)
	}
	if got := sb.SlotCount(1); got != 2 {
		t.Errorf("SlotCount(1) = %d", got)
	}
	if got := sb.SlotCount(0xfffe); got != 1 {
		t.Errorf("SlotCount(0xfffe) = %d", got)
	}
	if got := sb.SlotCount(1 << 16); got != 0 {
		t.Errorf("SlotCount(1<<16) = %d", got)
	}
	want := RoleCounts{Active: 3, Faulty: 1, Journal: 1, Spare: 122, Other: 1}
	if got := sb.CountRoles(); got != want {
		t.Errorf("CountRoles = %+v, want %+v", got, want)
	}
	for _, c := range []struct {
		dev  uint32
		want uint16
	}{{0, 0}, {2, 1}, {3, RoleFaulty}, {4, RoleJournal}, {127, RoleSpare}, {128, RoleSpare}, {1 << 31, RoleSpare}} {
		sb.DevNumber = c.dev
		if got := sb.Role(); got != c.want {
			t.Errorf("Role() of dev %d = %#x, want %#x", c.dev, got, c.want)
		}
	}
	// Array State during a shrinking reshape covers the removed slots too.
	sb.DeltaDisks = -2
	if got := sb.StateSlots(); got != 3 {
		t.Errorf("StateSlots without reshape = %d", got)
	}
	sb.FeatureMap = FeatureReshapeActive
	if got := sb.StateSlots(); got != 5 {
		t.Errorf("StateSlots shrinking by 2 = %d", got)
	}
	sb.DeltaDisks = 1
	if got := sb.StateSlots(); got != 3 {
		t.Errorf("StateSlots growing = %d", got)
	}
	if got := len(sb.SlotCounts(1 << 40)); got != 1<<16 {
		t.Errorf("SlotCounts is not clamped: %d", got)
	}
}
