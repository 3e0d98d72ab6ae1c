//go:build !amd64 || purego

package parity

// No SIMD kernels on this platform; the flags exist so tests can iterate
// over kernel choices uniformly.
var useAVX512, useAVX2 = false, false

func xorSIMD(dst []byte, srcs [][]byte, skip int, extra []byte, stream bool) int { return 0 }

func genPQSIMD(p, q []byte, data [][]byte, top, skipA, skipB int, stream bool) int {
	return 0
}
