package wib

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"mdtool/bitmap"
)

// TestCrashInvariantsStress runs writers, the daemon, events updates, a
// resync and injected write errors concurrently against members of three
// different geometries, and checks the crash guarantees on every single
// bitmap write, i.e. on every image a crash could leave behind:
//
//   - after StartWrite returns, the chunk's bit is set on every member;
//   - no write ever leaves a chunk's bit clear while a write to that chunk
//     is in flight (between StartWrite's return and EndWrite).
//
// At the end, with nothing in flight and everything resynced, Flush must
// leave every member's bitmap clear and equal to the runtime's image.
func TestCrashInvariantsStress(t *testing.T) {
	for _, sub := range []bool{true, false} {
		name := "whole-page"
		if sub {
			name = "sub-page"
		}
		t.Run(name, func(t *testing.T) { stress(t, sub) })
	}
}

func stress(t *testing.T, sub bool) {
	geoms := []MemberGeom{
		{Index: 0, LogicalBlock: 512, PhysicalBlock: 4096, BitmapStart: 8192, Limit: 1 << 20},
		{Index: 1, LogicalBlock: 4096, BitmapStart: 8192, Limit: 1 << 20},
		{Index: 2, LogicalBlock: 512, IOOpt: 4096, BitmapStart: sb10 - 8704, Limit: sb10},
	}
	b, r, clk := setup{h: stdHeader, geoms: geoms, sub: sub}.build(t)
	chunks := b.Chunks()
	inflight := make([]atomic.Int32, chunks)
	var violations atomic.Int64
	var failOn atomic.Bool

	// Writers only touch the pool's chunks and the chunk after each.
	var tracked []uint64
	r.check = func(member int, off int64, n int, disk []byte) {
		g, _ := r.geom(member)
		bits := bitmap.BitsOf(disk[g.BitmapStart:])
		for _, c := range tracked {
			byteOff := int64(bitmap.ByteOf(c))
			if byteOff < off || byteOff >= off+int64(n) {
				continue
			}
			if inflight[c].Load() > 0 && !bits.Test(c) {
				if violations.Add(1) < 5 {
					t.Errorf("member %d: write [%d,+%d) cleared chunk %d with a write in flight", member, off, n, c)
				}
			}
		}
	}
	var rng sync.Mutex
	src := rand.New(rand.NewPCG(1, 2))
	r.fail = func(member int, off int64, n int) error {
		if !failOn.Load() {
			return nil
		}
		rng.Lock()
		defer rng.Unlock()
		if src.IntN(100) == 0 {
			return errInjected
		}
		return nil
	}
	failOn.Store(true)

	// A pool of chunks spread over the three pages, with neighbours so
	// that writes spanning two chunks happen.
	var pool []uint64
	for _, base := range []uint64{0, 1500, 2040, 20000, 32760, 33000, 50000, 65250} {
		for i := uint64(0); i < 30 && base+i < chunks; i++ {
			pool = append(pool, base+i)
		}
	}
	for _, c := range pool {
		tracked = append(tracked, c)
		if c+1 < chunks {
			tracked = append(tracked, c+1)
		}
	}

	const writers, iters = 8, 1500
	var wg sync.WaitGroup
	var done atomic.Bool
	var startErrs atomic.Int64
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(seed, 99))
			for i := 0; i < iters; i++ {
				c := pool[rnd.IntN(len(pool))]
				s := b.chunkSector(c) + uint64(rnd.IntN(8))
				n := uint64(1 + rnd.IntN(12)) // may spill into the next chunk
				if err := b.StartWrite(s, n); err != nil {
					startErrs.Add(1)
					continue
				}
				first, last, _ := b.chunkRange(s, n)
				for cc := first; cc <= last; cc++ {
					inflight[cc].Add(1)
				}
				r.mu.Lock()
				for _, g := range geoms {
					if !bitmap.BitsOf(r.disks[g.Index][g.BitmapStart:]).Test(first) ||
						!bitmap.BitsOf(r.disks[g.Index][g.BitmapStart:]).Test(last) {
						if violations.Add(1) < 5 {
							t.Errorf("member %d: StartWrite(%d,%d) returned before chunks %d-%d were durable", g.Index, s, n, first, last)
						}
					}
				}
				r.mu.Unlock()
				for cc := first; cc <= last; cc++ {
					inflight[cc].Add(-1)
				}
				b.EndWrite(s, n, rnd.IntN(20) != 0)
			}
		}(uint64(w))
	}
	var bg sync.WaitGroup
	bg.Add(3)
	go func() { // the daemon
		defer bg.Done()
		for !done.Load() {
			b.Tick(clk.Advance(dsleep))
			time.Sleep(100 * time.Microsecond)
		}
	}()
	go func() { // superblock updates
		defer bg.Done()
		ev := uint64(10)
		for !done.Load() {
			ev++
			b.SetEvents(ev, ev%7 == 0)
			time.Sleep(time.Millisecond)
		}
	}()
	go func() { // a resync pass now and then
		defer bg.Done()
		for !done.Load() {
			for _, c := range pool {
				s := b.chunkSector(c)
				if need, _ := b.StartSync(s, false); need {
					b.EndSync(s, false)
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	wg.Wait()
	done.Store(true)
	bg.Wait()
	failOn.Store(false)

	// Final resync of whatever is NEEDED, then a clean stop.
	for c := uint64(0); c < chunks; c++ {
		if need, _ := b.StartSync(b.chunkSector(c), false); need {
			b.EndSync(b.chunkSector(c), false)
		}
	}
	b.CloseSync()
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := b.DirtyChunks(); n != 0 {
		t.Fatalf("%d chunks dirty after the final flush", n)
	}
	for _, g := range geoms {
		total, dirty := bitmap.ExamineCounts(r.diskHeader(g.Index, g), r.area(g.Index, b.bytes))
		if dirty != 0 || total != chunks {
			t.Errorf("member %d: %d of %d bits still set on disk", g.Index, dirty, total)
		}
		checkDiskMatchesImage(t, b, r, g.Index)
	}
	st := b.Stats()
	t.Logf("%d flushes (%d setting bits), %d writes, %.0f bytes/flush, %d failed flushes, %d failed StartWrites",
		st.Flushes, st.SetFlushes, st.Writes, st.BytesPerFlush(), st.Errors, startErrs.Load())
	if st.SetFlushes == 0 || st.Errors == 0 {
		t.Fatalf("stress did not exercise set flushes and errors: %+v", st)
	}
}
