package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"mdtool/internal/membermodel"
)

// Benchmarks of the engine over memory members. Every engine figure comes
// with a baseline of the same members driven directly (no RAID), measured
// in the same run: sub-benchmark "members" and, inside each engine
// benchmark, the metric x_members (engine throughput / members
// throughput for the same data volume and request sizes).
//
// Arrays: 4 data members everywhere a level allows it (raid0 4 disks,
// raid5 4+1, raid6 4+2, raid10 n2 on 4, raid1 on 2), 64 KiB chunks (full
// stripe 256 KiB, so 1 MiB requests are whole stripes), 64 MiB members.

var benchSpecs = []spec{
	{level: "raid0", n: 4, chunkKiB: 64, devMiB: []int{64}},
	{level: "raid1", n: 2, devMiB: []int{64}},
	{level: "raid5", n: 5, chunkKiB: 64, devMiB: []int{64}},
	{level: "raid6", n: 6, chunkKiB: 64, devMiB: []int{64}},
	{level: "raid10", layout: "n2", n: 4, chunkKiB: 64, devMiB: []int{64}},
}

func benchArray(b *testing.B, s spec) (*Array, []*MemDevice) {
	b.Helper()
	mems := create(b, s)
	o := testOptions()
	a, err := Open(devices(mems), o)
	if err != nil {
		b.Fatal(err)
	}
	// touch every page once so that sparse allocation is not measured
	p := make([]byte, 1<<20)
	for off := int64(0); off+int64(len(p)) <= a.Size(); off += int64(len(p)) {
		if _, err := a.WriteAt(p, off); err != nil {
			b.Fatal(err)
		}
	}
	return a, mems
}

type benchOp struct {
	name  string
	size  int64
	write bool
	rand  bool
}

var benchOps = []benchOp{
	{"seqread1M", 1 << 20, false, false},
	{"seqwrite1M", 1 << 20, true, false},
	{"randread4K", 4 << 10, false, true},
	{"randwrite4K", 4 << 10, true, true},
}

// opStream is the sequence of request offsets of op on an io target of
// size bytes: random whole blocks from a fixed seed, or consecutive ones
// from 0, wrapping at the end. A stream continues where the previous run
// stopped, so that a benchmark running it in batches covers the target
// instead of repeating the first batch's offsets (which the CPU caches
// would then serve).
type opStream struct {
	op   benchOp
	size int64
	r    *rand.Rand
	off  int64
}

func newOpStream(op benchOp, size int64) *opStream {
	return &opStream{op: op, size: size, r: rand.New(rand.NewPCG(1, 2))}
}

// run performs the next n requests.
func (s *opStream) run(n int, p []byte, rw func(p []byte, off int64, write bool) error) error {
	op := s.op
	blocks := s.size / op.size
	for i := 0; i < n; i++ {
		if op.rand {
			s.off = s.r.Int64N(blocks) * op.size
		} else if s.off+op.size > s.size {
			s.off = 0
		}
		if err := rw(p[:op.size], s.off, op.write); err != nil {
			return err
		}
		if !op.rand {
			s.off += op.size
		}
	}
	return nil
}

