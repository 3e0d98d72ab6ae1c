//go:build linux

package dmshim

import (
	"bytes"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"testing"

	"mdtool/internal/serve/export"
	"mdtool/ioctl"
)

// dmMap is the reference model: device-mapper's mapping of a sector of the
// shim device to a sector of the door device, computed from the table's
// text as dm-stripe (stripe_map_sector) and dm-linear do.
func dmMap(t *testing.T, table []ioctl.DMTarget, sector uint64) uint64 {
	for _, tg := range table {
		if sector < tg.Start || sector >= tg.Start+tg.Length {
			continue
		}
		f := strings.Fields(tg.Params)
		num := func(s string) uint64 {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				t.Fatalf("table %q: %v", tg.Params, err)
			}
			return v
		}
		off := sector - tg.Start
		switch tg.Type {
		case "linear":
			return num(f[1]) + off
		case "striped":
			stripes, chunk := num(f[0]), num(f[1])
			c, r := off/chunk, off%chunk
			stripe, cs := c%stripes, c/stripes
			return num(f[3+2*stripe]) + cs*chunk + r
		}
		t.Fatalf("target type %q", tg.Type)
	}
	t.Fatalf("sector %d beyond the table", sector)
	return 0
}

var geometries = []Geometry{
	{Size: 4 * 3 * 4096 * 4, Chunk: 4096 * 4, Stripes: 3},                  // whole full stripes
	{Size: (7*3*2 + 5) * 4096, Chunk: 2 * 4096, Stripes: 3},                // a tail of 2.5 chunks
	{Size: (5*4*4 + 3) * 512, Chunk: 4 * 512, Stripes: 4},                  // sectors, a 3-sector tail
	{Size: 6 * 2 * 1024, Chunk: 1024, Stripes: 2},                          // 2 stripes
	{Size: (3*7 + 1) * 1536, Chunk: 1536, Stripes: 7},                      // a chunk that is no power of two
	{Size: 9 * 1 * 4096, Chunk: 4096, Stripes: 1},                          // one stripe: identity
	{Size: (2*3*1024 + 3*1024 - 512) * 512, Chunk: 1024 * 512, Stripes: 3}, // raid5-like, 512K chunks
}

// TestPermutationIsIdentity: for every sector, device-mapper's mapping of
// the table composed with ToArray is the identity (and ToArray's run
// ends at the next chunk, stripe or tail boundary of the door).
func TestPermutationIsIdentity(t *testing.T) {
	for _, g := range geometries {
		if !g.Valid() {
			t.Fatalf("%+v not valid", g)
		}
		table := g.Table(251, 3)
		var end uint64
		for _, tg := range table {
			if tg.Start != end {
				t.Fatalf("%+v: table %+v not contiguous", g, table)
			}
			end += tg.Length
		}
		if end != uint64(g.Size>>9) {
			t.Fatalf("%+v: table covers %d sectors of %d", g, end, g.Size>>9)
		}
		seen := map[int64]bool{}
		for s := int64(0); s < g.Size>>9; s++ {
			door := int64(dmMap(t, table, uint64(s)))
			if seen[door] {
				t.Fatalf("%+v: door sector %d mapped twice", g, door)
			}
			seen[door] = true
			a, run := g.ToArray(door << 9)
			if a != s<<9 {
				t.Fatalf("%+v: dm sector %d -> door %d -> array byte %d", g, s, door, a)
			}
			if run < 512 || run%512 != 0 {
				t.Fatalf("%+v: run %d at door sector %d", g, run, door)
			}
			// the run is contiguous on both sides
			if s+1 < g.Size>>9 && run > 512 {
				if a2, _ := g.ToArray((door + 1) << 9); a2 != (s+1)<<9 {
					t.Fatalf("%+v: run %d at door %d, but door %d is array %d", g, run, door, door+1, a2)
				}
			}
		}
	}
	if (Geometry{Size: 4096, Chunk: 4096, Stripes: 3}).Valid() {
		t.Fatal("a device smaller than a full stripe is valid")
	}
}

// TestBackendSpans writes, reads, zeroes and discards door ranges that
// cross chunk, stripe and tail boundaries through the Backend, and checks
// the array's bytes against the reference model: the byte at door
// address P lies at the array address device-mapper's table maps to P.
func TestBackendSpans(t *testing.T) {
	rng := rand.New(rand.NewSource(12))
	for gi, g := range geometries {
		t.Run(fmt.Sprint(gi), func(t *testing.T) {
			table := g.Table(251, 3)
			toArray := make([]int64, g.Size>>9) // door sector -> array sector, from the model
			for s := range toArray {
				toArray[dmMap(t, table, uint64(s))] = int64(s)
			}
			arr, err := export.NewMem(g.Size, 512, 4096, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			b, err := NewBackend(arr, g)
			if err != nil {
				t.Fatal(err)
			}
			model := make([]byte, g.Size) // the door's contents
			full := make([]byte, g.Size)
			for i := 0; i < 200; i++ {
				off := rng.Int63n(g.Size>>9) << 9
				n := (1 + rng.Int63n(min(g.Size-off, 4*g.Chunk*g.Stripes)>>9)) << 9
				switch op := rng.Intn(6); op {
				case 0, 1, 2:
					p := make([]byte, n)
					rng.Read(p)
					wr := b.WriteAt
					if op == 2 {
						wr = b.WriteAtFUA
					}
					if k, err := wr(p, off); err != nil || k != int(n) {
						t.Fatalf("write %d at %d: %d, %v", n, off, k, err)
					}
					copy(model[off:], p)
				case 3:
					if err := b.WriteZeroes(off, n, false); err != nil {
						t.Fatal(err)
					}
					clear(model[off : off+n])
				case 4:
					if err := b.Discard(off, n); err != nil { // Mem reads discarded ranges as zeroes
						t.Fatal(err)
					}
					clear(model[off : off+n])
				case 5:
					p := make([]byte, n)
					if k, err := b.ReadAt(p, off); err != nil || k != int(n) {
						t.Fatalf("read %d at %d: %d, %v", n, off, k, err)
					}
					if !bytes.Equal(p, model[off:off+n]) {
						t.Fatalf("read %d at %d differs from what was written", n, off)
					}
				}
				// the array holds each door sector where the table maps it
				if _, err := arr.ReadAt(full, 0); err != nil {
					t.Fatal(err)
				}
				for s, as := range toArray {
					if !bytes.Equal(full[as<<9:(as+1)<<9], model[s<<9:(s+1)<<9]) {
						t.Fatalf("op %d: door sector %d is not at array sector %d", i, s, as)
					}
				}
			}
		})
	}
	small, err := export.NewMem(1<<20, 512, 4096, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewBackend(small, geometries[0]); err == nil {
		t.Fatal("a geometry of another size was accepted")
	}
}
