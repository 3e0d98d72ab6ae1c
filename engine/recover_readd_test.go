package engine

import (
	"bytes"
	"errors"
	"testing"
)

// TestReAddNoBitmap: md 6.1 on an array without a bitmap takes a former
// member back into its old role when its events are the array's (left out
// of a degraded assembly, nothing written since), and raid1's recovery
// then skips every sector (no bitmap, no fullsync: sync_request's
// shortcut);
// one that missed a write is refused (super_1_validate: ev1 < events), and
// a faulty member md still holds is re-added with no event check (md's
// "re-add" state write).
func TestReAddNoBitmap(t *testing.T) {
	s := spec{level: "raid1", n: 2, devMiB: []int{4}}
	full := func(t *testing.T, a *Array, dev int) {
		t.Helper()
		waitSync(t, a)
		st := a.SyncStatus()
		if st.LastAction != ActionRecover || st.Written != 0 {
			t.Errorf("recovery %+v, want one that writes nothing", st)
		}
		m := a.Members()
		if m[1].Device != dev || m[1].State != InSync || a.Degraded() != 0 {
			t.Errorf("role 1: %+v, degraded %d; want device %d in sync", m[1], a.Degraded(), dev)
		}
	}
	t.Run("unchanged", func(t *testing.T) {
		mems := createChunk(t, s, 0)
		a := open(t, mems, recoverOptions(), 1)
		ev := a.Events()
		n, err := a.AddDevice(mems[1].Reopen(), AddOptions{ReAdd: true, Replacement: -1})
		if err != nil {
			t.Fatalf("re-add of a member with the array's events %d: %v", ev, err)
		}
		full(t, a, n)
		a.Close()
	})
	t.Run("missed-a-write", func(t *testing.T) {
		mems := createChunk(t, s, 0)
		a := open(t, mems, recoverOptions(), 1)
		mustWrite(t, a, nil, make([]byte, 4096), 0)
		cw := &offsetWrites{Device: mems[1].Reopen(), below: 1 << 62}
		if _, err := a.AddDevice(cw, AddOptions{ReAdd: true, Replacement: -1}); !errors.Is(err, ErrNotReAddable) {
			t.Fatalf("re-add of a member %d events behind: %v, want ErrNotReAddable", a.Events(), err)
		}
		if n := cw.writes.Load(); n != 0 {
			t.Errorf("%d writes to a refused device", n)
		}
		a.Close()
	})
	t.Run("faulty-missed-writes", func(t *testing.T) {
		// md would skip here too and leave role 1 stale; the engine
		// recovers the whole role (recoverSkipsAll, missedWrites).
		mems := createChunk(t, s, 0)
		a := open(t, mems, recoverOptions())
		if err := a.FailDevice(1); err != nil {
			t.Fatal(err)
		}
		data := bytes.Repeat([]byte{0xa5}, 64<<10)
		mustWrite(t, a, nil, data, 1<<20)
		if err := a.DetachFaulty(1); err != nil {
			t.Fatal(err)
		}
		if _, err := a.AddDevice(mems[1].Reopen(), AddOptions{ReAdd: true, Faulty: true, Replacement: -1}); err != nil {
			t.Fatalf("re-add of the faulty member: %v", err)
		}
		waitSync(t, a)
		if st := a.SyncStatus(); st.LastAction != ActionRecover || st.Written == 0 {
			t.Errorf("recovery %+v, want one that writes the role", st)
		}
		// only role 1 left: it must hold what was written while it was out
		if err := a.FailDevice(0); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(data))
		if _, err := a.ReadAt(got, 1<<20); err != nil || !bytes.Equal(got, data) {
			t.Errorf("role 1 after the re-add: %v, data equal %v", err, bytes.Equal(got, data))
		}
		a.Close()
	})
	t.Run("faulty", func(t *testing.T) {
		mems := createChunk(t, s, 0)
		a := open(t, mems, recoverOptions())
		if err := a.FailDevice(1); err != nil {
			t.Fatal(err)
		}
		if err := a.RemoveDevice(1); err != nil {
			t.Fatal(err)
		}
		n, err := a.AddDevice(mems[1].Reopen(), AddOptions{ReAdd: true, Faulty: true, Replacement: -1})
		if err != nil {
			t.Fatalf("re-add of the faulty member: %v", err)
		}
		full(t, a, n)
		a.Close()
	})
}

// TestReAddEvents: the events a re-add records, as md 6.1 records them
// (05r1-re-add-nobitmap, 05r1-re-add-090 in the VM: 4 each): a recovery
// that only skips chunks makes no progress records (md's thread, which
// writes them, runs on the recovery's I/O), and the re-add of a faulty
// member md still holds does not record a removal first.
func TestReAddEvents(t *testing.T) {
	for _, tc := range []struct {
		name   string
		bitmap bool
		faulty bool
	}{
		{"bitmap-nothing-dirty", true, false},
		{"no-bitmap-faulty", false, true},
		{"bitmap-faulty", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec{level: "raid1", n: 2, devMiB: []int{4}, bitmap: tc.bitmap}
			mems := createChunk(t, s, 4<<10)
			a := open(t, mems, recoverOptions())
			defer a.Close()
			if err := a.FailDevice(1); err != nil {
				t.Fatal(err)
			}
			var err error
			if tc.faulty {
				err = a.DetachFaulty(1)
			} else {
				err = a.RemoveDevice(1)
			}
			if err != nil {
				t.Fatal(err)
			}
			ev := a.Events()
			if _, err := a.AddDevice(mems[1].Reopen(), AddOptions{ReAdd: true, Faulty: tc.faulty, Replacement: -1}); err != nil {
				t.Fatal(err)
			}
			waitSync(t, a)
			if st := a.SyncStatus(); st.Written != 0 || a.Degraded() != 0 {
				t.Errorf("re-add: %+v, degraded %d; want nothing written, in sync", st, a.Degraded())
			}
			if got := a.Events() - ev; got != 4 {
				t.Errorf("the re-add recorded %d events (%d -> %d), md records 4", got, ev, a.Events())
			}
		})
	}
}

// TestAddFormerMember: --add (not --re-add) of a device that was a
// member writes what mdadm 4.2 writes for a new device: it zeroes the
// old superblock before write_init_super1 (its Kill loop), so the device
// gets a new device_uuid and the dev_number chosen from raid_disks on
// (Linux 6.1 + mdadm 4.2: a raid1 member failed, removed and added again
// shows Number 2 and a new Device UUID).
func TestAddFormerMember(t *testing.T) {
	mems := create(t, spec{level: "raid1", n: 2})
	a := open(t, mems, recoverOptions())
	defer a.Close()
	old := mpSuper(t, mems[1])
	if err := a.FailDevice(1); err != nil {
		t.Fatal(err)
	}
	if err := a.RemoveDevice(1); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddDevice(mems[1].Reopen(), AddOptions{Replacement: -1}); err != nil {
		t.Fatal(err)
	}
	sb := mpSuper(t, mems[1])
	if sb.DevNumber != 2 || sb.DeviceUUID == old.DeviceUUID {
		t.Errorf("added former member: dev_number %d, device_uuid kept %v; want 2 and a new one", sb.DevNumber, sb.DeviceUUID == old.DeviceUUID)
	}
}