// membersRW drives the members alone: a request of the array's size is
// spread over the data members the way raid0 would (chunk-sized pieces
// round robin), one goroutine per member for requests of 256 KiB and more
// (as the engine fans out); a 4 KiB request goes to one member.
func membersRW(mems []*MemDevice, dataMembers int, chunk int64) func(p []byte, off int64, write bool) error {
	devSize := mems[0].Geometry().Size - (8 << 20)
	one := func(p []byte, off int64, write bool, only int) error {
		for pos := int64(0); pos < int64(len(p)); {
			c := chunk - (off+pos)%chunk
			c = min(c, int64(len(p))-pos)
			ch := (off + pos) / chunk
			mi := int(ch) % dataMembers
			if only >= 0 && mi != only {
				pos += c
				continue
			}
			m := mems[mi]
			moff := (ch/int64(dataMembers)*chunk + (off+pos)%chunk) % devSize
			var err error
			if write {
				_, err = m.WriteAt(p[pos:pos+c], moff)
			} else {
				_, err = m.ReadAt(p[pos:pos+c], moff)
			}
			if err != nil {
				return err
			}
			pos += c
		}
		return nil
	}
	return func(p []byte, off int64, write bool) error {
		if len(p) < parallelThreshold || dataMembers == 1 {
			return one(p, off, write, -1)
		}
		var wg sync.WaitGroup
		errs := make([]error, dataMembers)
		for i := 1; i < dataMembers; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				errs[i] = one(p, off, write, i)
			}(i)
		}
		errs[0] = one(p, off, write, 0)
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}
}

func arrayRW(a *Array) func(p []byte, off int64, write bool) error {
	return func(p []byte, off int64, write bool) error {
		var err error
		if write {
			_, err = a.WriteAt(p, off)
		} else {
			_, err = a.ReadAt(p, off)
		}
		return err
	}
}

func dataMembers(s spec) int {
	switch s.level {
	case "raid1":
		return 1
	case "raid5":
		return s.n - 1
	case "raid6":
		return s.n - 2
	case "raid10":
		return s.n / 2
	}
	return s.n
}

func BenchmarkEngine(b *testing.B) {
	for _, s := range benchSpecs {
		b.Run(s.level, func(b *testing.B) {
			a, mems := benchArray(b, s)
			defer a.Close()
			dm := dataMembers(s)
			chunk := int64(64 << 10)
			if s.level == "raid1" {
				chunk = 1 << 20
			}
			for _, op := range benchOps {
				b.Run(op.name+"/members", func(b *testing.B) {
					p := make([]byte, op.size)
					b.SetBytes(op.size)
					b.ResetTimer()
					if err := newOpStream(op, a.Size()).run(b.N, p, membersRW(mems, dm, chunk)); err != nil {
						b.Fatal(err)
					}
				})
				b.Run(op.name+"/engine", func(b *testing.B) {
					// Engine and members run alternately in small batches so
					// that both see the same machine load.
					p := make([]byte, op.size)
					mrw, arw := membersRW(mems, dm, chunk), arrayRW(a)
					ms, as := newOpStream(op, a.Size()), newOpStream(op, a.Size())
					var tEng, tMem time.Duration
					b.SetBytes(op.size)
					b.ResetTimer()
					const batch = 32
					for done := 0; done < b.N; done += batch {
						n := min(batch, b.N-done)
						b.StopTimer()
						t0 := time.Now()
						if err := ms.run(n, p, mrw); err != nil {
							b.Fatal(err)
						}
						tMem += time.Since(t0)
						b.StartTimer()
						t1 := time.Now()
						if err := as.run(n, p, arw); err != nil {
							b.Fatal(err)
						}
						tEng += time.Since(t1)
					}
					b.ReportMetric(float64(tMem)/float64(tEng), "x_members")
				})
			}
		})
	}
}

// modelDevice is a member that takes as long as a modelled disk
// (internal/membermodel): each request holds its caller until the
// member's Timeline says it is done, requests to one member queue, and
// different members serve in parallel. Like a disk, whose DMA costs the
// host no CPU, it does not copy the data written: writes only take their
// time (reads come from the MemDevice below, which holds the superblocks
// written before the array was opened), so a benchmark on it must not
// read back what it wrote. It is not a memory-speed device to the
// engine, which fans out to it as to real members and writes its parity
// from buffers.
type modelDevice struct {
	*MemDevice
	cfg membermodel.Config
	tl  membermodel.Timeline
}

func (d *modelDevice) Geometry() DeviceGeometry {
	g := d.MemDevice.Geometry()
	g.Memory = false
	return g
}

