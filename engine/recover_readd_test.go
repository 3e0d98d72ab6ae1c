package engine

import (
	"errors"
	"testing"
)

// TestReAddNoBitmap: md 6.1 on an array without a bitmap takes a former
// member back into its old role when its events are the array's (left out
// of a degraded assembly, nothing written since), recovering it in full;
// one that missed a write is refused (super_1_validate: ev1 < events), and
// a faulty member md still holds is re-added with no event check (md's
// "re-add" state write).
func TestReAddNoBitmap(t *testing.T) {
	s := spec{level: "raid1", n: 2, devMiB: []int{4}}
	full := func(t *testing.T, a *Array, dev int) {
		t.Helper()
		waitSync(t, a)
		st := a.SyncStatus()
		if want := a.geo.DevSectors(1); st.LastAction != ActionRecover || st.Written != want {
			t.Errorf("recovery %+v, want a full recovery of %d sectors", st, want)
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
