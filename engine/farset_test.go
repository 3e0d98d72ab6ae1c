package engine

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"mdtool/superblock"
)

// TestRAID10FarSetWarning: the far-set version 1 raid10 layout (layout
// bit 17, which mdadm never creates) runs with the kernel's mapping, and
// with fewer devices per far set than far copies the engine warns as
// raid10's setup_geo does.
func TestRAID10FarSetWarning(t *testing.T) {
	for _, c := range []struct {
		name string
		n    int
		bit  uint32
		warn bool
	}{
		{"f2 on 3, version 0", 3, 0, false},
		{"f2 on 3, version 1", 3, 1 << 17, true},
		{"f2 on 4, version 1", 4, 1 << 17, false},
		{"f2 on 3, version 2", 3, 2 << 17, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			mems := create(t, spec{level: "raid10", layout: "f2", n: c.n, chunkKiB: 64})
			for _, m := range mems {
				b := make([]byte, 4096)
				if _, err := m.ReadAt(b, 4096); err != nil {
					t.Fatal(err)
				}
				sb, err := superblock.Parse(b)
				if err != nil {
					t.Fatal(err)
				}
				sb.Layout |= c.bit
				if _, err := m.WriteAt(sb.MarshalWithChecksum(), 4096); err != nil {
					t.Fatal(err)
				}
			}
			var mu sync.Mutex
			var log []string
			o := testOptions()
			o.Logf = func(f string, args ...any) {
				mu.Lock()
				log = append(log, fmt.Sprintf(f, args...))
				mu.Unlock()
			}
			a := open(t, mems, o)
			defer a.Close()
			if c.bit>>17 != 1 {
				// (version 1 maps some array sectors onto the same
				// member sector, in the kernel too: no content check)
				m := newModel(a.Size())
				workload(t, a, m, 3, 20)
				checkContent(t, a, m)
			}
			mu.Lock()
			got := strings.Contains(strings.Join(log, "\n"), "does not provide data safety")
			mu.Unlock()
			if got != c.warn {
				t.Fatalf("warning logged %v, want %v; log %q", got, c.warn, log)
			}
		})
	}
}