func (d *modelDevice) WriteAt(p []byte, off int64) (int, error) {
	if err := checkRange(off, int64(len(p)), d.Geometry().Size); err != nil {
		return 0, err
	}
	membermodel.Wait(d.tl.Reserve(d.cfg.WriteCost(off, int64(len(p))).Time))
	return len(p), nil
}

func (d *modelDevice) ReadAt(p []byte, off int64) (int, error) {
	done := d.tl.Reserve(d.cfg.ReadCost(off, int64(len(p))).Time)
	n, err := d.MemDevice.ReadAt(p, off)
	membermodel.Wait(done)
	return n, err
}

// seqMember is the member model of the full-stripe benchmark: a disk that
// writes 500 MB/s sequentially (a SATA SSD, or a little more than a
// modern hard disk) with 10 µs per request, 4 KiB atomic unit.
func seqMember(size int64) membermodel.Config {
	return membermodel.Config{Size: size, LogicalBlock: 512, AtomicUnit: 4096,
		ReadLatency: 10 * time.Microsecond, WriteLatency: 10 * time.Microsecond, Bandwidth: 500e6}
}

// benchArrayModel is benchArray over modelled members.
func benchArrayModel(b *testing.B, s spec) *Array {
	b.Helper()
	mems := create(b, s)
	devs := make([]Device, len(mems))
	for i, m := range mems {
		for pi := range m.pages {
			m.page(int64(pi)) // allocate now, not while measuring
		}
		devs[i] = &modelDevice{MemDevice: m, cfg: seqMember(m.Geometry().Size)}
	}
	a, err := Open(devs, testOptions())
	if err != nil {
		b.Fatal(err)
	}
	return a
}

// BenchmarkFullStripeVsRAID0 compares sequential 1 MiB (whole stripe)
// writes on raid5 and raid6 with raid0 over the same 4 data members;
// target >= 0.7. Two kinds of members:
//
//   - memory: MemDevice. A member write is a memory copy, bound by the
//     machine's memory bandwidth, which both cores share. The engine
//     takes the path it takes for every device: the data chunks are
//     copied from the caller's buffer, the parity is computed into a
//     buffer and then copied to the parity members like any write, so
//     this measures the engine's buffer path plus one extra copy of the
//     parity bytes that raid0 does not make. (An in-place path that
//     computed parity straight into MemDevice memory, reachable by no
//     real device, was removed.)
//   - model: members with their own bandwidth (seqMember, 500 MB/s each)
//     serving in parallel as disks do, and taking the data as a disk's DMA
//     does, without a host copy (modelDevice); the parity members write
//     alongside the data members and the ratio shows what the engine
//     itself costs.
//
// raid0 and the parity array run alternately in rounds (raid0 first in
// even rounds, second in odd ones); x_raid0 is the median over rounds of
// raid0's time / the array's time for the same bytes, so that a load
// spike on this shared machine spoils a round, not the figure.
func BenchmarkFullStripeVsRAID0(b *testing.B) {
	for _, kind := range []string{"memory", "model"} {
		open := func(s spec) *Array {
			if kind == "model" {
				return benchArrayModel(b, s)
			}
			a, _ := benchArray(b, s)
			return a
		}
		batch := 16
		if kind == "model" {
			batch = 8 // about 4 ms a side
		}
		r0 := open(benchSpecs[0])
		for _, s := range []spec{benchSpecs[2], benchSpecs[3]} {
			b.Run(s.level+"/"+kind, func(b *testing.B) {
				a := open(s)
				defer a.Close()
				op := benchOps[1]
				p := make([]byte, op.size)
				s0, s1 := newOpStream(op, r0.Size()), newOpStream(op, a.Size())
				b.SetBytes(op.size)
				b.ResetTimer()
				d0, d1 := alternate(b, batch,
					func(n int) error { return s0.run(n, p, arrayRW(r0)) },
					func(n int) error { return s1.run(n, p, arrayRW(a)) })
				reportSideBySide(b, d0, d1, op.size, "x_raid0", "raid0_MB/s", true)
			})
		}
		r0.Close()
	}
}

