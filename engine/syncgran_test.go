package engine

import (
	"testing"
	"time"

	"mdtool/engine/layout"
)

// TestCPRuleWithin: md records progress at its own request boundaries
// (8 sectors for raid5, 128 for raid1), not at the ends of the engine's
// larger units: a raid5 recovery of 36864 sectors per device (18 MiB
// members, 512 KiB chunks) walked in 1024-sector units is recorded 15
// times, every 2312 sectors, as Linux 6.1 does (the engine's units alone
// gave 11, every 3072 sectors, and the events counted 4 fewer).
func TestCPRuleWithin(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1700000000, 0)}
	for _, c := range []struct {
		level       layout.Level
		total, unit uint64
		first, n    uint64
	}{
		{layout.RAID5, 36864, 1024, 2312, 15},
		{layout.RAID6, 36864, 1024, 2312, 15},
		{layout.RAID1, 37888, 128, 2432, 15},
	} {
		a := &Array{opts: Options{Clock: clk.Now}, level: c.level}
		r := a.newCPRule(0, c.total)
		var got []uint64
		for p := c.unit; p < c.total; p += c.unit {
			for {
				at, ok := r.within(p)
				if !ok {
					break
				}
				got = append(got, at)
			}
		}
		if uint64(len(got)) != c.n || got[0] != c.first {
			t.Fatalf("%v: records at %v, want %d of them from %d", c.level, got, c.n, c.first)
		}
		for i := 1; i < len(got); i++ {
			if got[i]-got[i-1] != c.first {
				t.Fatalf("%v: records at %v, want every %d", c.level, got, c.first)
			}
		}
	}
}
