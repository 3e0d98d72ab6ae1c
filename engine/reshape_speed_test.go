package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestReshapeSpeedLimit: sync_speed_max limits a reshape as it limits a
// resync, counted as md counts a reshape (sectors per device): with a fake
// clock that only moves when the sync thread sleeps, a raid5 growing 4->5
// at sync_speed_max = 1000 KiB/s takes at least the fake time the limit
// allows for its per-device sectors (and not four times as long, as
// array sectors would give); without a limit it never sleeps.
func TestReshapeSpeedLimit(t *testing.T) {
	for _, limited := range []bool{true, false} {
		mems, data := midReshape(t, "raid5", 4, 0, -256)
		clk := &fakeClock{t: time.Unix(1700000100, 0)}
		o := recoverOptions()
		o.Clock = clk.Now
		a := open(t, mems, o)
		var slept atomic.Int64
		a.sc.sleep = func(ctx context.Context, d time.Duration) {
			slept.Add(int64(d))
			clk.Add(d)
		}
		const maxKBps = 1000
		if limited {
			a.SetSyncLimits(SyncLimits{MinKBps: 10, MaxKBps: maxKBps})
		}
		start := clk.Now()
		if err := a.Reshape(context.Background()); err != nil {
			t.Fatal(err)
		}
		if ok, _ := a.Reshaping(); ok {
			t.Fatal("still reshaping after Reshape returned")
		}
		elapsed := clk.Now().Sub(start)
		st := a.SyncStatus()
		perDevKiB := float64(a.rs.geo.New.DevSectors(0)) / 2
		t.Logf("limited %v: %.0f KiB per device in %v of fake time", limited, perDevKiB, elapsed)
		if limited {
			// md's rate estimate divides by whole seconds + 1: allow one second.
			if min := time.Duration((perDevKiB/maxKBps - 1) * float64(time.Second)); elapsed < min {
				t.Errorf("%.0f KiB per device reshaped in %v of fake time, the limit needs at least %v (%+v)", perDevKiB, elapsed, min, st)
			}
			// counted in array sectors (4 data disks) it would take 4 times as long
			if max := time.Duration((2*perDevKiB/maxKBps + 2) * float64(time.Second)); elapsed > max {
				t.Errorf("%.0f KiB per device reshaped in %v of fake time: more than %v, the limit counts more than the per-device sectors", perDevKiB, elapsed, max)
			}
		} else if slept.Load() != 0 {
			t.Errorf("reshape at default limits slept %v", time.Duration(slept.Load()))
		}
		m := &model{b: data}
		m.b = append(m.b, make([]byte, a.Size()-int64(len(data)))...)
		checkContent(t, a, m)
		a.Close()
	}
}
