//go:build !purego

package parity

import "testing"

// TestNTFlag: non-temporal stores only when asked for and every
// destination is aligned to the vector size (a misaligned VMOVNTDQ
// faults).
func TestNTFlag(t *testing.T) {
	b := make([]byte, 4096+64)
	a := int(64-addrOf(b)%64) % 64
	al, off32, off1 := b[a:a+1024], b[a+32:a+32+1024], b[a+1:a+1+1024]
	for _, c := range []struct {
		name   string
		stream bool
		align  uintptr
		dsts   [][]byte
		want   int
	}{
		{"aligned", true, 64, [][]byte{al}, 1},
		{"not asked", false, 64, [][]byte{al}, 0},
		{"32 of 64", true, 64, [][]byte{off32}, 0},
		{"32 of 32", true, 32, [][]byte{off32}, 1},
		{"one of two misaligned", true, 64, [][]byte{al, off1}, 0},
		{"nil P", true, 64, [][]byte{nil, al}, 1},
	} {
		if got := ntFlag(c.stream, c.align, c.dsts...); got != c.want {
			t.Errorf("%s: ntFlag = %d, want %d", c.name, got, c.want)
		}
	}
}
