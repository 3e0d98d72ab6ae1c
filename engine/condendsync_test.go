package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"mdtool/bitmap"
	"mdtool/internal/mdadm/plan"
)

// endSyncRecorder is a bitmap runtime that records md_bitmap_end_sync.
type endSyncRecorder struct {
	chunk uint64
	ended []uint64
}

func (r *endSyncRecorder) StartSync(s uint64, _ bool) (bool, uint64) {
	return true, r.chunk - s%r.chunk
}
func (r *endSyncRecorder) EndSync(s uint64, aborted bool) uint64 {
	r.ended = append(r.ended, s)
	return r.chunk - s%r.chunk
}
func (r *endSyncRecorder) CloseSync()            {}
func (r *endSyncRecorder) ChunkSectors() uint64  { return r.chunk }
func (r *endSyncRecorder) Header() bitmap.Header { return bitmap.Header{DaemonSleep: 1} }

// TestCondEndSyncCadence: md_bitmap_cond_end_sync notes the time at
// position 0, ends nothing until daemon_sleep has passed since, then ends
// every chunk wholly below the position (rounded down to a chunk), each
// once, and never beyond resync_max_sectors.
func TestCondEndSyncCadence(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1700000000, 0)}
	rec := &endSyncRecorder{chunk: 8}
	c := newCondEndSync(rec, 1000, clk.Now)
	if c == nil {
		t.Fatal("no cadence for a bitmap runtime")
	}
	chunks := func(from, to uint64) []uint64 {
		var out []uint64
		for s := from; s < to; s += 8 {
			out = append(out, s)
		}
		return out
	}
	for i, st := range []struct {
		advance time.Duration
		pos     uint64
		want    []uint64
	}{
		{0, 0, nil},
		{500 * time.Millisecond, 100, nil},
		{500 * time.Millisecond, 100, chunks(0, 96)}, // daemon_sleep since position 0
		{999 * time.Millisecond, 300, nil},
		{time.Millisecond, 300, chunks(96, 296)},
		{0, 400, nil}, // the time starts again
		{2 * time.Second, 1200, chunks(296, 1000)},
		{5 * time.Second, 0, nil}, // a new pass: the time only
		{500 * time.Millisecond, 1200, nil},
	} {
		rec.ended = nil
		clk.Add(st.advance)
		c.at(st.pos)
		if fmt.Sprint(rec.ended) != fmt.Sprint(st.want) {
			t.Fatalf("step %d (pos %d): ended %v, want %v", i, st.pos, rec.ended, st.want)
		}
	}
}

// clockDev advances the test clock on every read while on (the resync
// reads the first copy unit by unit) and then runs tick.
type clockDev struct {
	Device
	on   *atomic.Bool
	tick func()
}

func (d *clockDev) ReadAt(p []byte, off int64) (int, error) {
	n, err := d.Device.ReadAt(p, off)
	if d.on.Load() {
		d.tick()
	}
	return n, err
}

// TestResyncBitmapCadence: a raid1 resync over an all-dirty bitmap
// (mdadm --create without --assume-clean, --delay=1) on the injectable
// clock, the bitmap daemon running as time passes. The chunks it synced
// are cleared on disk in order, the last ones (synced within the last
// daemon passes) still dirty when the resync is over; the daemon passes
// after the end leave the on-disk bits as they are for two passes
// (counter 2 -> 1, then the bit cleared in memory) and write them on the
// third. So what `-X` shows after `--wait` depends on the time between.
func TestResyncBitmapCadence(t *testing.T) {
	const n = 2
	mems := make([]*MemDevice, n)
	var devs []plan.Device
	for i := range mems {
		mems[i] = NewMemDevice(8 << 20)
		devs = append(devs, plan.Device{Path: fmt.Sprintf("/dev/test%d", i), Sectors: 8 << 11})
	}
	r, err := plan.Plan(plan.Options{
		MDDevice: "/dev/md0", Metadata: "1.2", Level: "raid1", RaidDevices: n, Bitmap: "internal",
		BitmapChunk: 64 << 10, BitmapDelay: 1, Homehost: "any", Force: true,
		Now: time.Unix(1700000000, 0), Rand: rand.NewChaCha8([32]byte{4}), Devices: devs,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range r.Members {
		for _, w := range m.Writes {
			if _, err := mems[m.Device].WriteAt(w.Data, w.Offset); err != nil {
				t.Fatal(err)
			}
		}
	}
	clk := &fakeClock{t: time.Unix(1700000100, 0)}
	o := recoverOptions()
	o.Clock = clk.Now
	var on atomic.Bool
	var a *Array
	ds := devices(mems)
	for i := range ds {
		ds[i] = &clockDev{Device: ds[i], on: &on, tick: func() {
			clk.Add(50 * time.Millisecond)
			if err := a.tickBitmap(clk.Now()); err != nil {
				t.Error(err)
			}
		}}
	}
	a, err = Open(ds, o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	dirty := func() (int, bitmap.Bits, uint64) {
		h, bits := readBits(t, mems[1])
		d, _ := bits.CountDirty(h.Chunks())
		return int(d), bits, h.Chunks()
	}
	all, _, chunks := dirty()
	if uint64(all) != chunks || chunks < 100 {
		t.Fatalf("before the resync: %d of %d bits dirty, want all (>= 100)", all, chunks)
	}
	on.Store(true)
	if err := a.Resync(context.Background()); err != nil {
		t.Fatal(err)
	}
	on.Store(false)
	d, bits, _ := dirty()
	// 20 chunks a second: those synced in the last 1-4 s are not yet clear
	if d < 10 || d > 80 {
		t.Errorf("after the resync: %d bits dirty, want the last 1-4 s of it (10-80 of %d)", d, chunks)
	}
	for c := uint64(0); c < chunks; c++ {
		if bits.Test(c) != (c >= chunks-uint64(d)) {
			t.Fatalf("after the resync: bit %d is %v; want the dirty ones at the end", c, bits.Test(c))
		}
	}
	// The bits the last passes cleared in memory go out on the next; the
	// chunks md_bitmap_close_sync ended (at least the last one: only the
	// chunks below the position are ended on the way) go to 1 on the first
	// pass after the end and are cleared in memory on the second, written
	// then when the page goes out anyway (md: the page was NEEDWRITE), else
	// on the third.
	prev := d
	for pass := 1; pass <= 3; pass++ {
		clk.Add(time.Second)
		if err := a.tickBitmap(clk.Now()); err != nil {
			t.Fatal(err)
		}
		got, _, _ := dirty()
		if pass == 1 && (got == 0 || got > prev) || got > prev || pass == 3 && got != 0 {
			t.Fatalf("daemon pass %d after the resync: %d bits dirty on disk (before: %d); want 1-%d on pass 1, 0 on pass 3", pass, got, prev, prev)
		}
		prev = got
	}
}
