package wib

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"mdtool/bitmap"
	"mdtool/internal/membermodel"
)

// modelTarget writes the bitmap to modelled members (write + sync).
type modelTarget struct {
	ms    []*membermodel.Member
	geoms []MemberGeom
}

func (m *modelTarget) Members() []MemberGeom { return m.geoms }

func (m *modelTarget) WriteBitmap(i int, off int64, p []byte) error {
	if _, err := m.ms[i].WriteAt(p, m.geoms[i].BitmapStart+off); err != nil {
		return err
	}
	return m.ms[i].Sync()
}

// BenchmarkRAID10BitmapFlush reproduces the 2023 md result ("md: Use
// optimal I/O size for last bitmap page", Jon Derrick: RAID10, 4 KiB random
// writes, 1,676 -> 15.7k IOPS once bitmap writes stopped being sub-4K
// read-modify-writes on the NVMe drives) with modelled members
// (internal/membermodel: 512-byte logical blocks, 4 KiB atomic unit,
// NVMe-like latencies).
//
// A 4-member RAID10 (near 2, 512 KiB chunks, 1 GiB members) with a 16 KiB
// bitmap chunk (130944 bits, five bitmap pages, the last one partial) or a
// 1 MiB one (a single 512-byte bitmap page: every flush is the last page,
// the case the kernel patch fixed). Every op is a 4 KiB random write; the daemon runs every 64 ops (5 s of
// fake time), so almost every write lands in a chunk whose bit is clear
// and needs a bitmap flush on all four members before the data goes to
// its two mirrors. Variants:
//
//   - whole-page, lbs512: what Linux 6.1 does (full pages, the last page
//     rounded to the logical block only);
//   - whole-page, io_opt4096: Linux >= 6.4 (last page rounded to io_opt);
//   - sub-page, lbs512: only the changed 512-byte blocks (RMW every time);
//   - sub-page, io_opt4096: changed blocks widened to io_opt (mdtool).
//
// Metrics: iops_model (ops / the busiest member's modelled time),
// bytes/flush (all members; /4 per member), rmw_ops/op, flushes/op.
func BenchmarkRAID10BitmapFlush(b *testing.B) {
	for _, g := range []struct {
		name  string
		chunk uint32
	}{
		{"pages=5", 16 << 10}, // 130944 bits: 16624 bytes
		{"pages=1", 1 << 20},  // 2046 bits: 512 bytes, a single partial page
	} {
		for _, v := range []struct {
			name string
			sub  bool
			io   uint32
		}{
			{"whole-page/lbs512", false, 0},
			{"whole-page/io_opt4096", false, 4096},
			{"sub-page/lbs512", true, 0},
			{"sub-page/io_opt4096", true, 4096},
		} {
			b.Run(g.name+"/"+v.name, func(b *testing.B) { benchRAID10(b, g.chunk, v.sub, v.io) })
		}
	}
}

func benchRAID10(b *testing.B, chunk uint32, sub bool, ioOpt uint32) {
	const (
		members    = 4
		memberSize = 1 << 30
		dataOff    = 1 << 20
		raidChunk  = 512 << 10
		tickEvery  = 64
	)
	arrayBytes := int64(members * (memberSize - dataOff) / 2)
	h := testHeader(uint64(arrayBytes/512), chunk)
	if h.Bytes()%bitmap.PageSize == 0 {
		b.Fatalf("bitmap of %d bytes: want the last page partial", h.Bytes())
	}
	tgt := &modelTarget{}
	for i := 0; i < members; i++ {
		m, err := membermodel.New(membermodel.NVMe(memberSize))
		if err != nil {
			b.Fatal(err)
		}
		tgt.ms = append(tgt.ms, m)
		tgt.geoms = append(tgt.geoms, MemberGeom{Index: i, LogicalBlock: 512, PhysicalBlock: 512,
			IOOpt: ioOpt, BitmapStart: 8192, Limit: dataOff})
	}
	clk := newFakeClock()
	bm, err := New(Config{Header: h, Bits: make([]byte, (h.Chunks()+7)/8), SubPage: sub, Clock: clk.Now}, tgt)
	if err != nil {
		b.Fatal(err)
	}
	for _, m := range tgt.ms {
		m.ResetStats()
	}
	rng := rand.New(rand.NewPCG(1, 1))
	buf := make([]byte, 4096)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		off := rng.Int64N(arrayBytes/4096) * 4096
		s := uint64(off / 512)
		if err := bm.StartWrite(s, 8); err != nil {
			b.Fatal(err)
		}
		rc := off / raidChunk
		pair := int(rc % 2)
		moff := dataOff + rc/2*raidChunk + off%raidChunk
		tgt.ms[2*pair].WriteAt(buf, moff)
		tgt.ms[2*pair+1].WriteAt(buf, moff)
		bm.EndWrite(s, 8, true)
		if i%tickEvery == tickEvery-1 {
			if err := bm.Tick(clk.Advance(dsleep)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	var busiest time.Duration
	var rmw uint64
	for _, m := range tgt.ms {
		st := m.Stats()
		busiest = max(busiest, st.Busy)
		rmw += st.RMW
	}
	st := bm.Stats()
	b.ReportMetric(float64(b.N)/busiest.Seconds(), "iops_model")
	b.ReportMetric(st.BytesPerFlush(), "bytes/flush")
	b.ReportMetric(float64(rmw)/float64(b.N), "rmw_ops/op")
	b.ReportMetric(float64(st.Flushes)/float64(b.N), "flushes/op")
}

// BenchmarkStartWriteHot measures the lock-free path: StartWrite+EndWrite
// on chunks whose bits are set and durable, from parallel goroutines,
// spread over many chunks or all on one.
func BenchmarkStartWriteHot(b *testing.B) {
	for _, spread := range []uint64{65280, 1} {
		name := "spread"
		if spread == 1 {
			name = "one-chunk"
		}
		b.Run(name, func(b *testing.B) {
			bits := make([]byte, 8160)
			for i := range bits {
				bits[i] = 0xff // loaded NEEDED: never cleared
			}
			r := newRecTarget(b, g12)
			r.install(stdHeader, bits)
			bm, err := New(Config{Header: stdHeader, Bits: bits, SubPage: true}, r)
			if err != nil {
				b.Fatal(err)
			}
			var seed atomic.Uint64
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				rng := rand.New(rand.NewPCG(seed.Add(1), 7))
				for pb.Next() {
					s := rng.Uint64N(spread) * 8
					if err := bm.StartWrite(s, 8); err != nil {
						b.Error(err)
						return
					}
					bm.EndWrite(s, 8, true)
				}
			})
			b.StopTimer()
			if n := len(r.writes()); n != 0 {
				b.Fatalf("%d bitmap writes on the hot path", n)
			}
		})
	}
}