// reportSideBySide reports alternate's two sides: ratio is the median
// over the rounds of side 1's time over side 0's (side 0's over side 1's
// when inverse), MB/s side 1's throughput and base side 0's.
func reportSideBySide(b *testing.B, d0, d1 []time.Duration, size int64, ratio, base string, inverse bool) {
	var t0, t1 time.Duration
	var ratios []float64
	for i := range d0 {
		t0 += d0[i]
		t1 += d1[i]
		r := float64(d1[i]) / float64(d0[i])
		if inverse {
			r = 1 / r
		}
		ratios = append(ratios, r)
	}
	b.ReportMetric(median(ratios), ratio)
	b.ReportMetric(float64(int64(b.N)*size)/t1.Seconds()/1e6, "MB/s")
	b.ReportMetric(float64(int64(b.N)*size)/t0.Seconds()/1e6, base)
}

// alternate runs b.N operations on each of two sides in batches of at
// most batch, the side that goes first alternating from round to round
// (so that neither always finds the caches warm), and returns each
// side's time per round.
func alternate(b *testing.B, batch int, side0, side1 func(n int) error) (d0, d1 []time.Duration) {
	b.Helper()
	for done, round := 0, 0; done < b.N; done, round = done+batch, round+1 {
		n := min(batch, b.N-done)
		var t [2]time.Duration
		for i := 0; i < 2; i++ {
			side := i ^ round%2
			run := side0
			if side == 1 {
				run = side1
			}
			start := time.Now()
			if err := run(n); err != nil {
				b.Fatal(err)
			}
			t[side] = time.Since(start)
		}
		d0, d1 = append(d0, t[0]), append(d1, t[1])
	}
	return d0, d1
}

// median returns the median of xs (sorted in place); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// BenchmarkReadIn counts member reads caused by sequential writes: whole
// stripes aligned (must be 0) and the same writes shifted by 4 KiB.
func BenchmarkReadIn(b *testing.B) {
	for _, s := range []spec{benchSpecs[2], benchSpecs[3]} {
		for _, shift := range []int64{0, 4096} {
			name := fmt.Sprintf("%s/aligned", s.level)
			if shift != 0 {
				name = fmt.Sprintf("%s/unaligned", s.level)
			}
			b.Run(name, func(b *testing.B) {
				mems := create(b, s)
				var counts []*CountingDevice
				var devs []Device
				for _, m := range mems {
					c := &CountingDevice{Device: m}
					counts = append(counts, c)
					devs = append(devs, c)
				}
				a, err := Open(devs, testOptions())
				if err != nil {
					b.Fatal(err)
				}
				defer a.Close()
				p := make([]byte, 1<<20)
				a.WriteAt(p[:4096], 0) // mark active outside the count
				for _, c := range counts {
					c.Reset()
				}
				b.SetBytes(int64(len(p)))
				b.ResetTimer()
				off := shift
				for i := 0; i < b.N; i++ {
					if off+int64(len(p)) > a.Size() {
						off = shift
					}
					if _, err := a.WriteAt(p, off); err != nil {
						b.Fatal(err)
					}
					off += int64(len(p))
				}
				b.StopTimer()
				var reads, rbytes int64
				for _, c := range counts {
					reads += c.Reads.Load()
					rbytes += c.ReadBytes.Load()
				}
				b.ReportMetric(float64(reads)/float64(b.N), "member-reads/op")
				b.ReportMetric(float64(rbytes)/float64(b.N), "member-read-bytes/op")
			})
		}
	}
}

