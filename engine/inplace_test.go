package engine

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

func TestMemDeviceInPlace(t *testing.T) {
	d := NewMemDevice(1 << 20)
	b := d.BeginInPlace(64<<10+4096, 8192)
	if len(b) != 8192 {
		t.Fatalf("BeginInPlace: %d bytes, want 8192", len(b))
	}
	for i := range b {
		b[i] = byte(i % 251)
	}
	d.EndInPlace(64<<10+4096, 8192)
	got := make([]byte, 8192)
	if _, err := d.ReadAt(got, 64<<10+4096); err != nil || !bytes.Equal(got, b) {
		t.Fatalf("read back: err %v, equal %v", err, bytes.Equal(got, b))
	}
	// the locks were released: a write to the range goes through
	if _, err := d.WriteAt(make([]byte, 4096), 64<<10+4096); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		off  int64
		n    int
	}{
		{"crosses a page", 60 << 10, 8192},
		{"past the end", 1<<20 - 4096, 8192},
		{"negative", -4096, 4096},
		{"empty", 0, 0},
	} {
		if b := d.BeginInPlace(c.off, c.n); b != nil {
			t.Errorf("%s: BeginInPlace returned %d bytes, want nil", c.name, len(b))
		}
	}
	d.Close()
	if b := d.BeginInPlace(0, 4096); b != nil {
		t.Error("closed device: BeginInPlace returned memory")
	}
}

// inPlaceDev wraps a MemDevice: mode "pass" hands out memory, "nil"
// refuses every in-place range (the engine writes a buffer instead),
// "fail" refuses and fails every write.
type inPlaceDev struct {
	*MemDevice
	mode    atomic.Pointer[string]
	inPlace atomic.Int64
}

func (d *inPlaceDev) setMode(m string) { d.mode.Store(&m) }

func (d *inPlaceDev) BeginInPlace(off int64, n int) []byte {
	if *d.mode.Load() != "pass" {
		return nil
	}
	b := d.MemDevice.BeginInPlace(off, n)
	if b != nil {
		d.inPlace.Add(1)
	}
	return b
}

var errInPlaceTest = errors.New("test: write refused")

func (d *inPlaceDev) WriteAt(p []byte, off int64) (int, error) {
	if *d.mode.Load() == "fail" {
		return 0, errInPlaceTest
	}
	return d.MemDevice.WriteAt(p, off)
}

// TestFullStripeInPlace: full-stripe writes on in-place members compute
// parity straight into the parity members; the result is the same as
// through buffers (content, check 0), a member that refuses in-place
// ranges gets its parity by WriteAt, and one whose writes fail becomes
// faulty while the data stays readable.
func TestFullStripeInPlace(t *testing.T) {
	for _, s := range []spec{
		{level: "raid5", n: 5, chunkKiB: 64},
		{level: "raid6", n: 6, chunkKiB: 64},
		{level: "raid4", n: 4, chunkKiB: 64},
	} {
		for _, mode := range []string{"pass", "nil", "fail"} {
			t.Run(s.String()+"/"+mode, func(t *testing.T) {
				mems := create(t, s)
				devs := make([]*inPlaceDev, len(mems))
				list := make([]Device, len(mems))
				for i, m := range mems {
					devs[i] = &inPlaceDev{MemDevice: m}
					devs[i].setMode("pass")
					list[i] = devs[i]
				}
				odd := len(mems) - 1 // raid4's parity member; one among others for raid5/6
				if mode != "fail" {
					devs[odd].setMode(mode)
				}
				a, err := Open(list, testOptions())
				if err != nil {
					t.Fatal(err)
				}
				defer a.Close()
				m := newModel(a.Size())
				r := newRand(7)
				stripe := int64(a.IOOpt())
				for off := int64(0); off+4*stripe <= a.Size(); off += 4 * stripe {
					p := make([]byte, 4*stripe)
					fillPattern(r, p)
					mustWrite(t, a, m, p, off)
					if mode == "fail" && off == 0 {
						// after the first request (the superblocks are
						// written): the member fails mid-run
						devs[odd].setMode("fail")
					}
				}
				if st := a.Stats(); st.MemberReads != 0 || st.FullStripeWrites == 0 {
					t.Fatalf("full-stripe writes %d, member reads %d (want >0, 0)", st.FullStripeWrites, st.MemberReads)
				}
				checkContent(t, a, m)
				var inPlace int64
				for _, d := range devs {
					inPlace += d.inPlace.Load()
				}
				if inPlace == 0 && mode == "pass" {
					t.Fatal("no parity was computed in place")
				}
				if mode == "fail" {
					if a.Degraded() != 1 {
						t.Fatalf("degraded %d after the member's writes failed, want 1", a.Degraded())
					}
					return
				}
				if a.Degraded() != 0 {
					t.Fatalf("degraded %d", a.Degraded())
				}
				if mode == "nil" && devs[odd].inPlace.Load() != 0 {
					t.Fatal("the refusing member was written in place")
				}
				mm, err := a.Check(context.Background(), false)
				if err != nil || mm != 0 {
					t.Fatalf("check: %d mismatches, err %v", mm, err)
				}
			})
		}
	}
}
