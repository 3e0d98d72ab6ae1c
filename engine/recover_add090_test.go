package engine

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"mdtool/bitmap"
	"mdtool/superblock"
)

// read090Raw parses the 0.90 superblock of any device.
func read090Raw(t *testing.T, d Device) *superblock.SuperblockV090 {
	t.Helper()
	raw := make([]byte, superblock.Size090)
	if err := readFull(d, raw, int64(superblock.Offset090(uint64(d.Geometry().Size)))); err != nil {
		t.Fatal(err)
	}
	sb, err := superblock.Parse090(raw)
	if err != nil {
		t.Fatalf("0.90 superblock: %v", err)
	}
	return sb
}

// want090 is what super_90_sync writes, in the fields that tell a
// member's place: its own descriptor, the counts and the disk table.
type want090 struct {
	this                                superblock.Disk090
	nr, active, working, failed, spares uint32
	disks                               map[int]superblock.Disk090 // descriptors that must be as given; the others zero
}

func check090(t *testing.T, what string, sb *superblock.SuperblockV090, w want090) {
	t.Helper()
	if sb.ThisDisk != w.this {
		t.Errorf("%s: this_disk %+v, want %+v", what, sb.ThisDisk, w.this)
	}
	if sb.NrDisks != w.nr || sb.ActiveDisks != w.active || sb.WorkingDisks != w.working || sb.FailedDisks != w.failed || sb.SpareDisks != w.spares {
		t.Errorf("%s: nr/active/working/failed/spare %d/%d/%d/%d/%d, want %d/%d/%d/%d/%d", what,
			sb.NrDisks, sb.ActiveDisks, sb.WorkingDisks, sb.FailedDisks, sb.SpareDisks, w.nr, w.active, w.working, w.failed, w.spares)
	}
	for i, d := range sb.Disks {
		if d != w.disks[i] {
			t.Errorf("%s: disks[%d] %+v, want %+v", what, i, d, w.disks[i])
		}
	}
}

func active090(n int) superblock.Disk090 {
	return superblock.Disk090{Number: uint32(n), RaidDisk: uint32(n), State: superblock.Disk090Active | superblock.Disk090Sync}
}

