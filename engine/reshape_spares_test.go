package engine

import (
	"bytes"
	"context"
	"testing"

	"mdtool/engine/layout"
	"mdtool/superblock"
)

// TestReshapeRAID0Growth is md's raid0 growth as mdadm 4.2 drives it:
// the 3-disk raid0 taken over to a raid4 of 4 roles (parity missing), a
// spare added, a reshape to 5 roles. raid5_start_reshape puts the spare
// into the first free role, the old parity role (a data role of the new
// geometry), not in sync: its recovery_offset follows the recorded
// reshape position (member sectors of the new geometry), the new parity
// role stays missing, the array counts one missing role (raid5_calc_degraded);
// the reshape is cut and continued after a reopen; at the end the member
// is in sync, and the raid4 goes back to a raid0 of 4 with the data
// intact.
func TestReshapeRAID0Growth(t *testing.T) {
	s := spec{level: "raid0", n: 3, chunkKiB: 64, devMiB: []int{8}}
	mems := create(t, s)
	a := open(t, mems, recoverOptions())
	data := make([]byte, a.Size())
	fillPattern(newRand(21), data)
	m := &model{b: data}
	mustWrite(t, a, m, data, 0)
	if err := a.ChangeLevel(layout.RAID4); err != nil {
		t.Fatal(err)
	}
	if err := a.StartAction(ActionFrozen); err != nil { // mdadm's sysfs_freeze_array
		t.Fatal(err)
	}
	mems = append(mems, NewMemDevice(s.devSize(0)))
	spare, err := a.AddDevice(mems[3], AddOptions{Replacement: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.StartReshape(ReshapeStart{RaidDisks: 5}); err != nil {
		t.Fatalf("grow the degraded raid4: %v", err)
	}
	role := func(a *Array, dev int) MemberInfo {
		for _, mi := range a.Members() {
			if mi.Device == dev {
				return mi
			}
		}
		t.Fatalf("device %d not a member", dev)
		return MemberInfo{}
	}
	if mi := role(a, spare); mi.Role != 3 || mi.State != Recovering || mi.RecoveryOffset != 0 {
		t.Fatalf("the spare took role %d state %v recovery %d, want the old parity role 3, recovering from 0", mi.Role, mi.State, mi.RecoveryOffset)
	}
	if mi := a.Members()[4]; mi.Device != -1 {
		t.Fatalf("role 4 (the new parity) has device %d, want missing", mi.Device)
	}
	if d := a.Degraded(); d != 1 {
		t.Fatalf("degraded %d during the reshape, want 1 (raid5_calc_degraded)", d)
	}
	ra := &reshapeAction{a: a}
	for i := 0; i < 6; i++ {
		if _, err := ra.unit(0, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	workload(t, a, m, 22, 60)
	checkContent(t, a, m)
	_, pos := a.Reshaping()
	if got, want := role(a, spare).RecoveryOffset, pos/4; got != want {
		t.Errorf("live recovery offset %d, want the reshape's progress %d / 4", got, want)
	}
	if err := a.recordReshape(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	sb := readSB(t, mems[3])
	if sb.FeatureMap&superblock.FeatureRecoveryOffset == 0 || sb.FeatureMap&superblock.FeatureReshapeActive == 0 ||
		sb.ReshapePosition == 0 || sb.RecoveryOffset != sb.ReshapePosition/4 || sb.DevRoles[sb.DevNumber] != 3 {
		t.Fatalf("cut mid-way: features %#x reshape_position %d recovery_offset %d role %d, want recovery_offset = reshape_position/4, role 3",
			sb.FeatureMap, sb.ReshapePosition, sb.RecoveryOffset, sb.DevRoles[sb.DevNumber])
	}

	a = open(t, mems, recoverOptions())
	if mi := role(a, 3); mi.Role != 3 || mi.State != Recovering || mi.RecoveryOffset != sb.RecoveryOffset {
		t.Fatalf("reopened: role %d state %v recovery %d", mi.Role, mi.State, mi.RecoveryOffset)
	}
	checkContent(t, a, m)
	if err := a.Reshape(context.Background()); err != nil {
		t.Fatal(err)
	}
	if mi := role(a, 3); mi.Role != 3 || mi.State != InSync {
		t.Fatalf("after the reshape: role %d state %v, want in sync in role 3", mi.Role, mi.State)
	}
	if d := a.Degraded(); d != 1 || a.Members()[4].Device != -1 {
		t.Fatalf("after the reshape: degraded %d, role 4 device %d; want the parity role missing", d, a.Members()[4].Device)
	}
	if a.Size() != int64(len(m.b))*4/3 {
		t.Fatalf("after the reshape: size %d, want 4/3 of %d", a.Size(), len(m.b))
	}
	m.b = append(m.b, make([]byte, a.Size()-int64(len(m.b)))...) // md fills the new room with zeroes
	checkContent(t, a, m)
	if err := a.ChangeLevel(layout.RAID0); err != nil {
		t.Fatalf("back to raid0: %v", err)
	}
	workload(t, a, m, 23, 40)
	checkContent(t, a, m)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range mems {
		sb := readSB(t, mems[i])
		if sb.Level != 0 || sb.RaidDisks != 4 || sb.FeatureMap&(superblock.FeatureRecoveryOffset|reshapeBits) != 0 || sb.DevRoles[sb.DevNumber] != uint16(i) {
			t.Errorf("member %d: level %d raid_disks %d features %#x role %d", i, sb.Level, sb.RaidDisks, sb.FeatureMap, sb.DevRoles[sb.DevNumber])
		}
	}
	a = open(t, mems, recoverOptions())
	// raid0 over the members' whole data areas: beyond the raid4's
	// size, what the members held there before
	got := make([]byte, len(m.b))
	if a.Size() < int64(len(got)) {
		t.Fatalf("reopened raid0 of %d bytes, was %d", a.Size(), len(got))
	}
	if _, err := a.ReadAt(got, 0); err != nil || !bytes.Equal(got, m.b) {
		t.Fatalf("reopened raid0: data differs (%v)", err)
	}
	a.Close()
}
