package engine

import (
	"context"
	"reflect"
	"testing"
)

type piece struct {
	off, n int64
	full   bool
}

func TestSplitter(t *testing.T) {
	const K = 1024
	unit := int64(192 * K) // 3 data disks x 64 KiB
	tests := []struct {
		name      string
		off, n    int64
		unit, max int64
		want      []piece
	}{
		{"one stripe", 0, unit, unit, 1 << 20, []piece{{0, unit, true}}},
		{"inside one stripe", 4 * K, 8 * K, unit, 1 << 20, []piece{{4 * K, 8 * K, false}}},
		{"head and tail", 4 * K, unit, unit, 1 << 20, []piece{{4 * K, unit - 4*K, false}, {unit, 4 * K, false}}},
		{"head, stripes, tail", 4 * K, 3*unit + 8*K, unit, 1 << 20,
			[]piece{{4 * K, unit - 4*K, false}, {unit, 2 * unit, true}, {3 * unit, 12 * K, false}}},
		{"max request: 5 stripes per piece", 0, 12 * unit, unit, 1 << 20,
			[]piece{{0, 5 * unit, true}, {5 * unit, 5 * unit, true}, {10 * unit, 2 * unit, true}}},
		{"stripe larger than max request", 0, 3 * 1536 * K, 1536 * K, 1 << 20,
			[]piece{{0, 1536 * K, true}, {1536 * K, 1536 * K, true}, {3072 * K, 1536 * K, true}}},
		{"ends on boundary", unit - 4*K, 4*K + unit, unit, 1 << 20, []piece{{unit - 4*K, 4 * K, false}, {unit, unit, true}}},
		{"tail only", 2 * unit, 100 * K, unit, 1 << 20, []piece{{2 * unit, 100 * K, false}}},
		{"no unit: max pieces", 0, 2500 * K, 0, 1 << 20, []piece{{0, 1024 * K, false}, {1024 * K, 1024 * K, false}, {2048 * K, 452 * K, false}}},
		{"empty", 0, 0, unit, 1 << 20, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var sp splitter
			sp.init(tc.off, tc.n, tc.unit, tc.max)
			var got []piece
			for {
				o, n, full, ok := sp.next()
				if !ok {
					break
				}
				got = append(got, piece{o, n, full})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestFullStripeWritesNoReads: aligned writes of whole stripes read
// nothing from the members; unaligned ones do.
func TestFullStripeWritesNoReads(t *testing.T) {
	for _, s := range []spec{
		{level: "raid4", n: 4, chunkKiB: 64},
		{level: "raid5", layout: "left-symmetric", n: 5, chunkKiB: 64},
		{level: "raid6", layout: "left-symmetric", n: 6, chunkKiB: 64},
		{level: "raid6", layout: "ddf-N-continue", n: 5, chunkKiB: 64},
	} {
		t.Run(s.String(), func(t *testing.T) {
			mems := create(t, s)
			var counts []*CountingDevice
			var devs []Device
			for _, m := range mems {
				c := &CountingDevice{Device: m}
				counts = append(counts, c)
				devs = append(devs, c)
			}
			a, err := Open(devs, testOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			m := newModel(a.Size())
			reads := func() int64 {
				var n int64
				for _, c := range counts {
					n += c.Reads.Load()
				}
				return n
			}
			unit := a.IOOpt()
			p := make([]byte, 4*unit)
			fillPattern(newRand(1), p)
			mustWrite(t, a, m, p[:unit], 0) // first write marks the array active
			r0 := reads()
			mustWrite(t, a, m, p, 2*unit)
			mustWrite(t, a, m, p[:2*unit], 7*unit)
			if got := reads() - r0; got != 0 {
				t.Errorf("aligned full-stripe writes read %d times from members", got)
			}
			if st := a.Stats(); st.FullStripeWrites != 7 || st.ReadsForWrite != 0 {
				t.Errorf("stats %+v", st)
			}
			r0 = reads()
			mustWrite(t, a, m, p[:unit], 4096)
			if got := reads() - r0; got == 0 {
				t.Errorf("unaligned write read nothing")
			}
			checkContent(t, a, m)
		})
	}
}

// TestFullStripeWriteMemberIO: a full-stripe write sends each member one
// write per chunk (data at once, parity once computed), a FUA one flushes
// each member exactly once after its chunks, and parity checks out, on
// memory members (served inline or fanned out by size) and on members
// that are not memory (always fanned out).
func TestFullStripeWriteMemberIO(t *testing.T) {
	for _, s := range []spec{
		{level: "raid5", layout: "left-symmetric", n: 5, chunkKiB: 64},
		{level: "raid6", layout: "left-symmetric", n: 6, chunkKiB: 64},
		{level: "raid6", layout: "ddf-N-continue", n: 5, chunkKiB: 16},
		{level: "raid4", n: 3, chunkKiB: 4},
	} {
		for _, slow := range []bool{false, true} {
			name := s.String()
			if slow {
				name += "-notmemory"
			}
			t.Run(name, func(t *testing.T) {
				mems := create(t, s)
				var counts []*CountingDevice
				var devs []Device
				for _, m := range mems {
					c := &CountingDevice{Device: m}
					counts = append(counts, c)
					if slow {
						devs = append(devs, notMemory{c})
					} else {
						devs = append(devs, c)
					}
				}
				a, err := Open(devs, testOptions())
				if err != nil {
					t.Fatal(err)
				}
				defer a.Close()
				m := newModel(a.Size())
				unit := a.IOOpt()
				p := make([]byte, 4*unit)
				fillPattern(newRand(7), p)
				mustWrite(t, a, m, p[:unit], 0) // marks the array active
				for _, stripes := range []int64{1, 4} {
					for _, c := range counts {
						c.Reset()
						c.Flushes.Store(0)
					}
					off := 2 * unit
					n, err := a.WriteAtFUA(p[:stripes*unit], off)
					if err != nil || n != int(stripes*unit) {
						t.Fatalf("WriteAtFUA %d stripes: %d, %v", stripes, n, err)
					}
					m.write(p[:stripes*unit], off)
					for i, c := range counts {
						if got, want := c.Writes.Load(), stripes; got != want {
							t.Errorf("%d stripes: member %d: %d writes, want %d (one per chunk)", stripes, i, got, want)
						}
						if got := c.Flushes.Load(); got != 1 {
							t.Errorf("%d stripes FUA: member %d flushed %d times, want 1", stripes, i, got)
						}
						if got := c.Reads.Load(); got != 0 {
							t.Errorf("%d stripes: member %d read %d times", stripes, i, got)
						}
					}
				}
				checkContent(t, a, m)
				if mm, err := a.Check(context.Background(), false); err != nil || mm != 0 {
					t.Fatalf("check: %d mismatches, %v", mm, err)
				}
			})
		}
	}
}

// TestFullStripeWriteError: a member whose writes fail during a
// full-stripe write (with several chunks on it) is failed once, the
// write succeeds on the others, and the data reads back degraded.
func TestFullStripeWriteError(t *testing.T) {
	for _, s := range []spec{
		{level: "raid5", n: 5, chunkKiB: 64},
		{level: "raid6", n: 6, chunkKiB: 64},
	} {
		t.Run(s.String(), func(t *testing.T) {
			mems := create(t, s)
			var devs []Device
			var faulty *FaultDevice
			for i, m := range mems {
				var d Device = m
				if i == 2 {
					faulty = NewFaultDevice(m, 1)
					d = faulty
				}
				devs = append(devs, notMemory{d})
			}
			a, err := Open(devs, testOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			m := newModel(a.Size())
			unit := a.IOOpt()
			p := make([]byte, 4*unit)
			fillPattern(newRand(9), p)
			mustWrite(t, a, m, p[:unit], 0)
			faulty.AddRule(FaultRule{Ops: OpWrite})
			mustWrite(t, a, m, p, 4*unit)
			if got := a.Degraded(); got != 1 {
				t.Errorf("degraded = %d, want 1", got)
			}
			if st := a.Stats(); st.WriteErrors != 1 {
				t.Errorf("WriteErrors = %d, want 1 (one failure per member, not per chunk)", st.WriteErrors)
			}
			checkContent(t, a, m)
		})
	}
}
