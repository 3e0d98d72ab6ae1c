package engine

import (
	"context"
	"testing"
)

// allSpecs lists one array per level and layout.
func allSpecs() []spec {
	var out []spec
	out = append(out,
		spec{level: "linear", n: 3, devMiB: []int{4, 6, 5}},
		spec{level: "raid0", n: 3, chunkKiB: 64},
		spec{level: "raid0", layout: "original", n: 3, chunkKiB: 64, devMiB: []int{4, 6, 8}},
		spec{level: "raid0", layout: "alternate", n: 3, chunkKiB: 64, devMiB: []int{4, 6, 8}},
		spec{level: "raid1", n: 2},
		spec{level: "raid1", n: 3, bitmap: true},
		spec{level: "raid4", n: 4, chunkKiB: 64},
	)
	for _, l := range []string{"n2", "f2", "o2"} {
		out = append(out, spec{level: "raid10", layout: l, n: 4, chunkKiB: 64})
		out = append(out, spec{level: "raid10", layout: l, n: 3, chunkKiB: 64})
	}
	out = append(out, spec{level: "raid10", layout: "n3", n: 4, chunkKiB: 64},
		spec{level: "raid10", layout: "f3", n: 5, chunkKiB: 64},
		spec{level: "raid10", layout: "o3", n: 5, chunkKiB: 64})
	for _, l := range []string{"left-asymmetric", "right-asymmetric", "left-symmetric", "right-symmetric", "parity-first", "parity-last"} {
		out = append(out, spec{level: "raid5", layout: l, n: 4, chunkKiB: 64})
	}
	for _, l := range []string{"left-asymmetric", "right-asymmetric", "left-symmetric", "right-symmetric", "parity-first", "parity-last",
		"ddf-zero-restart", "ddf-N-restart", "ddf-N-continue",
		"left-asymmetric-6", "right-asymmetric-6", "left-symmetric-6", "right-symmetric-6", "parity-first-6"} {
		out = append(out, spec{level: "raid6", layout: l, n: 5, chunkKiB: 64})
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	for _, s := range allSpecs() {
		t.Run(s.String(), func(t *testing.T) {
			mems := create(t, s)
			a := open(t, mems, testOptions())
			m := newModel(a.Size())
			workload(t, a, m, 1, 60)
			checkContent(t, a, m)
			if a.redundant() {
				mm, err := a.Check(context.Background(), false)
				if err != nil || mm != 0 {
					t.Fatalf("check: mismatches %d, err %v", mm, err)
				}
			}
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			// reopen: the content survives
			a = open(t, mems, testOptions())
			checkContent(t, a, m)
			a.Close()
		})
	}
}