// TestAdd090 follows mdadm's tests/05r1-n3-bitmapfile on 0.90 metadata
// (and the same with an internal bitmap, without one, and on raid5): the
// array assembled without its member 2, a zeroed device added. What
// mdadm's add_to_super0 + write_init_super0 write, then md's super_90_sync
// of the spare (number raid_disks, state 0, raid_disk = its number, slot
// 2 removed+faulty), the recovery, and the table after it (the new member
// active in slot 2, the spare's descriptor gone), events the same on all
// members; the kernel's view of the same sequence is checked by
// TestKernelAdd090.
func TestAdd090(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    spec
		file bool
	}{
		{"raid1-bitmapfile", spec{level: "raid1", n: 3, devMiB: []int{8}, metadata: "0.90"}, true},
		{"raid1-internal", spec{level: "raid1", n: 3, devMiB: []int{8}, metadata: "0.90", bitmap: true}, false},
		{"raid5", spec{level: "raid5", n: 4, chunkKiB: 64, devMiB: []int{8}, metadata: "0.90"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions()
			var mems []*MemDevice
			if tc.file {
				var f *os.File
				mems, f = createFileBitmap(t, tc.s)
				o.BitmapFile = f
			} else {
				mems = create(t, tc.s)
			}
			a := open(t, mems, o, 2)
			defer a.Close()
			n := tc.s.n
			m := newModel(a.Size())
			p := make([]byte, 256<<10)
			fillPattern(newRand(5), p)
			mustWrite(t, a, m, p, 8192)
			events := a.Events()

			// a device too small for the component size
			small := NewMemDevice(4 << 20)
			if _, err := a.AddDevice(small, AddOptions{Replacement: -1}); err == nil || !bytes.Contains([]byte(err.Error()), []byte("not large enough")) {
				t.Fatalf("a 4 MiB device: %v", err)
			}
			if raw := small.Reopen(); read090Try(raw) != nil {
				t.Fatalf("a refused device got a superblock")
			}

			if err := a.StartAction(ActionFrozen); err != nil {
				t.Fatal(err)
			}
			fresh := NewMemDevice(tc.s.devSize(2))
			idx, err := a.AddDevice(fresh, AddOptions{Replacement: -1, Major: 7, Minor: 2})
			if err != nil {
				t.Fatalf("add: %v", err)
			}
			sb := read090Raw(t, fresh.Reopen())
			if sb.Events() != a.Events() || a.Events() <= events {
				t.Errorf("spare's events %d, array %d (before the add %d)", sb.Events(), a.Events(), events)
			}
			spare := superblock.Disk090{Number: uint32(n), Major: 7, Minor: 2, RaidDisk: uint32(n)}
			disks := map[int]superblock.Disk090{2: {Number: 2, RaidDisk: 2, State: superblock.Disk090Removed | superblock.Disk090Faulty}, n: spare}
			for i := 0; i < n; i++ {
				if i != 2 {
					disks[i] = active090(i)
				}
			}
			w := want090{this: spare, nr: uint32(n), active: uint32(n - 1), working: uint32(n), failed: 1, spares: 1, disks: disks}
			check090(t, "spare", sb, w)
			if bm := sb.State&superblock.SB090BitmapPresent != 0; bm != tc.s.bitmap {
				t.Errorf("spare's superblock state %#x (internal bitmap %v)", sb.State, tc.s.bitmap)
			}
			area := make([]byte, 60<<10)
			if err := readFull(fresh.Reopen(), area, int64(superblock.Offset090(uint64(fresh.Geometry().Size)))+4096); err != nil {
				t.Fatal(err)
			}
			if tc.s.bitmap {
				h, err := bitmap.Parse(area[:bitmap.HeaderSize])
				if err != nil || h.UUID != sb.BitmapUUID090() {
					t.Errorf("spare's bitmap header %+v, %v", h, err)
				}
				if i := bytes.IndexFunc(area[bitmap.HeaderSize:], func(r rune) bool { return r != 0xff && r != 0xfffd }); i >= 0 {
					t.Errorf("spare's bitmap area not all-ones after the header (at %d)", bitmap.HeaderSize+i)
				}
			} else if !bytes.Equal(area, make([]byte, len(area))) {
				t.Errorf("something was written after the spare's superblock without an internal bitmap")
			}
			for i := 0; i < n; i++ {
				if i == 2 {
					continue
				}
				w.this = active090(i)
				check090(t, "member "+string(rune('0'+i))+" with the spare", read090Raw(t, mems[i].Reopen()), w)
			}

			// The recovery, held back: the recovering member is still
			// listed as a spare (0.90 has nowhere to keep its offset).
			a.SetSyncLimits(SyncLimits{MinKBps: 1, MaxKBps: 1})
			if err := a.StartAction(ActionIdle); err != nil {
				t.Fatal(err)
			}
			if err := a.StartAction(ActionRecover); err != nil && !errors.Is(err, ErrBusy) {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(time.Minute); a.SyncStatus().Action != ActionRecover; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("no recovery: %+v", a.SyncStatus())
				}
			}
			sb = read090Raw(t, fresh.Reopen())
			w.this = spare
			check090(t, "recovering", sb, w)
			if sb.Events() != a.Events() {
				t.Errorf("recovering member's events %d, array %d", sb.Events(), a.Events())
			}
			a.SetSyncLimits(SyncLimits{})
			waitSync(t, a)
			if st := a.SyncStatus(); st.LastAction != ActionRecover || a.Degraded() != 0 {
				t.Fatalf("after the add: %+v, degraded %d", st, a.Degraded())
			}
			if mm, err := a.Check(context.Background(), false); err != nil || mm != 0 {
				t.Fatalf("check: %d, %v", mm, err)
			}
			checkContent(t, a, m)
			a.Close()
			devs := []Device{mems[0].Reopen(), mems[1].Reopen(), fresh.Reopen()}
			for i := 3; i < n; i++ {
				devs = append(devs, mems[i].Reopen())
			}
			disks = map[int]superblock.Disk090{}
			for i := 0; i < n; i++ {
				disks[i] = active090(i)
			}
			disks[2] = superblock.Disk090{Number: 2, Major: 7, Minor: 2, RaidDisk: 2, State: superblock.Disk090Active | superblock.Disk090Sync}
			var ev uint64
			for i, d := range devs {
				sb := read090Raw(t, d)
				w := want090{this: disks[i], nr: uint32(n), active: uint32(n), working: uint32(n), disks: disks}
				check090(t, "after the recovery, member "+string(rune('0'+i)), sb, w)
				if i > 0 && sb.Events() != ev {
					t.Errorf("member %d: events %d, member 0 %d", i, sb.Events(), ev)
				}
				ev = sb.Events()
				if sb.State&superblock.SB090Clean == 0 {
					t.Errorf("member %d not clean after Close: %#x", i, sb.State)
				}
			}
			if idx != n-1 {
				t.Errorf("device index %d, want %d", idx, n-1)
			}
			// the recovered member serves the data without member 0
			b, err := Open(devs[1:], o)
			if err != nil {
				t.Fatalf("open without member 0: %v", err)
			}
			checkContent(t, b, m)
			b.Close()
		})
	}
}

