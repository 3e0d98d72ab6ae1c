package wib

import (
	"testing"
)

// TestResize: md_bitmap_resize for a grown array. With room for the new
// bit array the chunk stays, set bits stay, and the added region's
// chunks are set and NEEDED; without room the chunk doubles until the
// bits fit, and the bits on disk end up exactly the new ones (the old
// bits of the union written first are gone), under the new header.
func TestResize(t *testing.T) {
	geom := MemberGeom{Index: 0, LogicalBlock: 512, BitmapStart: 4096, Limit: 4096 + 512}
	for _, c := range []struct {
		name      string
		newSync   uint64
		wantChunk uint32
		wantSet   func(c uint64) bool
	}{
		{"same-chunk", 8 * 200, 4096, func(c uint64) bool { return c == 3 || c == 50 || c >= 100 }},
		{"chunk-doubles", 8 * 4000, 8192, func(c uint64) bool { return c == 1 || c == 25 || c >= 50 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := testHeader(8*100, 4096)
			bits := make([]byte, (h.Chunks()+7)/8)
			bits[3/8] |= 1 << (3 % 8)
			bits[50/8] |= 1 << (50 % 8)
			b, r, _ := setup{h: h, geoms: []MemberGeom{geom}, sub: true, bits: bits}.build(t)
			chunk, err := b.Resize(c.newSync, 1, 8*100)
			if err != nil {
				t.Fatal(err)
			}
			if chunk != c.wantChunk || b.Header().ChunkSize != c.wantChunk {
				t.Fatalf("chunk %d (header %d), want %d", chunk, b.Header().ChunkSize, c.wantChunk)
			}
			dh := r.diskHeader(0, geom)
			if dh.SyncSize != c.newSync || dh.ChunkSize != c.wantChunk {
				t.Errorf("on disk: sync_size %d chunk %d, want %d and %d", dh.SyncSize, dh.ChunkSize, c.newSync, c.wantChunk)
			}
			for ch := uint64(0); ch < dh.Chunks(); ch++ {
				if got := r.diskBit(0, geom, ch); got != c.wantSet(ch) {
					t.Errorf("chunk %d: on-disk bit %v, want %v", ch, got, c.wantSet(ch))
				}
				if got := b.Dirty(ch << b.shift); got != c.wantSet(ch) {
					t.Errorf("chunk %d: in memory dirty %v, want %v", ch, got, c.wantSet(ch))
				}
			}
			// The added region is NEEDED: a resync pass must visit it.
			if need, _ := b.StartSync(8*100, false); !need {
				t.Error("the added region is not NEEDED for the resync")
			}
			b.EndSync(8*100, false)
		})
	}
}
