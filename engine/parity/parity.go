// Package parity computes and repairs Linux md RAID parity: the XOR parity
// P of raid4/5/6 and the raid6 syndrome Q, byte-identical to the kernel.
//
// Q is computed over GF(2^8) with the reduction polynomial
// x^8+x^4+x^3+x^2+1 (0x11d) and generator {02}: Q = ⊕ g^i·D_i, where i is
// the block's syndrome slot (lib/raid6, drivers/md/raid5.c). Callers pass
// the data blocks of a stripe in slot order (layout.Row.Syndrome gives the
// member for every slot); a nil entry is an all-zero block, which is how
// DDF layouts treat the P and Q positions.
//
// All functions work on caller-owned buffers and do not allocate. On amd64
// they use AVX2, or AVX-512 with GFNI, for the bulk of each block; the rest
// is done a 64-bit word at a time. Blocks of any length are accepted.
// The functions are safe for concurrent use on distinct buffers.
package parity

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/klauspost/reedsolomon"
)

// Pseudo-indices naming the parity blocks in Recover's lost list.
const (
	P = -1
	Q = -2
)

// ErrRecover reports a Recover request that cannot be satisfied.
var ErrRecover = errors.New("parity: cannot recover")

// GF(2^8) tables for generator {02}, polynomial 0x11d. They are built by
// a variable initializer (not init) so that other package-level variables
// may depend on them.
var gfExp, gfLog = gfTables()

// gfTables returns exp (g^i, doubled to skip a modulo) and log tables.
func gfTables() (exp [510]byte, log [256]int) {
	x := byte(1)
	for i := 0; i < 255; i++ {
		exp[i] = x
		exp[i+255] = x
		log[x] = i
		x = mul2b(x)
	}
	return exp, log
}

// Coef returns g^slot, the Q coefficient of syndrome slot slot.
func Coef(slot int) byte { return gfExp[slot%255] }

// Mul returns a·b in GF(2^8).
func Mul(a, b byte) byte {
	if a == 0 || b == 0 {
		return 0
	}
	return gfExp[gfLog[a]+gfLog[b]]
}

// Inv returns the multiplicative inverse of a (a must not be 0).
func Inv(a byte) byte {
	if a == 0 {
		panic("parity: inverse of 0")
	}
	return gfExp[255-gfLog[a]]
}

var lowLevel reedsolomon.LowLevel

// MulSlice sets dst[i] = c·src[i] for i < len(src) (SIMD, klauspost).
// dst may be src.
func MulSlice(c byte, src, dst []byte) { lowLevel.GalMulSlice(c, src, dst) }

// MulSliceXor sets dst[i] ^= c·src[i] for i < len(src) (SIMD, klauspost).
// With c = Coef(slot) this folds a data delta into Q for a
// read-modify-write.
func MulSliceXor(c byte, src, dst []byte) { lowLevel.GalMulSliceXor(c, src, dst) }

func checkLen(what string, b []byte, n int) {
	if len(b) < n {
		panic(fmt.Sprintf("parity: %s is %d bytes, need %d", what, len(b), n))
	}
}

func checkSrcs(srcs [][]byte, n int) {
	for i, s := range srcs {
		if s != nil && len(s) < n {
			panic(fmt.Sprintf("parity: source %d is %d bytes, need %d", i, len(s), n))
		}
	}
}

// Xor sets dst to the XOR of srcs over len(dst) bytes: the raid4/5 (and
// raid6) P block. Nil entries are zero blocks; every other source must be
// at least len(dst) bytes. dst may be one of srcs.
func Xor(dst []byte, srcs [][]byte) {
	checkSrcs(srcs, len(dst))
	xorBlocks(dst, srcs, -1, nil, false)
}

// GenPQ computes the raid6 syndromes of data, which is in slot order:
// p = ⊕ data[i], q = ⊕ g^i·data[i], over len(q) bytes. p may be nil to
// compute only Q. Nil data entries are zero blocks; the others must be at
// least len(q) bytes and must not overlap p or q.
func GenPQ(p, q []byte, data [][]byte) {
	if p != nil {
		checkLen("P", p, len(q))
	}
	checkSrcs(data, len(q))
	genPQ(p, q, data, -1, -1, false)
}

// XorStream is Xor with non-temporal stores where the CPU has them and
// dst is aligned to the vector size: dst bypasses the caches, for
// destinations that will not be read again soon. The engine does not use
// it at present. The result is the same as Xor's.
func XorStream(dst []byte, srcs [][]byte) {
	checkSrcs(srcs, len(dst))
	xorBlocks(dst, srcs, -1, nil, true)
}

// GenPQStream is GenPQ with non-temporal stores for p and q (see
// XorStream). The result is the same as GenPQ's.
func GenPQStream(p, q []byte, data [][]byte) {
	if p != nil {
		checkLen("P", p, len(q))
	}
	checkSrcs(data, len(q))
	genPQ(p, q, data, -1, -1, true)
}

