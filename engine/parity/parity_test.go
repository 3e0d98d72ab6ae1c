package parity

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/reedsolomon"
)

// Reference implementations, a byte at a time.

// refMul multiplies in GF(2^8) mod 0x11d by shift-and-add, independent of
// the package tables.
func refMul(a, b byte) byte {
	var r byte
	for b != 0 {
		if b&1 != 0 {
			r ^= a
		}
		hi := a & 0x80
		a <<= 1
		if hi != 0 {
			a ^= 0x1d
		}
		b >>= 1
	}
	return r
}

func refPow2(i int) byte {
	r := byte(1)
	for ; i > 0; i-- {
		r = refMul(r, 2)
	}
	return r
}

// refPQ computes P and Q as md does (lib/raid6 int.uc, mdadm restripe.c
// qsyndrome): Horner's rule from the highest slot down; nil = zero.
func refPQ(n int, data [][]byte) (p, q []byte) {
	p, q = make([]byte, n), make([]byte, n)
	for j := 0; j < n; j++ {
		var wp, wq byte
		for z := len(data) - 1; z >= 0; z-- {
			wq = refMul(wq, 2)
			if data[z] != nil {
				wp ^= data[z][j]
				wq ^= data[z][j]
			}
		}
		p[j], q[j] = wp, wq
	}
	return p, q
}

// refPQSum computes Q as Σ g^i·D_i, the definition.
func refPQSum(n int, data [][]byte) []byte {
	q := make([]byte, n)
	for i, d := range data {
		if d == nil {
			continue
		}
		c := refPow2(i)
		for j := 0; j < n; j++ {
			q[j] ^= refMul(c, d[j])
		}
	}
	return q
}

// kernels runs f once per kernel implementation available here.
func kernels(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	save512, save2 := useAVX512, useAVX2
	defer func() { useAVX512, useAVX2 = save512, save2 }()
	type k struct {
		name       string
		avx512, a2 bool
	}
	ks := []k{{"generic", false, false}}
	if save2 {
		ks = append(ks, k{"avx2", false, true})
	}
	if save512 {
		ks = append(ks, k{"avx512gfni", true, save2})
	}
	for _, kk := range ks {
		useAVX512, useAVX2 = kk.avx512, kk.a2
		t.Run(kk.name, f)
	}
}

var sizes = []int{0, 1, 7, 8, 9, 63, 64, 65, 127, 128, 129, 255, 256, 257, 383, 512, 4096, 4096 + 77, 65536 + 13}

func randBlocks(r *rand.Rand, k, n int, nilProb float64) [][]byte {
	data := make([][]byte, k)
	for i := range data {
		if r.Float64() < nilProb {
			continue
		}
		data[i] = make([]byte, n)
		for j := range data[i] {
			data[i][j] = byte(r.Uint32())
		}
	}
	return data
}

func TestGF(t *testing.T) {
	if Coef(0) != 1 || Coef(1) != 2 || Coef(8) != 0x1d || Coef(255) != 1 {
		t.Fatalf("Coef: %#x %#x %#x %#x", Coef(0), Coef(1), Coef(8), Coef(255))
	}
	for i := 0; i < 300; i++ {
		if Coef(i) != refPow2(i) {
			t.Fatalf("Coef(%d) = %#x, want %#x", i, Coef(i), refPow2(i))
		}
	}
	for a := 0; a < 256; a++ {
		for b := 0; b < 256; b++ {
			if got, want := Mul(byte(a), byte(b)), refMul(byte(a), byte(b)); got != want {
				t.Fatalf("Mul(%#x, %#x) = %#x, want %#x", a, b, got, want)
			}
		}
		if a != 0 && refMul(byte(a), Inv(byte(a))) != 1 {
			t.Fatalf("Inv(%#x) = %#x is not an inverse", a, Inv(byte(a)))
		}
	}
	// The reference Horner and the definition agree.
	r := rand.New(rand.NewPCG(1, 2))
	data := randBlocks(r, 20, 100, 0.2)
	_, q := refPQ(100, data)
	if !bytes.Equal(q, refPQSum(100, data)) {
		t.Fatal("Horner reference and Σ g^i·D_i disagree")
	}
}