// BenchmarkRandWriteIOPS: 4 KiB random writes with 1, 2, 4 and 8
// concurrent writers, on the array (metrics iops_Nw) and, as the
// baseline, straight on its members (members_iops_Nw: one member write
// per array write, no RAID, no locks), which shows how far this machine
// lets IOPS grow with writers at the time of the run.
//
// cpu-us_Nw is the process CPU time per array write (median): if it stays
// flat while IOPS dip, the writers got less CPU (the machine was busy);
// if it grows with writers, they contend (spinning, cache-line traffic).
//
// Each benchmark iteration is a round that runs every writer count on
// the array and on the members, 5000 writes each, one after the other:
// rising writer counts in even rounds and falling ones in odd rounds,
// array first in even rounds and members first in odd ones, so that all
// of them see the same machine load and a drift in the load favours
// none. Each metric is the median over rounds: a load spike on this
// shared machine spoils a round, not the figure, while a real regression
// (a lock every writer takes, say) is in every round and so in the
// median.
func BenchmarkRandWriteIOPS(b *testing.B) {
	for _, s := range []spec{benchSpecs[2], benchSpecs[3], benchSpecs[4], benchSpecs[1], benchSpecs[0]} {
		b.Run(s.level, func(b *testing.B) {
			a, mems := benchArray(b, s)
			defer a.Close()
			mrw := membersRW(mems, dataMembers(s), 64<<10)
			sides := [2]func(p []byte, off int64) error{
				func(p []byte, off int64) error {
					_, err := a.WriteAt(p, off)
					return err
				},
				func(p []byte, off int64) error { return mrw(p, off, true) },
			}
			counts := []int{1, 2, 4, 8}
			var iops [2][][]float64
			for side := range iops {
				iops[side] = make([][]float64, len(counts))
			}
			cpu := make([][]float64, len(counts))
			const perRound = 5000
			blocks := a.Size() / 4096
			// At least minIOPSRounds rounds whatever b.N is: the
			// medians need them on a 2-core machine shared with others.
			rounds := max(b.N, minIOPSRounds)
			b.ResetTimer()
			for round := 0; round < rounds; round++ {
				for i := range counts {
					ci := i
					if round%2 == 1 {
						ci = len(counts) - 1 - i
					}
					for j := 0; j < 2; j++ {
						side := j ^ round%2
						c0 := processCPU()
						v := randWrites(b, counts[ci], perRound, blocks, uint64(round), sides[side])
						iops[side][ci] = append(iops[side][ci], v)
						if side == 0 {
							cpu[ci] = append(cpu[ci], float64(processCPU()-c0)/1e3/perRound)
						}
					}
				}
			}
			for ci, writers := range counts {
				b.ReportMetric(median(iops[0][ci]), fmt.Sprintf("iops_%dw", writers))
				b.ReportMetric(median(iops[1][ci]), fmt.Sprintf("members_iops_%dw", writers))
				b.ReportMetric(median(cpu[ci]), fmt.Sprintf("cpu-us_%dw", writers))
			}
		})
	}
}

// minIOPSRounds is the least number of rounds BenchmarkRandWriteIOPS
// takes its medians over.
const minIOPSRounds = 25

// processCPU is the CPU time (user+system) the process has used.
func processCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// randWrites does n 4 KiB writes at random block offsets with the given
// number of concurrent writers and returns the writes per second. The
// writers are started and ready (buffer, generator) before the clock
// starts, so that a round measures the writes, not goroutine start-up.
func randWrites(b *testing.B, writers, n int, blocks int64, seed uint64, write func(p []byte, off int64) error) float64 {
	var next atomic.Int64
	var ready, wg sync.WaitGroup
	start := make(chan struct{})
	for w := 0; w < writers; w++ {
		wg.Add(1)
		ready.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), seed))
			p := make([]byte, 4096)
			ready.Done()
			<-start
			for next.Add(1) <= int64(n) {
				if err := write(p, r.Int64N(blocks)*4096); err != nil {
					b.Error(err)
					return
				}
			}
		}(w)
	}
	ready.Wait()
	t0 := time.Now()
	close(start)
	wg.Wait()
	return float64(n) / time.Since(t0).Seconds()
}
