package bitmap

import (
	"bytes"
	"testing"
)

func TestAreaAlign(t *testing.T) {
	for _, c := range []struct {
		off  int32
		want int
	}{{8, 4096}, {-16, 4096}, {2, 512}, {-88, 4096}, {-79, 512}, {0, 4096}} {
		if got := AreaAlign(c.off); got != c.want {
			t.Errorf("AreaAlign(%d) = %d, want %d", c.off, got, c.want)
		}
	}
}

func TestNewArea(t *testing.T) {
	h := goodHeader() // 16 chunks: 258 bytes
	hdr := h.Marshal()
	ones := func(n int) []byte { return bytes.Repeat([]byte{0xff}, n) }
	tests := []struct {
		name  string
		mod   func(h *Header)
		fill  byte
		align int
		want  []byte
	}{
		{name: "4 KiB aligned", fill: 0xff, align: 4096, want: append(append([]byte{}, hdr...), ones(4096-256)...)},
		{name: "512 aligned", fill: 0xff, align: 512, want: append(append([]byte{}, hdr...), ones(512-256)...)},
		{name: "fill 0", fill: 0, align: 512, want: append(append([]byte{}, hdr...), make([]byte, 256)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NewArea(h, tt.fill, tt.align)
			if !bytes.Equal(got, tt.want) {
				t.Fatalf("got %d bytes, want %d; first diff at %d", len(got), len(tt.want), firstDiff(got, tt.want))
			}
		})
	}

	// A bitmap of exactly 4096 bytes gets no padding; one more byte gets a page.
	e := *h
	e.ChunkSize = 512
	e.SyncSize = (4096 - 256) * 8 // chunks = (4096-256)*8 -> 3840 bytes of bits
	if n := len(NewArea(&e, 0xff, 4096)); n != 4096 {
		t.Errorf("exact page: %d bytes, want 4096", n)
	}
	e.SyncSize++
	if n := len(NewArea(&e, 0xff, 4096)); n != 8192 {
		t.Errorf("page plus one bit: %d bytes, want 8192", n)
	}
	if n := len(NewArea(&e, 0xff, 512)); n != 4608 {
		t.Errorf("page plus one bit, 512 aligned: %d bytes, want 4608", n)
	}
}

func TestNewAreaClustered(t *testing.T) {
	h := goodHeader()
	h.Version = VersionClustered
	h.Nodes = 3
	got := NewArea(h, 0xff, 4096)
	if len(got) != 3*4096 {
		t.Fatalf("len %d, want %d", len(got), 3*4096)
	}
	hdr := h.Marshal()
	for i := 0; i < 3; i++ {
		node := got[i*4096 : (i+1)*4096]
		if !bytes.Equal(node[:256], hdr) {
			t.Errorf("node %d: header differs", i)
		}
		want := byte(0)
		if i == 0 {
			want = 0xff
		}
		for j, c := range node[256:] {
			if c != want {
				t.Fatalf("node %d byte %d = %#x, want %#x", i, 256+j, c, want)
			}
		}
	}
	// nodes == 1 is one area, like nodes == 0.
	h.Nodes = 1
	if n := len(NewArea(h, 0xff, 4096)); n != 4096 {
		t.Errorf("nodes=1: %d bytes", n)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
