package parity

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/reedsolomon"
)

// Benchmarks report bytes/s of data (k × block size per op). Each shape
// also runs two baselines on the same buffers: klauspost/reedsolomon's
// encoder with a custom matrix producing exactly P (row of ones) or P and
// Q (rows of ones and g^i), once with its default options ("klauspost",
// which may split large blocks over goroutines) and once restricted to one
// goroutine ("klauspost-1g", the like-for-like comparison with our
// single-threaded kernels).

var benchShapes = []struct{ k, n int }{
	{4, 4 << 10}, {4, 64 << 10}, {10, 64 << 10}, {10, 1 << 20},
}

func shapeName(k, n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("k=%d/%dMiB", k, n>>20)
	}
	return fmt.Sprintf("k=%d/%dKiB", k, n>>10)
}

// loop runs f b.N times and, besides the wall-clock MB/s, reports
// "cpuMB/s": bytes per second of process CPU time. On a loaded machine
// wall-clock rates swing with scheduling; CPU-time rates stay comparable
// (a kernel that uses several goroutines is charged for all of them).
func loop(b *testing.B, bytesPerOp int, f func()) {
	b.SetBytes(int64(bytesPerOp))
	c0 := processCPU()
	for b.Loop() {
		f()
	}
	if cpu := processCPU() - c0; cpu > 0 {
		b.ReportMetric(float64(bytesPerOp)*float64(b.N)/cpu.Seconds()/1e6, "cpuMB/s")
	}
}

func benchEncoder(b *testing.B, rows [][]byte, k, goroutines int) reedsolomon.Encoder {
	opts := []reedsolomon.Option{reedsolomon.WithCustomMatrix(rows)}
	if goroutines > 0 {
		opts = append(opts, reedsolomon.WithMaxGoroutines(goroutines))
	}
	enc, err := reedsolomon.New(k, len(rows), opts...)
	if err != nil {
		b.Fatal(err)
	}
	return enc
}

func BenchmarkP(b *testing.B) {
	for _, s := range benchShapes {
		r := rand.New(rand.NewPCG(1, uint64(s.n)))
		shards := randBlocks(r, s.k+1, s.n, 0)
		ones := make([]byte, s.k)
		for i := range ones {
			ones[i] = 1
		}
		b.Run(shapeName(s.k, s.n)+"/mdtool", func(b *testing.B) {
			loop(b, s.k*s.n, func() { Xor(shards[s.k], shards[:s.k]) })
		})
		for _, g := range []int{0, 1} {
			name := "/klauspost"
			if g == 1 {
				name += "-1g"
			}
			b.Run(shapeName(s.k, s.n)+name, func(b *testing.B) {
				enc := benchEncoder(b, [][]byte{ones}, s.k, g)
				loop(b, s.k*s.n, func() {
					if err := enc.Encode(shards); err != nil {
						b.Fatal(err)
					}
				})
			})
		}
	}
}

func BenchmarkPQ(b *testing.B) {
	for _, s := range benchShapes {
		r := rand.New(rand.NewPCG(2, uint64(s.n)))
		shards := randBlocks(r, s.k+2, s.n, 0)
		rows := [][]byte{make([]byte, s.k), make([]byte, s.k)}
		for i := range rows[0] {
			rows[0][i], rows[1][i] = 1, Coef(i)
		}
		b.Run(shapeName(s.k, s.n)+"/mdtool", func(b *testing.B) {
			loop(b, s.k*s.n, func() { GenPQ(shards[s.k], shards[s.k+1], shards[:s.k]) })
		})
		for _, g := range []int{0, 1} {
			name := "/klauspost"
			if g == 1 {
				name += "-1g"
			}
			b.Run(shapeName(s.k, s.n)+name, func(b *testing.B) {
				enc := benchEncoder(b, rows, s.k, g)
				loop(b, s.k*s.n, func() {
					if err := enc.Encode(shards); err != nil {
						b.Fatal(err)
					}
				})
			})
		}
	}
}

// BenchmarkRecover2 rebuilds two data blocks of a stripe.
func BenchmarkRecover2(b *testing.B) {
	for _, s := range benchShapes {
		r := rand.New(rand.NewPCG(3, uint64(s.n)))
		data := randBlocks(r, s.k, s.n, 0)
		p, q := make([]byte, s.n), make([]byte, s.n)
		GenPQ(p, q, data)
		b.Run(shapeName(s.k, s.n), func(b *testing.B) {
			loop(b, s.k*s.n, func() {
				if err := Recover(data, p, q, 0, s.k-1); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
