package superblock

import (
	"bytes"
	"os"
	"testing"
)

// Sync090 re-encodes the kernel's own 0.90 superblock (Linux 6.1's
// super_90_sync after mdadm --create and --stop of a 2-disk raid1)
// byte for byte from the state it describes.
func TestSync090MatchesKernel(t *testing.T) {
	raw, err := os.ReadFile("testdata/kernel-090-raid1.sb")
	if err != nil {
		t.Fatal(err)
	}
	sb, err := Parse090(raw)
	if err != nil {
		t.Fatal(err)
	}
	var members []Member090
	for i := 0; i < int(sb.RaidDisks); i++ {
		d := sb.Disks[i]
		members = append(members, Member090{Major: d.Major, Minor: d.Minor, Role: int(d.RaidDisk), InSync: true})
	}
	for self := range members {
		got := Sync090(sb, members, self, sb.Events(), sb.UTime, sb.Size, true, MaxSector, false)
		if self == int(sb.ThisDisk.Number) {
			if b := got.Marshal(); !bytes.Equal(b, raw) {
				for i := range b {
					if b[i] != raw[i] {
						t.Fatalf("member %d: first difference at byte %#x: %#x, kernel %#x", self, i, b[i], raw[i])
					}
				}
			}
		}
		if got.ThisDisk.Number != uint32(self) || got.ThisDisk.State != Disk090Active|Disk090Sync {
			t.Errorf("member %d: this_disk %+v", self, got.ThisDisk)
		}
		if _, err := Parse090(got.Marshal()); err != nil {
			t.Errorf("member %d: %v", self, err)
		}
	}
	// The v1 view: data before the superblock, roles from the table.
	v := sb.V1View(uint64(41943040))
	if v.DevNumber != 0 || v.DevRoles[0] != 0 || v.DevRoles[1] != 1 || v.DevRoles[2] != RoleSpare ||
		v.ResyncOffset != MaxSector || v.Size != uint64(sb.Size)*2 || v.SuperOffset != Offset090(41943040)/512 {
		t.Errorf("V1View: %+v", v)
	}
}

// A missing slot becomes removed+faulty, a spare and a faulty member take
// numbers from raid_disks up, and the counts follow (super_90_sync).
func TestSync090Degraded(t *testing.T) {
	base := New090(5, 1024, 3, 0, [4]uint32{1, 2, 3, 4}, 100)
	ms := []Member090{
		{Role: 0, InSync: true},
		{Role: -1},
		{Role: 2, Faulty: true},
		{Role: 1},
	}
	sb := Sync090(base, ms, 1, 7, 200, 1024, false, 0, false)
	want := map[int]Disk090{
		0: {Number: 0, RaidDisk: 0, State: Disk090Active | Disk090Sync},
		1: {Number: 1, RaidDisk: 1, State: Disk090Active},
		2: {Number: 2, RaidDisk: 2, State: Disk090Removed | Disk090Faulty},
		3: {Number: 3, RaidDisk: 3, State: 0},
		4: {Number: 4, RaidDisk: 4, State: Disk090Faulty},
	}
	for i, w := range want {
		if sb.Disks[i] != w {
			t.Errorf("disk %d: %+v, want %+v", i, sb.Disks[i], w)
		}
	}
	if sb.ThisDisk != want[3] {
		t.Errorf("this_disk %+v", sb.ThisDisk)
	}
	if sb.NrDisks != 4 || sb.ActiveDisks != 2 || sb.WorkingDisks != 3 || sb.FailedDisks != 1 || sb.SpareDisks != 1 {
		t.Errorf("counts nr %d active %d working %d failed %d spare %d", sb.NrDisks, sb.ActiveDisks, sb.WorkingDisks, sb.FailedDisks, sb.SpareDisks)
	}
	if sb.State&SB090Clean != 0 || sb.RecoveryCP != 0 || sb.Events() != 7 {
		t.Errorf("state %#x recovery_cp %d events %d", sb.State, sb.RecoveryCP, sb.Events())
	}
	if c := Checksum090(sb.Marshal(), false); c != sb.Checksum {
		t.Errorf("checksum %x, computed %x", sb.Checksum, c)
	}
}
