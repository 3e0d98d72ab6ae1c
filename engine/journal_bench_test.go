package engine

import (
	"testing"
	"time"
)

// BenchmarkJournal writes a raid5 and a raid6 with a write journal and the
// same array without one, side by side in alternating batches: full
// stripes in sequence (256K, a multiple of the stripe) and 4 KiB at
// random. The journal doubles what goes to the devices (every page goes
// to the log first) and adds a flush of the journal per request (one per
// batch of concurrent requests): x_plain is the journaled array's time
// over the plain one's (memory devices, so this is the CPU cost: page
// checksums, meta blocks, the copy into the log write).
func BenchmarkJournal(b *testing.B) {
	for _, base := range []spec{
		{level: "raid5", n: 5, chunkKiB: 64, devMiB: []int{64}},
		{level: "raid6", n: 6, chunkKiB: 64, devMiB: []int{64}},
	} {
		for _, op := range []benchOp{{name: "seq256k", size: 256 << 10, write: true}, {name: "rand4k", size: 4 << 10, write: true, rand: true}} {
			b.Run(base.level+"/"+op.name, func(b *testing.B) {
				plain, _ := benchArray(b, base)
				defer plain.Close()
				js := base
				js.journal = true
				jnl, _ := benchArray(b, js)
				defer jnl.Close()
				if jnl.jnl == nil {
					b.Fatal("no journal")
				}
				p := make([]byte, op.size)
				s0, s1 := newOpStream(op, plain.Size()), newOpStream(op, jnl.Size())
				const batch = 16
				var tPlain, tJnl time.Duration
				var ratios []float64
				b.SetBytes(op.size)
				b.ResetTimer()
				for done, round := 0, 0; done < b.N; done, round = done+batch, round+1 {
					n := min(batch, b.N-done)
					var t0, t1 time.Duration
					for side := 0; side < 2; side++ {
						start := time.Now()
						if (side == 0) == (round%2 == 0) {
							if err := s0.run(n, p, arrayRW(plain)); err != nil {
								b.Fatal(err)
							}
							t0 = time.Since(start)
						} else {
							if err := s1.run(n, p, arrayRW(jnl)); err != nil {
								b.Fatal(err)
							}
							t1 = time.Since(start)
						}
					}
					tPlain += t0
					tJnl += t1
					ratios = append(ratios, float64(t1)/float64(t0))
				}
				b.ReportMetric(median(ratios), "x_plain")
				b.ReportMetric(float64(int64(b.N)*op.size)/tJnl.Seconds()/1e6, "MB/s")
				b.ReportMetric(float64(int64(b.N)*op.size)/tPlain.Seconds()/1e6, "plain_MB/s")
			})
		}
	}
}