func TestGFNIMatrix(t *testing.T) {
	// Emulate GF2P8AFFINEQB (Intel SDM: bit i of the result is the parity
	// of matrix byte 7-i AND x) with the matrix for {02}.
	m := affineMatrix(2)
	for x := 0; x < 256; x++ {
		var y byte
		for i := 0; i < 8; i++ {
			row := byte(m >> (8 * (7 - i)))
			v := row & byte(x)
			par := byte(0)
			for ; v != 0; v &= v - 1 {
				par ^= 1
			}
			y |= par << i
		}
		if y != refMul(byte(x), 2) {
			t.Fatalf("affine {02}·%#x = %#x, want %#x", x, y, refMul(byte(x), 2))
		}
	}
}

func TestXor(t *testing.T) {
	kernels(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(3, 4))
		for _, k := range []int{1, 2, 3, 4, 5, 8, 13, 32} {
			for _, n := range sizes {
				data := randBlocks(r, k, n, 0.15)
				want, _ := refPQ(n, data)
				got := make([]byte, n)
				for i := range got {
					got[i] = 0xa5
				}
				Xor(got, data)
				if !bytes.Equal(got, want) {
					t.Fatalf("k=%d n=%d: Xor differs from reference", k, n)
				}
				// dst may be one of the sources
				for j := range data {
					if data[j] == nil {
						continue
					}
					cp := make([]byte, n)
					copy(cp, data[j])
					alias := append([][]byte(nil), data...)
					alias[j] = cp
					Xor(cp, alias)
					if !bytes.Equal(cp, want) {
						t.Fatalf("k=%d n=%d: Xor into source %d differs", k, n, j)
					}
					break
				}
			}
		}
	})
}

func TestGenPQ(t *testing.T) {
	kernels(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(5, 6))
		for _, k := range []int{1, 2, 3, 4, 5, 6, 8, 10, 16, 17, 30, 64, 128, 254} {
			for _, n := range sizes {
				if k > 32 && n > 4096 {
					continue
				}
				nilProb := 0.0
				if k > 2 && r.IntN(2) == 0 {
					nilProb = 0.2 // DDF-style zero slots
				}
				data := randBlocks(r, k, n, nilProb)
				wp, wq := refPQ(n, data)
				p, q := make([]byte, n), make([]byte, n)
				GenPQ(p, q, data)
				if !bytes.Equal(p, wp) || !bytes.Equal(q, wq) {
					t.Fatalf("k=%d n=%d nil=%v: GenPQ differs from reference", k, n, nilProb)
				}
				q2 := make([]byte, n)
				GenPQ(nil, q2, data)
				if !bytes.Equal(q2, wq) {
					t.Fatalf("k=%d n=%d: Q-only GenPQ differs", k, n)
				}
			}
		}
	})
}

// TestMatchesKlauspost checks byte-identity with an independent SIMD
// implementation: klauspost's encoder with the matrix rows (1,1,…) and
// (g^0, g^1, …).
func TestMatchesKlauspost(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, k := range []int{1, 3, 4, 10, 20} {
		enc := klauspostPQ(t, k, 0)
		for _, n := range []int{64, 4096, 65536 + 64} {
			shards := randBlocks(r, k+2, n, 0)
			if err := enc.Encode(shards); err != nil {
				t.Fatal(err)
			}
			p, q := make([]byte, n), make([]byte, n)
			GenPQ(p, q, shards[:k])
			if !bytes.Equal(p, shards[k]) || !bytes.Equal(q, shards[k+1]) {
				t.Fatalf("k=%d n=%d: differs from klauspost", k, n)
			}
		}
	}
}

