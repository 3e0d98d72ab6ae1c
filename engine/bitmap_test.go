package engine

import (
	"testing"
	"time"

	"mdtool/bitmap"
)

func readBits(t testing.TB, d Device) (*bitmap.Header, bitmap.Bits) {
	t.Helper()
	if m, ok := d.(*MemDevice); ok {
		d = m.Reopen()
	}
	ls, err := loadSuper(d, -1)
	if err != nil {
		t.Fatal(err)
	}
	h, area, err := readBitmap(d, ls)
	if err != nil {
		t.Fatal(err)
	}
	return h, bitmap.BitsOf(area)
}

// TestBitmapMaintained: a write sets its chunk's bit on every member before
// the data goes out, the daemon clears it after 2-3 daemon_sleep, and the
// bitmap header's events follow the superblocks'.
func TestBitmapMaintained(t *testing.T) {
	for _, s := range []spec{
		{level: "raid5", n: 4, chunkKiB: 64, bitmap: true},
		{level: "raid1", n: 2, bitmap: true, metadata: "1.0"},
		{level: "raid10", layout: "f2", n: 4, chunkKiB: 64, bitmap: true},
		{level: "raid6", n: 5, chunkKiB: 64, bitmap: true, metadata: "1.1"},
	} {
		t.Run(s.String(), func(t *testing.T) {
			s.devMiB = []int{64}
			mems := create(t, s)
			// mdadm writes an all-ones bitmap; the first daemon passes
			// clear it (the array is clean).
			clk := &fakeClock{t: time.Unix(1700000100, 0)}
			o := testOptions()
			o.Clock = clk.Now
			a := open(t, mems, o)
			for i := 0; i < 3; i++ {
				clk.Add(6 * time.Second)
				if err := a.Tick(); err != nil {
					t.Fatal(err)
				}
			}
			h, bits := readBits(t, mems[0])
			if d, _ := bits.CountDirty(h.Chunks()); d != 0 {
				t.Fatalf("%d dirty bits after idle daemon passes", d)
			}
			// write somewhere in the middle
			off := a.Size() / 2 / 4096 * 4096
			p := make([]byte, 4096)
			mustWrite(t, a, nil, p, off)
			for i, m := range mems {
				h, bits := readBits(t, m)
				d, _ := bits.CountDirty(h.Chunks())
				if d == 0 {
					t.Errorf("member %d: no dirty bit after a write", i)
				}
				sb := readSB(t, m)
				if h.Events != sb.Events {
					t.Errorf("member %d: bitmap events %d, superblock %d", i, h.Events, sb.Events)
				}
			}
			for i := 0; i < 3; i++ {
				clk.Add(6 * time.Second)
				a.Tick()
			}
			h, bits = readBits(t, mems[1])
			if d, _ := bits.CountDirty(h.Chunks()); d != 0 {
				t.Errorf("%d dirty bits after the daemon passes", d)
			}
			mustWrite(t, a, nil, p, 0)
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			for i, m := range mems {
				h, bits := readBits(t, m)
				sb := readSB(t, m)
				if d, _ := bits.CountDirty(h.Chunks()); d != 0 {
					t.Errorf("member %d: %d dirty bits after close", i, d)
				}
				// md_update_sb at stop writes the new events; events_cleared
				// stays at the events of the last completed write.
				if h.Events != sb.Events || h.EventsCleared != sb.Events-1 {
					t.Errorf("member %d: bitmap events %d cleared %d, superblock events %d", i, h.Events, h.EventsCleared, sb.Events)
				}
			}
		})
	}
}
