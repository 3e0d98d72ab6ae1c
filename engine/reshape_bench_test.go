package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// reshapeBenchArray makes a raid5 of 4 members of devMiB with its data
// written and a spare added, on memory members or on the member model
// (seqMember: 10 µs, 500 MB/s per member, in parallel; what is written
// below the old data offset is kept, so that the superblocks read back).
// It returns the array, the devices it runs on (the spare last) and the
// members' data offset in bytes.
func reshapeBenchArray(b *testing.B, kind string, devMiB int) (*Array, []Device, int64) {
	b.Helper()
	s := spec{level: "raid5", n: 4, chunkKiB: 64, devMiB: []int{devMiB}}
	mems := append(create(b, s), NewMemDevice(int64(devMiB)<<20))
	devs := make([]Device, len(mems))
	dataStart := int64(readSB(b, mems[0]).DataOffset) * 512
	for i, m := range mems {
		for pi := range m.pages {
			m.page(int64(pi)) // allocate now, not while measuring
		}
		devs[i] = m
		if kind == "model" {
			devs[i] = &metaModelDevice{modelDevice{MemDevice: m, cfg: seqMember(m.Geometry().Size)}, dataStart}
		}
	}
	a, err := Open(devs[:4], recoverOptions())
	if err != nil {
		b.Fatal(err)
	}
	p := make([]byte, 1<<20)
	fillPattern(newRand(3), p)
	for off := int64(0); off < a.Size(); off += int64(len(p)) {
		if _, err := a.WriteAt(p[:min(int64(len(p)), a.Size()-off)], off); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := a.AddDevice(devs[4], AddOptions{Replacement: -1}); err != nil {
		b.Fatal(err)
	}
	return a, devs, dataStart
}

// memberCopy copies n bytes on each of devs from off to off+delta (delta
// negative: down, as the reshape moves the data), 1 MiB at a time, all
// members at once: the plain copy baseline of the reshape. It returns the
// time it took.
func memberCopy(b *testing.B, devs []Device, off, delta, n int64) time.Duration {
	b.Helper()
	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Bool
	for _, d := range devs {
		wg.Add(1)
		go func(d Device) {
			defer wg.Done()
			buf := GetBuf(1 << 20)
			defer PutBuf(buf)
			for o := int64(0); o < n; o += 1 << 20 {
				p := buf.Bytes()[:min(1<<20, n-o)]
				if _, err := d.ReadAt(p, off+o); err != nil {
					failed.Store(true)
					return
				}
				if _, err := d.WriteAt(p, off+o+delta); err != nil {
					failed.Store(true)
					return
				}
			}
		}(d)
	}
	wg.Wait()
	if failed.Load() {
		b.Fatal("member copy failed")
	}
	return time.Since(start)
}

// BenchmarkReshape: a raid5 of 4 x 32 MiB members grown to 5 (the
// engine's reshape: data read through the old geometry, written as full
// new stripes 512 sectors lower, checkpoints in the superblocks), on
// memory members and on the member model. Per round, on one fresh array:
// the reshape alone, then a plain member-to-member copy of the same
// number of bytes (the old array's size, spread evenly over the 4 old
// members, each copying down by the same offset, all at once) on the same
// members; on a second fresh array: 4 KiB random writes (4 writers)
// without a reshape, then the same writers while the reshape runs, for
// as long as it runs. Metrics (medians over rounds): reshape_MB/s and
// copy_MB/s (array bytes per second) and x_copy (their ratio); iops_idle,
// iops_reshape and x_idle (their ratio); reshape_loaded_MB/s (the
// reshape under that write load).
func BenchmarkReshape(b *testing.B) {
	for _, kind := range []string{"memory", "model"} {
		b.Run("raid5-4to5/"+kind, func(b *testing.B) {
			const devMiB = 32
			var reshapeMBps, copyMBps, idle, during, loadedMBps []float64
			rounds := max(b.N, 3)
			b.ResetTimer()
			for round := 0; round < rounds; round++ {
				a, devs, dataOff := reshapeBenchArray(b, kind, devMiB)
				old := a.Size()
				start := time.Now()
				if err := a.StartReshape(ReshapeStart{RaidDisks: 5}); err != nil {
					b.Fatal(err)
				}
				if err := a.Reshape(context.Background()); err != nil {
					b.Fatal(err)
				}
				el := time.Since(start)
				reshapeMBps = append(reshapeMBps, float64(old)/1e6/el.Seconds())
				// the array is idle (no daemon): copy on its open devices
				cp := memberCopy(b, devs[:4], dataOff, -512*512, old/4)
				copyMBps = append(copyMBps, float64(old)/1e6/cp.Seconds())
				a.Close()

				a, _, _ = reshapeBenchArray(b, kind, devMiB)
				write := func(p []byte, off int64) error {
					_, err := a.WriteAt(p, off)
					return err
				}
				blocks := a.Size() / 4096
				idle = append(idle, randWrites(b, 4, 4000, blocks, uint64(round), write))
				if err := a.StartReshape(ReshapeStart{RaidDisks: 5}); err != nil {
					b.Fatal(err)
				}
				done := make(chan time.Duration, 1)
				go func() {
					s := time.Now()
					if err := a.Reshape(context.Background()); err != nil {
						b.Error(err)
					}
					done <- time.Since(s)
				}()
				n, el2 := writesUntil(a, blocks, uint64(round), done)
				during = append(during, float64(n)/el2.Seconds())
				loadedMBps = append(loadedMBps, float64(old)/1e6/el2.Seconds())
				a.Close()
			}
			b.ReportMetric(median(reshapeMBps), "reshape_MB/s")
			b.ReportMetric(median(copyMBps), "copy_MB/s")
			b.ReportMetric(median(reshapeMBps)/median(copyMBps), "x_copy")
			b.ReportMetric(median(idle), "iops_idle")
			b.ReportMetric(median(during), "iops_reshape")
			b.ReportMetric(median(during)/median(idle), "x_idle")
			b.ReportMetric(median(loadedMBps), "reshape_loaded_MB/s")
		})
	}
}

// writesUntil does 4 KiB writes at random blocks from 4 writers until done
// delivers the reshape's duration; it returns the writes made and that
// duration.
func writesUntil(a *Array, blocks int64, seed uint64, done chan time.Duration) (int64, time.Duration) {
	var n atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := newRand(seed*8 + uint64(w))
			p := make([]byte, 4096)
			fillPattern(r, p)
			for !stop.Load() {
				off := int64(r.Uint64()%uint64(blocks)) * 4096
				if _, err := a.WriteAt(p, off); err != nil {
					return
				}
				n.Add(1)
			}
		}(w)
	}
	el := <-done
	stop.Store(true)
	wg.Wait()
	return n.Load(), el
}