func klauspostPQ(t testing.TB, k, goroutines int) reedsolomon.Encoder {
	rows := [][]byte{make([]byte, k), make([]byte, k)}
	for i := range rows[0] {
		rows[0][i] = 1
		rows[1][i] = Coef(i)
	}
	opts := []reedsolomon.Option{reedsolomon.WithCustomMatrix(rows)}
	if goroutines > 0 {
		opts = append(opts, reedsolomon.WithMaxGoroutines(goroutines))
	}
	enc, err := reedsolomon.New(k, 2, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

// lostSets lists every lost combination for k data slots.
func lostSets(k int, raid6 bool) [][]int {
	var sets [][]int
	blocks := []int{P}
	if raid6 {
		blocks = append(blocks, Q)
	}
	for i := 0; i < k; i++ {
		blocks = append(blocks, i)
	}
	for i, a := range blocks {
		sets = append(sets, []int{a})
		if raid6 {
			for _, b := range blocks[i+1:] {
				sets = append(sets, []int{a, b}, []int{b, a})
			}
		}
	}
	return sets
}

func TestRecover(t *testing.T) {
	kernels(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(9, 10))
		for _, raid6 := range []bool{false, true} {
			for _, k := range []int{1, 2, 3, 4, 7, 12} {
				for _, n := range []int{1, 9, 64, 200, 256, 1000, 4096 + 5} {
					nilProb := 0.0
					if raid6 && k > 3 {
						nilProb = 0.2
					}
					data := randBlocks(r, k, n, nilProb)
					wp, wq := refPQ(n, data)
					for _, lost := range lostSets(k, raid6) {
						if skipNil(data, lost) {
							continue
						}
						p := append([]byte(nil), wp...)
						var q []byte
						if raid6 {
							q = append([]byte(nil), wq...)
						}
						d := make([][]byte, k)
						for i := range data {
							if data[i] != nil {
								d[i] = append([]byte(nil), data[i]...)
							}
						}
						for _, l := range lost {
							garbage(r, block(d, p, q, l))
						}
						if err := Recover(d, p, q, lost...); err != nil {
							t.Fatalf("raid6=%v k=%d n=%d lost %v: %v", raid6, k, n, lost, err)
						}
						for i := range data {
							if !bytes.Equal(d[i], data[i]) {
								t.Fatalf("raid6=%v k=%d n=%d lost %v: data %d wrong", raid6, k, n, lost, i)
							}
						}
						if !bytes.Equal(p, wp) || (raid6 && !bytes.Equal(q, wq)) {
							t.Fatalf("raid6=%v k=%d n=%d lost %v: parity wrong", raid6, k, n, lost)
						}
					}
				}
			}
		}
	})
}

func skipNil(data [][]byte, lost []int) bool {
	for _, l := range lost {
		if l >= 0 && data[l] == nil {
			return true
		}
	}
	return false
}

func block(d [][]byte, p, q []byte, l int) []byte {
	switch l {
	case P:
		return p
	case Q:
		return q
	}
	return d[l]
}

func garbage(r *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

func TestRecoverErrors(t *testing.T) {
	data := [][]byte{make([]byte, 8), nil, make([]byte, 8)}
	p, q := make([]byte, 8), make([]byte, 8)
	for _, tt := range []struct {
		q    []byte
		lost []int
	}{
		{q, []int{0, 2, P}},
		{nil, []int{0, 2}},
		{nil, []int{0, P}},
		{nil, []int{Q}},
		{q, []int{1}},
		{q, []int{3}},
		{q, []int{-3}},
		{q, []int{0, 0}},
	} {
		if err := Recover(data, p, tt.q, tt.lost...); !errors.Is(err, ErrRecover) {
			t.Errorf("Recover(q=%v, lost %v) = %v, want ErrRecover", tt.q != nil, tt.lost, err)
		}
	}
	if err := Recover(data, p, q); err != nil {
		t.Errorf("Recover with nothing lost: %v", err)
	}
}

func TestShortBufferPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"xor": func() { Xor(make([]byte, 10), [][]byte{make([]byte, 9)}) },
		"pq":  func() { GenPQ(make([]byte, 10), make([]byte, 10), [][]byte{make([]byte, 9)}) },
		"p":   func() { GenPQ(make([]byte, 9), make([]byte, 10), [][]byte{make([]byte, 10)}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic on a short buffer", name)
				}
			}()
			f()
		}()
	}
}

func TestNoAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	data := randBlocks(r, 8, 65536+100, 0)
	p, q := make([]byte, 65536+100), make([]byte, 65536+100)
	GenPQ(p, q, data)
	for name, f := range map[string]func(){
		"Xor":    func() { Xor(p, data) },
		"GenPQ":  func() { GenPQ(p, q, data) },
		"Rec2":   func() { _ = Recover(data, p, q, 2, 5) },
		"RecDP":  func() { _ = Recover(data, p, q, 3, P) },
		"RecD":   func() { _ = Recover(data, p, q, 1) },
		"RecDQ":  func() { _ = Recover(data, p, q, Q, 6) },
		"Mul":    func() { MulSliceXor(7, data[0], data[1]) },
		"XorInt": func() { xorInto(p, q) },
	} {
		if a := testing.AllocsPerRun(20, f); a != 0 {
			t.Errorf("%s allocates %v times per call", name, a)
		}
	}
}