// read090Try returns the 0.90 superblock of d, or nil.
func read090Try(d Device) *superblock.SuperblockV090 {
	raw := make([]byte, superblock.Size090)
	if err := readFull(d, raw, int64(superblock.Offset090(uint64(d.Geometry().Size)))); err != nil {
		return nil
	}
	sb, _ := superblock.Parse090(raw)
	return sb
}

// TestReAdd090: a 0.90 member failed and removed from an array with an
// internal bitmap goes back into its slot (super_90_validate: its own
// descriptor in sync, events not older than the bitmap's events_cleared),
// recovered only where the bitmap has bits; without a bitmap the re-add
// is refused (md's ADD_NEW_DISK fails with EINVAL: mdadm's "--re-add ...
// is not possible").
func TestReAdd090(t *testing.T) {
	for _, bm := range []bool{true, false} {
		s := spec{level: "raid1", n: 3, devMiB: []int{8}, metadata: "0.90", bitmap: bm}
		mems := createChunk(t, s, 64<<10)
		a := open(t, mems, testOptions())
		m := newModel(a.Size())
		if err := a.FailDevice(2); err != nil {
			t.Fatal(err)
		}
		if err := a.RemoveDevice(2); err != nil {
			t.Fatal(err)
		}
		p := make([]byte, 64<<10)
		fillPattern(newRand(9), p)
		mustWrite(t, a, m, p, 1<<20)
		_, err := a.AddDevice(mems[2].Reopen(), AddOptions{ReAdd: true, Replacement: -1})
		if !bm {
			if !errors.Is(err, ErrNotReAddable) {
				t.Errorf("re-add without a bitmap: %v", err)
			}
			a.Close()
			continue
		}
		if err != nil {
			t.Fatalf("re-add: %v", err)
		}
		waitSync(t, a)
		st := a.SyncStatus()
		if st.LastAction != ActionRecover || a.Degraded() != 0 || st.Written == 0 || st.Written > a.geo.DevSectors(0)/4 {
			t.Fatalf("after the re-add: %+v, degraded %d", st, a.Degraded())
		}
		checkContent(t, a, m)
		a.Close()
		disks := map[int]superblock.Disk090{0: active090(0), 1: active090(1), 2: active090(2)}
		for i, mem := range mems {
			check090(t, "after the re-add, member "+string(rune('0'+i)), read090(t, mem),
				want090{this: disks[i], nr: 3, active: 3, working: 3, disks: disks})
		}
	}
}

// TestAdd090Erases1x: a device that carries a 1.x superblock (of another
// array) loses it when it is added to a 0.90 array, as mdadm's
// write_init_super0 erases every md superblock first (Kill).
func TestAdd090Erases1x(t *testing.T) {
	for _, meta := range []string{"1.0", "1.1", "1.2"} {
		mems := create(t, spec{level: "raid1", n: 2, devMiB: []int{8}, metadata: "0.90"})
		other := create(t, spec{level: "raid1", n: 2, devMiB: []int{8}, metadata: meta})
		a := open(t, mems, testOptions(), 1)
		d := other[1].Reopen()
		if _, err := superblock.FindV1(deviceReader{d}, uint64(d.Geometry().Size)>>9, -1); err != nil {
			t.Fatalf("%s: no 1.x superblock to start with: %v", meta, err)
		}
		if _, err := a.AddDevice(other[1].Reopen(), AddOptions{Replacement: -1}); err != nil {
			t.Fatalf("%s: add: %v", meta, err)
		}
		waitSync(t, a)
		a.Close()
		d = other[1].Reopen()
		if f, err := superblock.FindV1(deviceReader{d}, uint64(d.Geometry().Size)>>9, -1); err == nil {
			t.Errorf("%s: a 1.%d superblock is left at sector %d", meta, f.Minor, f.Offset)
		}
		if sb := read090Raw(t, d); sb.ThisDisk != active090(1) {
			t.Errorf("%s: the added member's this_disk %+v", meta, sb.ThisDisk)
		}
	}
}
