package bitmap

import (
	"math/rand/v2"
	"testing"
)

// naiveDirty counts like mdadm's count_dirty_bits_byte loop: bit by bit,
// LSB first, over the first n bits.
func naiveDirty(b []byte, n uint64) uint64 {
	var d uint64
	for i := uint64(0); i < n; i++ {
		if b[i/8]>>(i%8)&1 == 1 {
			d++
		}
	}
	return d
}

func TestBitsLSBFirst(t *testing.T) {
	b := make(Bits, 4)
	b.Set(0)
	b.Set(9)
	b.Set(31)
	if b[0] != 0x01 || b[1] != 0x02 || b[2] != 0 || b[3] != 0x80 {
		t.Fatalf("bytes % x, want 01 02 00 80", []byte(b))
	}
	for _, c := range []struct {
		chunk uint64
		want  bool
	}{{0, true}, {1, false}, {8, false}, {9, true}, {31, true}, {32, false}, {1 << 40, false}} {
		if got := b.Test(c.chunk); got != c.want {
			t.Errorf("Test(%d) = %v, want %v", c.chunk, got, c.want)
		}
	}
	b.Clear(9)
	if b[1] != 0 || !b.Test(0) {
		t.Errorf("Clear(9) gave % x", []byte(b))
	}
	b.Set(32) // beyond: no-op, no panic
	b.Clear(1 << 50)
	if b[3] != 0x80 {
		t.Errorf("out-of-range Set/Clear changed bytes: % x", []byte(b))
	}
}

func TestCountDirtyCases(t *testing.T) {
	ff := func(n int) Bits {
		b := make(Bits, n)
		for i := range b {
			b[i] = 0xff
		}
		return b
	}
	tests := []struct {
		name           string
		b              Bits
		total          uint64
		dirty, counted uint64
	}{
		{"all ones, 13 chunks", ff(4), 13, 13, 13},
		{"all ones, 16 chunks", ff(4), 16, 16, 16},
		{"bit 15 beyond 15 chunks", Bits{0, 0x80}, 15, 0, 15},
		{"bit 15 within 16 chunks", Bits{0, 0x80}, 16, 1, 16},
		{"partial byte low bits only", Bits{0x0f}, 3, 3, 3},
		{"partial byte high bits ignored", Bits{0xf0}, 4, 0, 4},
		{"zero total", ff(8), 0, 0, 0},
		{"truncated: fewer bytes than chunks", ff(2), 100, 16, 16},
		{"empty", nil, 5, 0, 0},
		{"long run crosses word loop", ff(100), 799, 799, 799},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, c := tt.b.CountDirty(tt.total)
			if d != tt.dirty || c != tt.counted {
				t.Errorf("CountDirty(%d) = %d, %d; want %d, %d", tt.total, d, c, tt.dirty, tt.counted)
			}
		})
	}
}

func TestCountDirtyMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		n := r.IntN(300)
		b := make(Bits, n)
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		total := uint64(r.IntN(n*8 + 20))
		want := total
		if want > uint64(n)*8 {
			want = uint64(n) * 8
		}
		d, c := b.CountDirty(total)
		if c != want || d != naiveDirty(b, want) {
			t.Fatalf("len %d total %d: got %d,%d want %d,%d", n, total, d, c, naiveDirty(b, want), want)
		}
	}
}

func TestExamineCounts(t *testing.T) {
	h := goodHeader() // 1 GiB / 64 MiB = 16 chunks
	area := NewArea(h, 0xff, 4096)
	if total, dirty := ExamineCounts(h, area); total != 16 || dirty != 16 {
		t.Errorf("fresh area: %d bits %d dirty, want 16 16", total, dirty)
	}
	BitsOf(area).Clear(3)
	BitsOf(area)[1] = 0
	if total, dirty := ExamineCounts(h, area); total != 16 || dirty != 7 {
		t.Errorf("after clearing: %d bits %d dirty, want 16 7", total, dirty)
	}
	if total, dirty := ExamineCounts(h, area[:HeaderSize+1]); total != 8 || dirty != 7 {
		t.Errorf("truncated: %d bits %d dirty, want 8 7", total, dirty)
	}
	z := *h
	z.ChunkSize = 0
	if total, dirty := ExamineCounts(&z, area); total != 0 || dirty != 0 {
		t.Errorf("chunksize 0: %d %d, want 0 0", total, dirty)
	}
	z = *h
	z.SyncSize = 0
	if total, dirty := ExamineCounts(&z, area); total != 0 || dirty != 0 {
		t.Errorf("sync_size 0: %d %d, want 0 0", total, dirty)
	}
	// 1 TB member (976630464 sectors) with 64 MiB chunks.
	big := &Header{Magic: Magic, Version: 4, SyncSize: 976630464, ChunkSize: 64 << 20}
	if got := big.Chunks(); got != 7452 {
		t.Errorf("Chunks = %d, want 7452", got)
	}
	if got := big.Bytes(); got != 256+932 {
		t.Errorf("Bytes = %d, want %d", got, 256+932)
	}
}

func TestPageHelpers(t *testing.T) {
	tests := []struct {
		chunk, page, bit, byteOff uint64
	}{
		{0, 0, 2048, 256},
		{7, 0, 2055, 256},
		{8, 0, 2056, 257},
		{30719, 0, 32767, 4095},
		{30720, 1, 0, 4096},
		{30720 + 32768, 2, 0, 8192},
		{30720 + 32767, 1, 32767, 8191},
	}
	for _, tt := range tests {
		if got := PageOf(tt.chunk); got != tt.page {
			t.Errorf("PageOf(%d) = %d, want %d", tt.chunk, got, tt.page)
		}
		if got := BitInPage(tt.chunk); got != tt.bit {
			t.Errorf("BitInPage(%d) = %d, want %d", tt.chunk, got, tt.bit)
		}
		if got := ByteOf(tt.chunk); got != tt.byteOff {
			t.Errorf("ByteOf(%d) = %d, want %d", tt.chunk, got, tt.byteOff)
		}
		// Consistency: page*4096 + bit/8 is the byte.
		if PageOf(tt.chunk)*PageSize+BitInPage(tt.chunk)/8 != ByteOf(tt.chunk) {
			t.Errorf("chunk %d: page/bit and byte disagree", tt.chunk)
		}
	}
	for _, c := range []struct{ bytes, pages uint64 }{{256, 1}, {4096, 1}, {4097, 2}, {40256, 10}, {8192, 2}} {
		if got := FilePages(c.bytes); got != c.pages {
			t.Errorf("FilePages(%d) = %d, want %d", c.bytes, got, c.pages)
		}
	}
}

func BenchmarkCountDirty(b *testing.B) {
	bits := make(Bits, 128<<10) // the largest default bitmap: 128 KiB
	for i := range bits {
		bits[i] = byte(i * 7)
	}
	total := bits.Len() - 3
	b.SetBytes(int64(len(bits)))
	for b.Loop() {
		bits.CountDirty(total)
	}
}