func FuzzRecover(f *testing.F) {
	f.Add(uint8(4), uint16(300), int8(0), int8(2), uint64(1))
	f.Add(uint8(10), uint16(4096), int8(P), int8(Q), uint64(2))
	f.Add(uint8(1), uint16(1), int8(0), int8(P), uint64(3))
	f.Add(uint8(30), uint16(777), int8(29), int8(Q), uint64(4))
	f.Fuzz(func(t *testing.T, k uint8, n uint16, a, b int8, seed uint64) {
		kk := int(k%40) + 1
		nn := int(n % 9000)
		la, lb := int(a), int(b)
		valid := func(l int) bool { return l == P || l == Q || (l >= 0 && l < kk) }
		if !valid(la) || !valid(lb) || la == lb || nn == 0 {
			return
		}
		r := rand.New(rand.NewPCG(seed, uint64(kk)))
		data := randBlocks(r, kk, nn, 0)
		wp, wq := refPQ(nn, data)
		p, q := append([]byte(nil), wp...), append([]byte(nil), wq...)
		d := make([][]byte, kk)
		for i := range data {
			d[i] = append([]byte(nil), data[i]...)
		}
		garbage(r, block(d, p, q, la))
		garbage(r, block(d, p, q, lb))
		if err := Recover(d, p, q, la, lb); err != nil {
			t.Fatal(err)
		}
		for i := range d {
			if !bytes.Equal(d[i], data[i]) {
				t.Fatalf("k=%d n=%d lost %d,%d: data %d wrong", kk, nn, la, lb, i)
			}
		}
		if !bytes.Equal(p, wp) || !bytes.Equal(q, wq) {
			t.Fatalf("k=%d n=%d lost %d,%d: parity wrong", kk, nn, la, lb)
		}
	})
}

func ExampleRecover() {
	d0, d1, d2 := []byte{1, 2}, []byte{3, 4}, []byte{5, 6}
	data := [][]byte{d0, d1, d2}
	p, q := make([]byte, 2), make([]byte, 2)
	GenPQ(p, q, data)
	copy(d0, []byte{0, 0}) // lose two data blocks
	copy(d2, []byte{0, 0})
	_ = Recover(data, p, q, 0, 2)
	fmt.Println(d0, d2)
	// Output: [1 2] [5 6]
}

// TestStream: XorStream and GenPQStream give the same bytes as Xor and
// GenPQ, on destinations aligned to 64 bytes (non-temporal stores) and
// misaligned ones (regular stores), of every size class.
func TestStream(t *testing.T) {
	aligned := func(n, shift int) []byte {
		b := make([]byte, n+128)
		a := int(64-addrOf(b)%64) % 64
		return b[a+shift : a+shift+n : a+shift+n]
	}
	kernels(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(9, 10))
		for _, k := range []int{1, 2, 4, 6, 10} {
			for _, n := range sizes {
				for _, shift := range []int{0, 32, 1} {
					data := randBlocks(r, k, n, 0.1)
					wp, wq := refPQ(n, data)
					x := aligned(n, shift)
					XorStream(x, data)
					if !bytes.Equal(x, wp) {
						t.Fatalf("k=%d n=%d shift=%d: XorStream differs from reference", k, n, shift)
					}
					p, q := aligned(n, shift), aligned(n, shift)
					GenPQStream(p, q, data)
					if !bytes.Equal(p, wp) || !bytes.Equal(q, wq) {
						t.Fatalf("k=%d n=%d shift=%d: GenPQStream differs from reference", k, n, shift)
					}
					q2 := aligned(n, shift)
					GenPQStream(nil, q2, data)
					if !bytes.Equal(q2, wq) {
						t.Fatalf("k=%d n=%d shift=%d: Q-only GenPQStream differs", k, n, shift)
					}
				}
			}
		}
	})
}
