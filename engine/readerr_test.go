package engine

import (
	"testing"
	"time"
)

// TestRAID10ReadErrorLimit: raid10 counts the read errors it repairs on
// a member as md does (max_read_errors, default 20, with the count halved
// for every hour since the previous error) and fails the member past the
// limit; the data keeps coming from the other copies.
func TestRAID10ReadErrorLimit(t *testing.T) {
	s := spec{level: "raid10", layout: "n2", n: 4, chunkKiB: 64}
	for _, c := range []struct {
		name   string
		max    int
		phases []int // bad ranges per phase; an hour passes between phases
		faulty bool  // member 0 faulty at the end
	}{
		{"20 errors stay under the default", 0, []int{20}, false},
		{"the 21st fails the member", 0, []int{20, 1}, true},
		{"decay: 20, an hour, 10 more", 0, []int{20, -1, 10}, false},
		{"decay: 20, an hour, 11 more", 0, []int{20, -1, 11}, true},
		{"limit 5", 5, []int{6}, true},
		{"no limit", -1, []int{40}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			mems := create(t, s)
			a := open(t, mems, testOptions())
			m := newModel(a.Size())
			p := make([]byte, a.Size())
			fillPattern(newRand(11), p)
			mustWrite(t, a, m, p, 0)
			a.Close()
			devs := devices(mems)
			fd := NewFaultDevice(devs[0], 1)
			devs[0] = fd
			now := time.Unix(1800000000, 0)
			o := testOptions()
			o.Clock = func() time.Time { return now }
			o.MaxCorrectedReadErrors = c.max
			a, err := Open(devs, o)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			next := int64(0)
			total := 0
			for _, k := range c.phases {
				if k < 0 {
					now = now.Add(time.Hour)
					continue
				}
				// k bad 4 KiB ranges on member 0, each healed by the
				// rewrite, each read in a request of its own
				for i := 0; i < k; i++ {
					fd.AddRule(FaultRule{Ops: OpRead, Off: 3<<20 + next*65536, Len: 4096, HealOnWrite: true})
					next++
				}
				total += k
				buf := make([]byte, 4096)
				for off := int64(0); off < a.Size(); off += 4096 {
					if _, err := a.ReadAt(buf, off); err != nil {
						t.Fatalf("read at %d: %v", off, err)
					}
				}
			}
			info := a.Members()[0]
			if got := info.State == Faulty; got != c.faulty {
				t.Fatalf("member 0 is %v after %d read errors, want faulty %v", info.State, total, c.faulty)
			}
			if st := a.Stats(); st.ReadErrors != uint64(total) {
				t.Fatalf("%d read errors seen, want %d (one per bad range)", st.ReadErrors, total)
			}
			checkContent(t, a, m)
		})
	}
}
