//go:build !purego

package parity

import "golang.org/x/sys/cpu"

// Kernel selection, fixed at start-up.
var (
	useAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512GFNI
	useAVX2   = cpu.X86.HasAVX2
)

// mul2Matrix is the GF2P8AFFINEQB bit matrix of multiplication by {02}.
var mul2Matrix = affineMatrix(2)

//go:noescape
func xorAVX2(dst *byte, srcs *[]byte, nsrc, skip int, extra *byte, n int)

//go:noescape
func xorAVX512(dst *byte, srcs *[]byte, nsrc, skip int, extra *byte, n int)

//go:noescape
func genPQAVX2(p, q *byte, data *[]byte, top, skipA, skipB, n int)

//go:noescape
func genPQAVX512(p, q *byte, data *[]byte, top, skipA, skipB, n int, matrix uint64)

// xorSIMD processes a prefix of dst and returns its length.
func xorSIMD(dst []byte, srcs [][]byte, skip int, extra []byte) int {
	n := len(dst)
	switch {
	case useAVX512 && n >= 256:
		n &^= 255
		xorAVX512(&dst[0], &srcs[0], len(srcs), skip, ptr(extra), n)
	case useAVX2 && n >= 128:
		n &^= 127
		xorAVX2(&dst[0], &srcs[0], len(srcs), skip, ptr(extra), n)
	default:
		return 0
	}
	return n
}

// genPQSIMD processes a prefix of q (and p) and returns its length.
func genPQSIMD(p, q []byte, data [][]byte, top, skipA, skipB int) int {
	n := len(q)
	switch {
	case useAVX512 && n >= 256:
		n &^= 255
		genPQAVX512(ptr(p), &q[0], &data[0], top, skipA, skipB, n, mul2Matrix)
	case useAVX2 && n >= 128:
		n &^= 127
		genPQAVX2(ptr(p), &q[0], &data[0], top, skipA, skipB, n)
	default:
		return 0
	}
	return n
}
