package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestCPRule: md_do_sync records progress after every 1/16 of the range
// and once 5 minutes (UPDATE_FREQUENCY) have passed since the last record.
func TestCPRule(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1700000000, 0)}
	a := &Array{opts: Options{Clock: clk.Now}}
	r := a.newCPRule(0, 1600) // step 101
	for i, c := range []struct {
		advance time.Duration
		pos     uint64
		want    bool
	}{
		{0, 50, false},
		{0, 100, false},
		{0, 101, true}, // 1/16 done; next at 202
		{4 * time.Minute, 150, false},
		{time.Minute, 160, true}, // 5 minutes since 101; next at 261
		{0, 200, false},
		{0, 261, true},
		{5*time.Minute - time.Nanosecond, 262, false},
		{time.Nanosecond, 263, true},
	} {
		clk.Add(c.advance)
		if got := r.due(c.pos); got != c.want {
			t.Fatalf("step %d (pos %d): due %v, want %v", i, c.pos, got, c.want)
		}
	}
}

// sbWrites counts the superblock writes (v1.2: 4 KiB from the device) to
// a member.
type sbWrites struct {
	Device
	n atomic.Int64
}

func (d *sbWrites) WriteAt(p []byte, off int64) (int, error) {
	if off == 4096 {
		d.n.Add(1)
	}
	return d.Device.WriteAt(p, off)
}

// TestRecoveryCheckpointsByTime: a recovery whose clock runs fast (every
// reading 6 minutes later) records recovery_offset far more often than
// the 16 times of a fast one.
func TestRecoveryCheckpointsByTime(t *testing.T) {
	s := spec{level: "raid1", n: 2, devMiB: []int{16}}
	run := func(tick time.Duration) int64 {
		mems := create(t, s)
		clk := &fakeClock{t: time.Unix(1700000100, 0)}
		o := recoverOptions()
		o.Clock = func() time.Time { clk.Add(tick); return clk.Now() }
		a := open(t, mems, o, 1)
		defer a.Close()
		spare := &sbWrites{Device: NewMemDevice(s.devSize(1))}
		if _, err := a.AddDevice(spare, AddOptions{Replacement: -1}); err != nil {
			t.Fatal(err)
		}
		waitSync(t, a)
		if d := a.Degraded(); d != 0 {
			t.Fatalf("degraded %d after the recovery", d)
		}
		return spare.n.Load()
	}
	still, fast := run(0), run(6*time.Minute)
	if still > 24 || fast < 2*still || fast < 40 {
		t.Fatalf("superblock writes to the spare: %d with a still clock, %d with 6 minutes a reading", still, fast)
	}
	t.Logf("superblock writes to the spare: %d (still clock), %d (6 minutes a reading)", still, fast)
}

// TestResyncCheckpointsWithoutBitmap: a resync of an array without a
// bitmap records resync_offset every 1/16 of the array (md_do_sync), or
// every 5 minutes when that comes first; before, one span covered the
// whole array and nothing was recorded until the end.
func TestResyncCheckpointsWithoutBitmap(t *testing.T) {
	s := spec{level: "raid5", n: 3, chunkKiB: 64, devMiB: []int{16}}
	run := func(tick time.Duration) int64 {
		mems := create(t, s)
		clk := &fakeClock{t: time.Unix(1700000100, 0)}
		o := recoverOptions()
		o.Clock = func() time.Time { clk.Add(tick); return clk.Now() }
		a := open(t, mems, o)
		if _, err := a.WriteAt(make([]byte, 4096), 0); err != nil {
			t.Fatal(err)
		}
		// crash (no Close), reopen, let safe mode mark it clean
		devs := devices(mems)
		w := &sbWrites{Device: devs[0]}
		devs[0] = w
		b, err := Open(devs, o)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if need, from := b.NeedsResync(); !need || from != 0 {
			t.Fatalf("after the crash: NeedsResync %v from %d", need, from)
		}
		clk.Add(time.Second)
		if err := b.Tick(); err != nil {
			t.Fatal(err)
		}
		if !b.Clean() {
			t.Fatal("not clean after safe mode")
		}
		before := w.n.Load()
		if err := b.Resync(context.Background()); err != nil {
			t.Fatal(err)
		}
		return w.n.Load() - before
	}
	still, fast := run(0), run(6*time.Minute)
	if still < 10 || still > 24 || fast < 2*still {
		t.Fatalf("superblock writes during the resync: %d with a still clock (want about 16), %d with 6 minutes a reading", still, fast)
	}
	t.Logf("superblock writes during the resync: %d (still clock), %d (6 minutes a reading)", still, fast)
}
