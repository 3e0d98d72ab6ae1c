package engine

import (
	"context"
	"testing"
)

// TestRMWvsRCW checks the partial-stripe strategy: read-modify-write when
// it reads fewer member sectors than reconstruct-write, else
// reconstruct-write; ties go to reconstruct-write unless RMWPrefer.
func TestRMWvsRCW(t *testing.T) {
	const K = 1024
	const chunk = 64 * K
	tests := []struct {
		name     string
		s        spec
		policy   RMWPolicy
		off, n   int64
		rmw, rcw uint64
	}{
		{"raid5 4K: rmw reads 2 blocks, rcw 3", spec{level: "raid5", n: 5, chunkKiB: 64}, RMWEnable, 4 * K, 4 * K, 1, 0},
		{"raid5 one chunk of 4: rmw", spec{level: "raid5", n: 5, chunkKiB: 64}, RMWEnable, 0, chunk, 1, 0},
		{"raid5 two chunks of 4: rcw", spec{level: "raid5", n: 5, chunkKiB: 64}, RMWEnable, 0, 2 * chunk, 0, 1},
		{"raid5 three chunks of 4: rcw", spec{level: "raid5", n: 5, chunkKiB: 64}, RMWEnable, chunk, 3 * chunk, 0, 1},
		{"raid5 tie goes to rcw", spec{level: "raid5", n: 4, chunkKiB: 64}, RMWEnable, 0, chunk, 0, 1},
		{"raid5 tie with prefer: rmw", spec{level: "raid5", n: 4, chunkKiB: 64}, RMWPrefer, 0, chunk, 1, 0},
		{"raid5 rmw disabled", spec{level: "raid5", n: 5, chunkKiB: 64}, RMWDisable, 4 * K, 4 * K, 0, 1},
		{"raid4 4K: rmw", spec{level: "raid4", n: 5, chunkKiB: 64}, RMWEnable, 4 * K, 4 * K, 1, 0},
		{"raid6 5 disks 4K: rcw (2 reads vs 3)", spec{level: "raid6", n: 5, chunkKiB: 64}, RMWEnable, 4 * K, 4 * K, 0, 1},
		{"raid6 6 disks 4K: tie, rcw", spec{level: "raid6", n: 6, chunkKiB: 64}, RMWEnable, 4 * K, 4 * K, 0, 1},
		{"raid6 7 disks 4K: rmw (3 reads vs 4)", spec{level: "raid6", n: 7, chunkKiB: 64}, RMWEnable, 4 * K, 4 * K, 1, 0},
		{"raid6 asym 7 disks 4K in 3rd chunk: rmw", spec{level: "raid6", layout: "left-asymmetric", n: 7, chunkKiB: 64}, RMWEnable, 2*chunk + 4*K, 4 * K, 1, 0},
		{"raid5 spans two chunks partially: two column segments, rcw each", spec{level: "raid5", n: 3, chunkKiB: 64}, RMWEnable, chunk - 4*K, 8 * K, 0, 2},
		{"raid5 5 disks spanning two chunks partially: rmw each", spec{level: "raid5", n: 5, chunkKiB: 64}, RMWEnable, chunk - 4*K, 8 * K, 2, 0},
		{"raid5 three column segments", spec{level: "raid5", n: 5, chunkKiB: 64}, RMWEnable, chunk - 8*K, chunk + 16*K, 1, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mems := create(t, tc.s)
			o := testOptions()
			o.RMW = tc.policy
			a := open(t, mems, o)
			defer a.Close()
			m := newModel(a.Size())
			// fill two stripes so that parity matters
			p := make([]byte, 2*a.IOOpt())
			fillPattern(newRand(3), p)
			mustWrite(t, a, m, p, 0)
			st0 := a.Stats()
			q := make([]byte, tc.n)
			fillPattern(newRand(4), q)
			mustWrite(t, a, m, q, tc.off)
			st := a.Stats()
			if rmw, rcw := st.RMW-st0.RMW, st.RCW-st0.RCW; rmw != tc.rmw || rcw != tc.rcw {
				t.Errorf("rmw %d rcw %d, want %d %d", rmw, rcw, tc.rmw, tc.rcw)
			}
			checkContent(t, a, m)
			if mm, err := a.Check(context.Background(), false); err != nil || mm != 0 {
				t.Errorf("check: %d mismatches, %v", mm, err)
			}
		})
	}
}
