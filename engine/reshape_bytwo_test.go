package engine

import (
	"context"
	"testing"
)

// TestReshapeGrowByTwo: raid5 4->6 and raid6 5->7 onto two spares (issue
// 14's N+2): the spares take the two new roles in md's order, the data reads
// back through the reshape and after a reopen, and a check finds no
// mismatch.
func TestReshapeGrowByTwo(t *testing.T) {
	for _, c := range []struct {
		level string
		n     int
	}{{"raid5", 4}, {"raid6", 5}} {
		t.Run(c.level, func(t *testing.T) {
			mems := create(t, spec{level: c.level, n: c.n, chunkKiB: 64, devMiB: []int{8}})
			a := open(t, mems, recoverOptions())
			data := make([]byte, a.Size())
			fillPattern(newRand(41), data)
			m := &model{b: data}
			mustWrite(t, a, m, data, 0)
			spares := []*MemDevice{NewMemDevice(8 << 20), NewMemDevice(8 << 20)}
			for _, s := range spares {
				if _, err := a.AddDevice(s, AddOptions{Replacement: -1}); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.StartReshape(ReshapeStart{RaidDisks: c.n + 2}); err != nil {
				t.Fatal(err)
			}
			// As Linux 6.1 (raid5 4->6 after --add vde, --add vdf: vdf
			// "Active device 4", vde 5): the spare added last takes the
			// lowest new role.
			for i, s := range spares {
				sb := readSB(t, s)
				if want := uint16(c.n + 1 - i); sb.Role() != want {
					t.Errorf("spare %d: role %d, want %d", i, sb.Role(), want)
				}
				if sb.DeltaDisks != 2 || sb.RaidDisks != uint32(c.n+2) {
					t.Errorf("spare: delta_disks %d raid_disks %d, want 2 and %d", sb.DeltaDisks, sb.RaidDisks, c.n+2)
				}
			}
			workload(t, a, m, 5, 50)
			if err := a.Reshape(context.Background()); err != nil {
				t.Fatal(err)
			}
			full := make([]byte, a.Size())
			copy(full, m.b)
			m = &model{b: full}
			checkContent(t, a, m)
			if mm, err := a.Check(context.Background(), false); err != nil || mm != 0 {
				t.Errorf("check: %d mismatches, %v", mm, err)
			}
			a.Close()
			b := open(t, append(append([]*MemDevice(nil), mems...), spares...), recoverOptions())
			defer b.Close()
			if got := b.Geometry().RaidDisks(); got != c.n+2 {
				t.Errorf("reopened: %d raid disks, want %d", got, c.n+2)
			}
			checkContent(t, b, m)
		})
	}
}