// Recover rebuilds lost blocks of one stripe in place. data is in slot
// order (as for GenPQ); lost lists the blocks to rebuild: slot indices of
// data, P or Q. The lost buffers are overwritten; all other blocks must
// hold valid contents. Block length is that of the first lost buffer; all
// buffers involved must be at least that long.
//
// raid4/5 (q == nil): one lost block, data or P.
// raid6: up to two lost blocks in any combination (data+data, data+P,
// data+Q, P+Q).
func Recover(data [][]byte, p, q []byte, lost ...int) error {
	if len(lost) == 0 {
		return nil
	}
	if len(lost) > 2 || (q == nil && len(lost) > 1) {
		return fmt.Errorf("%w: %d lost blocks", ErrRecover, len(lost))
	}
	var x, y = -1, -1 // lost data slots
	var lostP, lostQ bool
	for i, l := range lost {
		for _, m := range lost[:i] {
			if m == l {
				return fmt.Errorf("%w: block %d listed twice", ErrRecover, l)
			}
		}
		switch {
		case l == P:
			if p == nil {
				return fmt.Errorf("%w: no P buffer", ErrRecover)
			}
			lostP = true
		case l == Q:
			if q == nil {
				return fmt.Errorf("%w: no Q buffer", ErrRecover)
			}
			lostQ = true
		case l >= 0 && l < len(data) && data[l] != nil:
			if x < 0 {
				x = l
			} else {
				y = l
			}
		default:
			return fmt.Errorf("%w: bad lost block %d", ErrRecover, l)
		}
	}
	var n int
	switch {
	case x >= 0:
		n = len(data[x])
	case lostP:
		n = len(p)
	default:
		n = len(q)
	}
	checkSrcs(data, n)
	if p != nil {
		checkLen("P", p, n)
	}
	if q != nil {
		checkLen("Q", q, n)
	}
	p, q = sub(p, n), sub(q, n)

	switch {
	case x < 0: // only parity lost
		if lostP && !lostQ {
			xorBlocks(p, data, -1, nil, false)
		} else if lostP {
			genPQ(p, q, data, -1, -1, false)
		} else {
			genPQ(nil, q, data, -1, -1, false)
		}
	case y < 0 && !lostP: // one data block from P
		xorBlocks(data[x][:n], data, x, p, false)
		if lostQ {
			genPQ(nil, q, data, -1, -1, false)
		}
	case y < 0: // data + P: data from Q, then P
		dx := data[x][:n]
		genPQ(nil, dx, data, x, -1, false) // Q without D_x
		xorInto(dx, q)                     // g^x·D_x
		MulSlice(Inv(Coef(x)), dx, dx)
		xorBlocks(p, data, -1, nil, false)
	default: // two data blocks
		dx, dy := data[x][:n], data[y][:n]
		genPQ(dy, dx, data, x, y, false) // P and Q without D_x, D_y
		xorInto(dy, p)                   // Pxy = D_x ⊕ D_y
		xorInto(dx, q)                   // Qxy = g^x·D_x ⊕ g^y·D_y
		gy := Coef(y)
		b := Inv(Coef(x) ^ gy)
		MulSlice(b, dx, dx)             // b·Qxy
		MulSliceXor(Mul(gy, b), dy, dx) // ⊕ g^y·b·Pxy = D_x
		xorInto(dy, dx)                 // D_y = Pxy ⊕ D_x
	}
	return nil
}

func sub(b []byte, n int) []byte {
	if b == nil {
		return nil
	}
	return b[:n]
}

// xorInto sets dst ^= src over len(dst).
func xorInto(dst, src []byte) {
	srcs := [1][]byte{dst}
	xorBlocks(dst, srcs[:], -1, src, false)
}

// xorBlocks sets dst to the XOR of srcs (nil entries and index skip left
// out) and extra (if non-nil). Lengths are checked by the caller.
func xorBlocks(dst []byte, srcs [][]byte, skip int, extra []byte, stream bool) {
	n := len(dst)
	if n == 0 {
		return
	}
	done := 0
	if len(srcs) > 0 {
		done = xorSIMD(dst, srcs, skip, extra, stream)
	}
	if done < n {
		xorGeneric(dst, srcs, skip, extra, done, n)
	}
}

// genPQ computes P (if p != nil) and Q over len(q) bytes, leaving out data
// entries skipA and skipB.
func genPQ(p, q []byte, data [][]byte, skipA, skipB int, stream bool) {
	n := len(q)
	if n == 0 {
		return
	}
	top := -1
	for i := len(data) - 1; i >= 0; i-- {
		if usable(data, i, skipA, skipB) {
			top = i
			break
		}
	}
	if top < 0 {
		clear(q)
		if p != nil {
			clear(p[:n])
		}
		return
	}
	done := genPQSIMD(p, q, data, top, skipA, skipB, stream)
	if done < n {
		genPQGeneric(p, q, data, top, skipA, skipB, done, n)
	}
}

// addrOf returns the address of b's first byte (0 for a nil slice).
func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// ptr returns the address of b's first byte, or nil for a nil slice.
func ptr(b []byte) *byte {
	if b == nil {
		return nil
	}
	return unsafe.SliceData(b)
}

// affineMatrix returns the GF2P8AFFINEQB bit matrix of multiplication by c
// modulo 0x11d: byte 7-i of the qword selects the input bits that make
// output bit i.
func affineMatrix(c byte) uint64 {
	var m uint64
	for i := 0; i < 8; i++ { // output bit
		var row byte
		for j := 0; j < 8; j++ { // input bit
			if Mul(c, 1<<j)>>i&1 != 0 {
				row |= 1 << j
			}
		}
		m |= uint64(row) << (8 * (7 - i))
	}
	return m
}
