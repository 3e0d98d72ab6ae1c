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
func xorAVX2(dst *byte, srcs *[]byte, nsrc, skip int, extra *byte, n, nt int)

//go:noescape
func xorAVX512(dst *byte, srcs *[]byte, nsrc, skip int, extra *byte, n, nt int)

//go:noescape
func genPQAVX2(p, q *byte, data *[]byte, top, skipA, skipB, n, nt int)

//go:noescape
func genPQAVX512(p, q *byte, data *[]byte, top, skipA, skipB, n int, matrix uint64, nt int)

// ntFlag is the kernels' nt argument: 1 when non-temporal stores were
// asked for and every destination is aligned to the vector size.
func ntFlag(stream bool, align uintptr, dsts ...[]byte) int {
	if !stream {
		return 0
	}
	for _, d := range dsts {
		if d != nil && addrOf(d)%align != 0 {
			return 0
		}
	}
	return 1
}

// xorSIMD processes a prefix of dst and returns its length.
func xorSIMD(dst []byte, srcs [][]byte, skip int, extra []byte, stream bool) int {
	n := len(dst)
	switch {
	case useAVX512 && n >= 256:
		n &^= 255
		xorAVX512(&dst[0], &srcs[0], len(srcs), skip, ptr(extra), n, ntFlag(stream, 64, dst))
	case useAVX2 && n >= 128:
		n &^= 127
		xorAVX2(&dst[0], &srcs[0], len(srcs), skip, ptr(extra), n, ntFlag(stream, 32, dst))
	default:
		return 0
	}
	return n
}

// genPQSIMD processes a prefix of q (and p) and returns its length.
func genPQSIMD(p, q []byte, data [][]byte, top, skipA, skipB int, stream bool) int {
	n := len(q)
	switch {
	case useAVX512 && n >= 256:
		n &^= 255
		genPQAVX512(ptr(p), &q[0], &data[0], top, skipA, skipB, n, mul2Matrix, ntFlag(stream, 64, p, q))
	case useAVX2 && n >= 128:
		n &^= 127
		genPQAVX2(ptr(p), &q[0], &data[0], top, skipA, skipB, n, ntFlag(stream, 32, p, q))
	default:
		return 0
	}
	return n
}
