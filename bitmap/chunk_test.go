package bitmap

import (
	"errors"
	"testing"
)

func TestChooseChunk(t *testing.T) {
	const (
		KiB = 1 << 10
		MiB = 1 << 20
		GiB = 1 << 30
		// sizes in sectors
		s1G   = 2097152
		s8G   = 16777216
		s63T  = 63 << 31
		s64T  = 1 << 37
		s1P   = 1 << 41
		s2P   = 1 << 42
		room  = 256 // 128 KiB: choose_bm_space of a >200 GiB member
		grow  = 2032
		small = 8 // 4 KiB: choose_bm_space of a <= 8 GiB member
	)
	tests := []struct {
		name      string
		room      int64
		size      uint64
		requested uint64
		want      uint64
		err       error
		min       uint64 // for ChunkTooSmallError
	}{
		{name: "1 GiB default", room: room, size: s1G, want: 64 * MiB},
		{name: "tiny device default", room: room, size: 100, want: 64 * MiB},
		{name: "63 TiB still 64 MiB", room: room, size: s63T, want: 64 * MiB},
		{name: "64 TiB gets 128 MiB", room: room, size: s64T, want: 128 * MiB},
		{name: "1 PiB gets 2 GiB", room: room, size: s1P, want: 2 * GiB},
		{name: "2 PiB overflows chunksize", room: room, size: s2P, err: ErrChunkTooLarge},
		{name: "room above 256 capped when unset", room: grow, size: s64T, want: 128 * MiB},
		{name: "4 KiB room, 8 GiB default", room: small, size: s8G, want: 64 * MiB},
		{name: "4 KiB room, 8 GiB, 512 KiB given", room: small, size: s8G, requested: 512 * KiB, want: 512 * KiB},
		{name: "4 KiB room, 8 GiB, 64 KiB too small", room: small, size: s8G, requested: 64 * KiB,
			min: 512 * KiB},
		{name: "given chunk uses the whole room", room: grow, size: s64T, requested: 16 * MiB, want: 16 * MiB},
		{name: "given chunk too small for whole room", room: grow, size: s64T, requested: 8 * MiB, min: 16 * MiB},
		{name: "given 4 KiB on small device", room: room, size: s1G, requested: 4 * KiB, want: 4 * KiB},
		{name: "room 2 (minimum)", room: 2, size: s1G, want: 64 * MiB},
		{name: "room 2, 4 KiB too small", room: 2, size: s1G, requested: 4 * KiB, min: 256 * KiB},
		{name: "room 1", room: 1, size: s1G, err: ErrNoRoom},
		{name: "room 0", room: 0, size: s1G, err: ErrNoRoom},
		{name: "room negative", room: -8, size: s1G, err: ErrNoRoom},
		{name: "requested too large for field", room: room, size: s1G, requested: 4 * GiB, err: ErrChunkTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ChooseChunk(tt.room, tt.size, tt.requested)
			if tt.min != 0 {
				var te *ChunkTooSmallError
				if !errors.As(err, &te) || te.Min != tt.min || te.Requested != tt.requested {
					t.Fatalf("got %d, %v; want ChunkTooSmallError{%d, %d}", got, err, tt.requested, tt.min)
				}
				return
			}
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("got %d, %v; want %v", got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

// The default chunk is the smallest power of two >= 64 MiB whose bits fit
// 128 KiB: check the switch point to 128 MiB exactly.
func TestChooseChunkThreshold(t *testing.T) {
	// bits0 = size/8 + 1; after 14 halvings (64 MiB) it must be <= 1046528.
	// With b0 = m+1, b -> (b+1)/2 fourteen times gives floor(m/16384)+1,
	// so the largest m = size/8 is 16384*1046527 + 16383.
	last := (uint64(16384)*1046527+16383)*8 + 7
	if c, _ := ChooseChunk(256, last, 0); c != 64<<20 {
		t.Errorf("size %d: chunk %d, want 64 MiB", last, c)
	}
	if c, _ := ChooseChunk(256, last+1, 0); c != 128<<20 {
		t.Errorf("size %d: chunk %d, want 128 MiB", last+1, c)
	}
}

func TestChooseSpace(t *testing.T) {
	tests := []struct{ dev, want uint64 }{
		{0, 0},
		{127, 0},
		{128, 8},
		{8 << 21, 8},         // exactly 8 GiB: 8 sectors
		{8<<21 + 8, 8},       // devsize-8 == 8 GiB is not > 8 GiB
		{8<<21 + 9, 128},     // just above
		{200<<21 + 127, 128}, // devsize-128 < 200 GiB
		{200<<21 + 128, 256},
		{1 << 40, 256},
	}
	for _, tt := range tests {
		if got := ChooseSpace(tt.dev); got != tt.want {
			t.Errorf("ChooseSpace(%d) = %d, want %d", tt.dev, got, tt.want)
		}
	}
}

func TestBeforeSuperOffset(t *testing.T) {
	tests := []struct {
		size, chunk uint64
		bbl         int64
		want        int64
	}{
		// 1 GiB, 64 MiB: 17 bits -> 259 bytes -> one 4 KiB block; -8 - 8.
		{2097152, 64 << 20, 8, -16},
		{2097152, 64 << 20, 0, -8},
		// 16 TiB with 64 MiB chunks: 262145 bits -> 32769+256 bytes -> 9 blocks.
		{1 << 35, 64 << 20, 8, -72 - 8},
		{100, 0, 8, 0},
	}
	for _, tt := range tests {
		if got := BeforeSuperOffset(tt.size, tt.chunk, tt.bbl); got != tt.want {
			t.Errorf("BeforeSuperOffset(%d, %d, %d) = %d, want %d", tt.size, tt.chunk, tt.bbl, got, tt.want)
		}
	}
}
