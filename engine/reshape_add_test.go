package engine

import (
	"context"
	"errors"
	"testing"

	"mdtool/superblock"
)

// TestReshapeAddSpare: a device added while a reshape runs (md 6.1 +
// mdadm 4.2) is a spare that records the reshape as the members do
// (reshape_position, delta_disks, new_offset) and takes no role while the
// reshape runs, even with a role missing; when the reshape ends its data
// offset has moved with the others' and, the array being degraded, it
// takes the missing role by a recovery that follows the reshape; not
// degraded, it stays a spare.
func TestReshapeAddSpare(t *testing.T) {
	for _, degraded := range []bool{true, false} {
		name := "degraded"
		if !degraded {
			name = "clean"
		}
		t.Run(name, func(t *testing.T) {
			mems := create(t, spec{level: "raid5", n: 4, chunkKiB: 64, devMiB: []int{8}})
			a := open(t, mems, testOptions())
			data := make([]byte, a.Size())
			fillPattern(newRand(31), data)
			m := &model{b: data}
			mustWrite(t, a, m, data, 0)
			spare := NewMemDevice(8 << 20)
			if _, err := a.AddDevice(spare, AddOptions{Replacement: -1}); err != nil {
				t.Fatal(err)
			}
			// frozen: the reshape moves only when the test says so
			if err := a.StartAction(ActionFrozen); err != nil {
				t.Fatal(err)
			}
			if err := a.StartReshape(ReshapeStart{RaidDisks: 5}); err != nil {
				t.Fatal(err)
			}
			ra := &reshapeAction{a: a}
			for i := 0; i < 4; i++ {
				if _, err := ra.unit(0, 1<<20); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.recordReshape(); err != nil {
				t.Fatal(err)
			}
			if degraded {
				if err := a.FailDevice(1); err != nil {
					t.Fatal(err)
				}
			}
			added := NewMemDevice(8 << 20)
			idx, err := a.AddDevice(added, AddOptions{Replacement: -1})
			if err != nil {
				t.Fatalf("add during the reshape: %v", err)
			}
			ref, sb := readSB(t, mems[0]), readSB(t, added)
			if sb.FeatureMap&reshapeBits != ref.FeatureMap&reshapeBits || sb.ReshapePosition != ref.ReshapePosition ||
				sb.ReshapePosition == 0 || sb.DeltaDisks != 1 || sb.NewOffset != ref.NewOffset || sb.NewOffset == 0 ||
				sb.DataOffset != ref.DataOffset || sb.RaidDisks != 5 || sb.Role() != superblock.RoleSpare || sb.Events != ref.Events {
				t.Fatalf("the added device's superblock: features %#x pos %d delta %d new_offset %d data_offset %d raid_disks %d role %#x events %d;"+
					" member 0: features %#x pos %d new_offset %d data_offset %d events %d",
					sb.FeatureMap, sb.ReshapePosition, sb.DeltaDisks, sb.NewOffset, sb.DataOffset, sb.RaidDisks, sb.Role(), sb.Events,
					ref.FeatureMap, ref.ReshapePosition, ref.NewOffset, ref.DataOffset, ref.Events)
			}
			if mi := memberInfo(a, idx); mi.Role != -1 || mi.State != Spare {
				t.Fatalf("added during the reshape: role %d state %v, want a spare", mi.Role, mi.State)
			}
			if got := a.Degraded(); got != map[bool]int{true: 1, false: 0}[degraded] {
				t.Fatalf("degraded %d", got)
			}
			mustWrite(t, a, m, data[:1<<20], 3<<20) // both sides of the reshape point
			// thawed: the reshape goes on to its end, then (degraded)
			// the spare's recovery, as md_check_recovery chains them
			if err := a.StartAction(ActionIdle); err != nil {
				t.Fatal(err)
			}
			a.checkRecovery()
			waitSync(t, a)
			if ok, _ := a.Reshaping(); ok {
				t.Fatal("still reshaping")
			}
			mi := memberInfo(a, idx)
			if degraded && (mi.Role != 1 || mi.State != InSync || a.Degraded() != 0) {
				t.Fatalf("after the reshape: the added device has role %d state %v, degraded %d; want role 1 in sync", mi.Role, mi.State, a.Degraded())
			}
			if !degraded && (mi.Role != -1 || mi.State != Spare) {
				t.Fatalf("after the reshape: the added device has role %d state %v, want a spare", mi.Role, mi.State)
			}
			full := make([]byte, a.Size())
			copy(full, m.b)
			checkContent(t, a, &model{b: full})
			if mm, err := a.Check(context.Background(), false); err != nil || mm != 0 {
				t.Fatalf("check: %d mismatches, %v", mm, err)
			}
			a.Close()
			ref, sb = readSB(t, mems[0]), readSB(t, added)
			if sb.FeatureMap&reshapeBits != 0 || sb.DataOffset != ref.DataOffset || sb.DataSize != ref.DataSize || sb.RaidDisks != 5 {
				t.Fatalf("the added device at the end: features %#x data_offset %d data_size %d raid_disks %d (member 0: %d %d)",
					sb.FeatureMap, sb.DataOffset, sb.DataSize, sb.RaidDisks, ref.DataOffset, ref.DataSize)
			}
		})
	}
}

// memberInfo is the MemberInfo of device index idx.
func memberInfo(a *Array, idx int) MemberInfo {
	for _, mi := range a.Members() {
		if mi.Device == idx {
			return mi
		}
	}
	return MemberInfo{Device: idx, Role: -2}
}

// TestReshapeReAdd: a member failed and removed during a reshape is not
// re-added by the bitmap (the reshape sets no bits for what it moves);
// --add makes it a new spare.
func TestReshapeReAdd(t *testing.T) {
	mems := create(t, spec{level: "raid5", n: 4, chunkKiB: 64, devMiB: []int{8}, bitmap: true})
	a := open(t, mems, recoverOptions())
	defer a.Close()
	if _, err := a.AddDevice(NewMemDevice(8<<20), AddOptions{Replacement: -1}); err != nil {
		t.Fatal(err)
	}
	if err := a.StartReshape(ReshapeStart{RaidDisks: 5}); err != nil {
		t.Fatal(err)
	}
	ra := &reshapeAction{a: a}
	if _, err := ra.unit(0, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := a.FailDevice(1); err != nil {
		t.Fatal(err)
	}
	if err := a.RemoveDevice(1); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddDevice(mems[1].Reopen(), AddOptions{ReAdd: true, Replacement: -1}); !errors.Is(err, ErrNotReAddable) {
		t.Fatalf("re-add during the reshape: %v, want ErrNotReAddable", err)
	}
	idx, err := a.AddDevice(mems[1].Reopen(), AddOptions{Replacement: -1})
	if err != nil {
		t.Fatal(err)
	}
	if mi := memberInfo(a, idx); mi.Role != -1 || mi.State != Spare {
		t.Fatalf("added again during the reshape: role %d state %v, want a spare", mi.Role, mi.State)
	}
}
