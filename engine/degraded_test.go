package engine

import (
	"fmt"
	"testing"
)

// dropSets lists the member sets a level survives losing: every single
// member (raid1/4/5/6/10, raid10 only where a copy remains) and every pair
// for raid6.
func dropSets(s spec) [][]int {
	var out [][]int
	switch s.level {
	case "raid1", "raid4", "raid5", "raid10", "raid6":
		for i := 0; i < s.n; i++ {
			out = append(out, []int{i})
		}
	}
	if s.level == "raid6" {
		for i := 0; i < s.n; i++ {
			for j := i + 1; j < s.n; j++ {
				out = append(out, []int{i, j})
			}
		}
	}
	return out
}

// TestDegraded opens every level and layout with members missing: reads
// rebuild the right data, degraded writes (full stripes, rmw, rcw and
// reconstruct-writes) keep it right, and the result survives reopening.
func TestDegraded(t *testing.T) {
	for _, s := range allSpecs() {
		sets := dropSets(s)
		if len(sets) == 0 {
			continue
		}
		if raceEnabled && len(sets) > 1 {
			// one set per layout is enough to exercise the locking
			sets = sets[len(sets)-1:]
		}
		s.devMiB = []int{4}
		t.Run(s.String(), func(t *testing.T) {
			mems := create(t, s)
			a := open(t, mems, testOptions())
			m := newModel(a.Size())
			p := make([]byte, a.Size())
			fillPattern(newRand(21), p)
			mustWrite(t, a, m, p, 0)
			a.Close()
			base := append([]byte(nil), m.b...)
			snap := make([][]byte, len(mems))
			for i, d := range mems {
				snap[i] = make([]byte, d.Geometry().Size)
				d.Reopen().ReadAt(snap[i], 0)
			}
			for _, drop := range sets {
				t.Run(fmt.Sprintf("without%v", drop), func(t *testing.T) {
					// restore the members
					for i, d := range mems {
						d.Reopen().WriteAt(snap[i], 0)
					}
					m := &model{b: append([]byte(nil), base...)}
					a, err := Open(devices(mems, drop...), testOptions())
					if err != nil {
						t.Fatalf("open: %v", err)
					}
					if a.Degraded() != len(drop) {
						t.Errorf("degraded %d, want %d", a.Degraded(), len(drop))
					}
					checkContent(t, a, m)
					workload(t, a, m, uint64(len(drop)*100+drop[0]), 24)
					checkContent(t, a, m)
					a.Close()
					b, err := Open(devices(mems, drop...), testOptions())
					if err != nil {
						t.Fatal(err)
					}
					checkContent(t, b, m)
					b.Close()
				})
			}
		})
	}
}
