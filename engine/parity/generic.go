package parity

import "encoding/binary"

// Portable word-at-a-time kernels. They handle the bytes the SIMD kernels
// leave over and are the whole implementation where no SIMD kernel exists.
// Work goes in blocks of genBlock bytes accumulated on the stack, so dst
// may alias a source.

const genBlock = 256

const (
	lowBits  = 0x7f7f7f7f7f7f7f7f
	highBits = 0x0101010101010101
)

// mul2w multiplies each byte of w by {02} in GF(2^8) mod 0x11d.
func mul2w(w uint64) uint64 {
	return (w&lowBits)<<1 ^ (w>>7&highBits)*0x1d
}

func mul2b(b byte) byte {
	if b&0x80 != 0 {
		return b<<1 ^ 0x1d
	}
	return b << 1
}

// usable reports whether source i takes part (non-nil, not skipped).
func usable(srcs [][]byte, i, skipA, skipB int) bool {
	return srcs[i] != nil && i != skipA && i != skipB
}

// xorGeneric sets dst[off:n] to the XOR of the usable srcs and extra (if
// non-nil) over the same range.
func xorGeneric(dst []byte, srcs [][]byte, skip int, extra []byte, off, n int) {
	var acc [genBlock / 8]uint64
	for off < n {
		end := min(off+genBlock, n)
		words := (end - off) / 8
		clear(acc[:words])
		tail := off + words*8
		var tailAcc [8]byte
		add := func(s []byte) {
			s = s[off:end]
			for w := 0; w < words; w++ {
				acc[w] ^= binary.LittleEndian.Uint64(s[w*8:])
			}
			for i := words * 8; i < len(s); i++ {
				tailAcc[i-words*8] ^= s[i]
			}
		}
		if extra != nil {
			add(extra)
		}
		for i := range srcs {
			if usable(srcs, i, skip, -1) {
				add(srcs[i])
			}
		}
		d := dst[off:end]
		for w := 0; w < words; w++ {
			binary.LittleEndian.PutUint64(d[w*8:], acc[w])
		}
		copy(dst[tail:end], tailAcc[:end-tail])
		off = end
	}
}

// genPQGeneric computes P (when p is non-nil) and Q over [off, n) by
// Horner's rule from source top (which must be usable) down to 0.
func genPQGeneric(p, q []byte, data [][]byte, top, skipA, skipB, off, n int) {
	var accP, accQ [genBlock / 8]uint64
	for off < n {
		end := min(off+genBlock, n)
		words := (end - off) / 8
		nb := end - off
		var tp, tq [8]byte
		tail := words * 8
		s := data[top][off:end]
		for w := 0; w < words; w++ {
			v := binary.LittleEndian.Uint64(s[w*8:])
			accP[w], accQ[w] = v, v
		}
		for i := tail; i < nb; i++ {
			tp[i-tail], tq[i-tail] = s[i], s[i]
		}
		for z := top - 1; z >= 0; z-- {
			if !usable(data, z, skipA, skipB) {
				for w := 0; w < words; w++ {
					accQ[w] = mul2w(accQ[w])
				}
				for i := range nb - tail {
					tq[i] = mul2b(tq[i])
				}
				continue
			}
			s := data[z][off:end]
			for w := 0; w < words; w++ {
				v := binary.LittleEndian.Uint64(s[w*8:])
				accP[w] ^= v
				accQ[w] = mul2w(accQ[w]) ^ v
			}
			for i := tail; i < nb; i++ {
				tp[i-tail] ^= s[i]
				tq[i-tail] = mul2b(tq[i-tail]) ^ s[i]
			}
		}
		if p != nil {
			d := p[off:end]
			for w := 0; w < words; w++ {
				binary.LittleEndian.PutUint64(d[w*8:], accP[w])
			}
			copy(d[tail:], tp[:nb-tail])
		}
		d := q[off:end]
		for w := 0; w < words; w++ {
			binary.LittleEndian.PutUint64(d[w*8:], accQ[w])
		}
		copy(d[tail:], tq[:nb-tail])
		off = end
	}
}
