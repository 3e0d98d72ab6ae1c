package engine

import (
	"errors"
	"sync"
	"testing"
	"time"

	"mdtool/bitmap"
	"mdtool/internal/mdadm/plan"
	"mdtool/superblock"
)

// growAdd adds a bitmap of chunk bytes as grow --bitmap=internal does.
func growAdd(t testing.TB, a *Array, chunk uint64) {
	t.Helper()
	sb, _ := a.sample()
	off, h, err := plan.GrowBitmap(sb, chunk)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.AddBitmap(off, h); err != nil {
		t.Fatalf("AddBitmap: %v", err)
	}
}

// TestGrowBitmapOnline adds and removes the bitmap of running arrays
// (every redundant level and 1.x placement) while writers keep writing
// (and the daemon runs): every member's superblock names the bitmap
// after AddBitmap and no more after RemoveBitmap, events going up by one
// each time; the bitmap header's events equal the superblock's; a write
// that starts after AddBitmap returned finds its chunk's bit set on every
// member; the contents are what was written.
func TestGrowBitmapOnline(t *testing.T) {
	for _, s := range []spec{
		{level: "raid1", n: 2},
		{level: "raid5", n: 3, chunkKiB: 64, metadata: "1.0"},
		{level: "raid6", n: 4, chunkKiB: 64, metadata: "1.1"},
		{level: "raid10", n: 4, chunkKiB: 64},
	} {
		t.Run(s.String(), func(t *testing.T) {
			s.devMiB = []int{24}
			mems := create(t, s)
			clk := &fakeClock{t: time.Unix(1700000000, 0)}
			o := DefaultOptions()
			o.SafeModeDelay = 5 * time.Millisecond
			o.Clock = clk.Now
			a := open(t, mems, o)
			m := newModel(a.Size())
			var mu sync.Mutex // the model and the writers' regions
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for w := 0; w < 3; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					r := newRand(uint64(w + 1))
					p := make([]byte, 4096)
					region := a.Size() / 4
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						fillPattern(r, p)
						off := int64(w)*region + r.Int64N(region/4096)*4096
						if _, err := a.WriteAt(p, off); err != nil {
							t.Errorf("writer %d: %v", w, err)
							return
						}
						mu.Lock()
						m.write(p, off)
						mu.Unlock()
					}
				}(w)
			}
			ev := func() uint64 { return readSB(t, mems[0]).Events }
			for round, chunk := range []uint64{4 << 20, 128 << 10} {
				deadline := time.Now().Add(time.Minute)
				for a.userIO.load() < uint64(100*(round+1)) {
					if time.Now().After(deadline) {
						t.Fatal("the writers do not write")
					}
					time.Sleep(time.Millisecond) // let the writers write
				}
				e0 := a.Events()
				growAdd(t, a, chunk)
				if e := a.Events(); e != e0+1 && e != e0+2 {
					t.Errorf("round %d: events %d -> %d over AddBitmap", round, e0, e)
				}
				// The daemon clears the bits of the idle last quarter
				// (three passes, the clock 15 s ahead each time)...
				for k := 0; k < 3; k++ {
					clk.Add(15 * time.Second)
					if err := a.Tick(); err != nil {
						t.Fatal(err)
					}
				}
				if h, bits := readBits(t, mems[0]); bits.Test(bitmapChunkOf(h, a.BitmapSyncSectors()-1)) {
					t.Fatalf("round %d: the idle last chunk's bit is still set", round)
				}
				// ... and a write there sets its bit on every member.
				off := a.Size() - 4096
				mustWrite(t, a, nil, make([]byte, 4096), off)
				mu.Lock()
				m.write(make([]byte, 4096), off)
				mu.Unlock()
				for i, d := range mems {
					sb := readSB(t, d)
					if sb.FeatureMap&superblock.FeatureBitmapOffset == 0 {
						t.Fatalf("round %d: member %d: no bitmap in the superblock after AddBitmap", round, i)
					}
					h, bits := readBits(t, d)
					if h.ChunkSize != uint32(chunk) || h.Events < sb.Events-1 {
						t.Errorf("round %d: member %d: bitmap chunk %d events %d, superblock events %d", round, i, h.ChunkSize, h.Events, sb.Events)
					}
					if c := a.BitmapSyncSectors() - 1; !bits.Test(bitmapChunkOf(h, c)) {
						t.Errorf("round %d: member %d: the last chunk's bit is clear after a write to it", round, i)
					}
				}
				if err := a.AddBitmap(8, bitmap.Header{}); !errors.Is(err, ErrBitmapPresent) {
					t.Errorf("a second AddBitmap: %v", err)
				}
				e1 := ev()
				if err := a.RemoveBitmap(); err != nil {
					t.Fatalf("RemoveBitmap: %v", err)
				}
				for i, d := range mems {
					sb := readSB(t, d)
					if sb.FeatureMap&superblock.FeatureBitmapOffset != 0 || sb.Events < e1+1 {
						t.Errorf("round %d: member %d after RemoveBitmap: feature map %#x, events %d (before %d)", round, i, sb.FeatureMap, sb.Events, e1)
					}
				}
				if err := a.RemoveBitmap(); !errors.Is(err, ErrNoBitmap) {
					t.Errorf("a second RemoveBitmap: %v", err)
				}
			}
			growAdd(t, a, 64<<20)
			close(stop)
			wg.Wait()
			checkContent(t, a, m)
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			a = open(t, mems, testOptions())
			defer a.Close()
			if !a.HasBitmap() {
				t.Errorf("no bitmap after reopening")
			}
			checkContent(t, a, m)
		})
	}
}

// bitmapChunkOf is the bitmap chunk of sync-space sector s.
func bitmapChunkOf(h *bitmap.Header, s uint64) uint64 { return s * 512 / uint64(h.ChunkSize) }
