package plan

import (
	"errors"
	"os"
	"testing"
	"time"

	"mdtool/superblock"
)

// A 0.90 raid1 as mdadm 4.2 creates it: the superblock at the 64 KiB-aligned
// end, the size rounded to 64 KiB, the homehost's SHA-1 in set_uuid2/3
// (checked against the superblock mdadm made in the VM for homehost mdvm),
// each member's this_disk its own table entry, not clean (resync).
func TestPlan090RAID1(t *testing.T) {
	o := base("raid1", 2, devs(40*mib, 40*mib))
	o.Metadata = "0.90"
	o.MDDevice = "/dev/md0"
	o.Homehost = "mdvm"
	o.Now = time.Unix(1700000000, 0)
	r, err := Plan(o)
	if err != nil {
		t.Fatal(err)
	}
	if r.Metadata != "0.90" || r.Minor != Minor090 || len(r.Members) != 2 {
		t.Fatalf("metadata %q minor %d members %d", r.Metadata, r.Minor, len(r.Members))
	}
	kraw, err := os.ReadFile("../../../superblock/testdata/kernel-090-raid1.sb")
	if err != nil {
		t.Fatal(err)
	}
	ksb, err := superblock.Parse090(kraw)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range r.Members {
		sb, err := superblock.Parse090(m.SuperBytes)
		if err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
		if want := int64(superblock.Offset090(40 * mib * 512)); m.SuperOffset != want || m.Writes[0].Offset != want {
			t.Errorf("member %d: superblock at %d, want %d", i, m.SuperOffset, want)
		}
		// mdadm made the fixture on 40 MiB members too.
		if sb.Size != ksb.Size || sb.Level != 1 || sb.RaidDisks != 2 || sb.MDMinor != 0 || sb.Events() != 1 {
			t.Errorf("member %d: size %d (kernel %d) level %d raid %d minor %d events %d", i, sb.Size, ksb.Size, sb.Level, sb.RaidDisks, sb.MDMinor, sb.Events())
		}
		if sb.SetUUID2 != ksb.SetUUID2 || sb.SetUUID3 != ksb.SetUUID3 {
			t.Errorf("member %d: homehost words %08x %08x, mdadm's for mdvm %08x %08x", i, sb.SetUUID2, sb.SetUUID3, ksb.SetUUID2, ksb.SetUUID3)
		}
		if sb.ThisDisk != sb.Disks[i] || sb.ThisDisk.Number != uint32(i) || sb.ThisDisk.RaidDisk != uint32(i) ||
			sb.ThisDisk.State != superblock.Disk090Active|superblock.Disk090Sync {
			t.Errorf("member %d: this_disk %+v", i, sb.ThisDisk)
		}
		if sb.State&superblock.SB090Clean != 0 || sb.NrDisks != 2 || sb.ActiveDisks != 2 || sb.WorkingDisks != 2 {
			t.Errorf("member %d: state %#x nr %d active %d working %d", i, sb.State, sb.NrDisks, sb.ActiveDisks, sb.WorkingDisks)
		}
		if m.Superblock.DataSize < m.Superblock.Size || m.Superblock.DevRoles[i] != uint16(i) {
			t.Errorf("member %d: v1 view %+v", i, m.Superblock)
		}
	}
	if r.ArraySizeKiB != uint64(ksb.Size) {
		t.Errorf("array size %d KiB, kernel's %d", r.ArraySizeKiB, ksb.Size)
	}
}

// raid5 on 3 members: the last is the recovery spare (number 3, raid_disk
// 3, state 0) and slot 2 is counted failed; with an internal bitmap it
// follows the superblock (60 KiB: header, then 0xff) with mdadm's 64 MiB
// minimum chunk.
func TestPlan090RAID5Bitmap(t *testing.T) {
	o := base("raid5", 3, devs(64*mib, 64*mib, 64*mib))
	o.Metadata = "0.90"
	o.Bitmap = "internal"
	r, err := Plan(o)
	if err != nil {
		t.Fatal(err)
	}
	if r.BitmapChunk != 64<<20 || r.BitmapOffset != 8 {
		t.Errorf("bitmap chunk %d offset %d", r.BitmapChunk, r.BitmapOffset)
	}
	last := r.Members[2]
	sb := last.V090
	if sb.ThisDisk.Number != 3 || sb.ThisDisk.RaidDisk != 3 || sb.ThisDisk.State != 0 {
		t.Errorf("recovery spare: %+v", sb.ThisDisk)
	}
	if sb.NrDisks != 4 || sb.ActiveDisks != 2 || sb.WorkingDisks != 3 || sb.FailedDisks != 1 || sb.SpareDisks != 1 {
		t.Errorf("counts nr %d active %d working %d failed %d spare %d", sb.NrDisks, sb.ActiveDisks, sb.WorkingDisks, sb.FailedDisks, sb.SpareDisks)
	}
	if sb.State != superblock.SB090Clean|superblock.SB090BitmapPresent {
		t.Errorf("state %#x", sb.State)
	}
	if len(last.Writes) != 2 || last.Writes[1].Offset != last.SuperOffset+4096 || len(last.BitmapBytes) != 60<<10 ||
		last.BitmapBytes[len(last.BitmapBytes)-1] != 0xff {
		t.Fatalf("bitmap writes %+v", last.Writes)
	}
	if last.Superblock.DevRoles[3] != superblock.RoleSpare || r.RecoverySpare != 2 {
		t.Errorf("recovery spare %d, role %#x", r.RecoverySpare, last.Superblock.DevRoles[3])
	}
}

// The spellings match_metadata_desc0 takes all write 0.90.
func TestPlan090Spellings(t *testing.T) {
	for _, s := range []string{"0", "0.90", "00.90", "0.9", "0.91", "0.swap"} {
		o := base("raid1", 2, devs(64*mib, 64*mib))
		o.Metadata = s
		r, err := Plan(o)
		if err != nil || r.Metadata != "0.90" {
			t.Errorf("%q: %v %v", s, r, err)
		}
	}
	o := base("raid1", 2, devs(64*mib, 64*mib))
	o.Metadata = "0.8"
	var pe *Refusal
	if _, err := Plan(o); !errors.As(err, &pe) || pe.Kind != MetadataUnknown {
		t.Errorf("0.8: %v", err)
	}
}

// The bitmap's uuid is the set_uuid words in memory order, as mdadm's
// add_internal_bitmap0 copies them (mdadm --examine drops a bitmap whose
// uuid differs).
func TestPlan090BitmapUUID(t *testing.T) {
	o := base("raid1", 2, devs(64*mib, 64*mib))
	o.Metadata = "0.90"
	o.Bitmap = "internal"
	u := [16]byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10}
	o.UUID = &u
	r, err := Plan(o)
	if err != nil {
		t.Fatal(err)
	}
	h := r.Members[0].BitmapBytes[:32]
	want := []byte{0x67, 0x45, 0x23, 0x01, 0xef, 0xcd, 0xab, 0x89, 0x98, 0xba, 0xdc, 0xfe, 0x10, 0x32, 0x54, 0x76}
	if string(h[8:24]) != string(want) {
		t.Errorf("bitmap uuid % x, want % x", h[8:24], want)
	}
}
