package engine

import (
	"context"
	"testing"
	"time"

	"mdtool/superblock"
)

// corruptParity flips a byte in the P block of the stripe holding array
// byte off (the member holding P for that stripe).
func corruptParity(t *testing.T, a *Array, mems []*MemDevice, off int64) {
	t.Helper()
	g := a.striped
	ad := g.Locate(uint64(off >> 9))
	m := a.roles[ad.P]
	b := make([]byte, 512)
	pos := m.dataOff + int64(ad.Sector)<<9
	mems[m.index].ReadAt(b, pos)
	b[7] ^= 0x5a
	mems[m.index].WriteAt(b, pos)
}

// TestResync: after a crash (no Close) the array opens dirty; Resync
// repairs parity from resync_offset on, only in the chunks the bitmap
// marks when there is one, and marks the array clean.
func TestResync(t *testing.T) {
	for _, s := range []spec{
		{level: "raid5", n: 4, chunkKiB: 64, devMiB: []int{64}},
		{level: "raid5", n: 4, chunkKiB: 64, devMiB: []int{64}, bitmap: true},
		{level: "raid6", n: 5, chunkKiB: 64, devMiB: []int{64}, bitmap: true},
		{level: "raid1", n: 2, devMiB: []int{64}},
		{level: "raid10", layout: "f2", n: 4, chunkKiB: 64, devMiB: []int{64}, bitmap: true},
	} {
		t.Run(s.String(), func(t *testing.T) {
			mems := create(t, s)
			clk := &fakeClock{t: time.Unix(1700000100, 0)}
			o := testOptions()
			o.Clock = clk.Now
			a := open(t, mems, o)
			m := newModel(a.Size())
			p := make([]byte, 1<<20)
			fillPattern(newRand(31), p)
			// clear mdadm's initial all-ones bitmap first
			for i := 0; i < 3; i++ {
				clk.Add(6 * time.Second)
				a.Tick()
			}
			mustWrite(t, a, m, p, 0) // dirties the first bitmap chunk only
			// crash: the array is never closed
			b := open(t, mems, o)
			if need, from := b.NeedsResync(); !need || from != 0 {
				t.Fatalf("after a crash: NeedsResync %v from %d", need, from)
			}
			far := b.Size() - 1<<20 // in another bitmap chunk (64 MiB members, 64 MiB chunks? see below)
			if b.striped != nil {
				corruptParity(t, b, mems, 0)
				corruptParity(t, b, mems, far)
			} else {
				// make the copies differ
				for _, off := range []int64{0, far} {
					locs, _ := b.geo.Map(uint64(off>>9), nil)
					l := locs[len(locs)-1]
					mm := b.roles[l.Role]
					mems[mm.index].WriteAt([]byte{1, 2, 3}, mm.dataOff+int64(l.Sector)<<9+100)
				}
			}
			if err := b.Resync(context.Background()); err != nil {
				t.Fatal(err)
			}
			if need, _ := b.NeedsResync(); need {
				t.Error("still needs resync")
			}
			mm, err := b.Check(context.Background(), false)
			if err != nil {
				t.Fatal(err)
			}
			chunkSectors := uint64(0)
			if bs, ok := b.BitmapStats(); ok {
				_ = bs
				chunkSectors = b.bm.(interface{ ChunkSectors() uint64 }).ChunkSectors()
			}
			farSync := uint64(far >> 9)
			if b.striped != nil {
				farSync = b.striped.Locate(farSync).Sector
			}
			if s.bitmap && farSync/chunkSectors != 0 {
				// the far corruption is outside the dirty chunk: a
				// bitmap-guided resync leaves it, check still sees it
				if mm == 0 {
					t.Errorf("bitmap-guided resync repaired a clean chunk")
				}
			} else if mm != 0 {
				t.Errorf("%d mismatches after resync", mm)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			for i, d := range mems {
				if sb := readSB(t, d); sb.ResyncOffset != superblock.MaxSector {
					t.Errorf("member %d resync_offset %x after resync and close", i, sb.ResyncOffset)
				}
			}
		})
	}
}
