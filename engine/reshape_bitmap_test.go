package engine

import (
	"context"
	"errors"
	"testing"

	"mdtool/engine/layout"
	"mdtool/superblock"
)

// dirtyChunks lists the set bits of a member's bitmap.
func dirtyChunks(t *testing.T, d *MemDevice) []uint64 {
	t.Helper()
	h, bits := readBits(t, d)
	var out []uint64
	n := (h.SyncSize*512 + uint64(h.ChunkSize) - 1) / uint64(h.ChunkSize)
	for c := uint64(0); c < n; c++ {
		if bits.Test(c) {
			out = append(out, c)
		}
	}
	return out
}

// rowOf is the stripe of geometry g holding array sector s.
func rowOf(g *layout.Striped, s uint64) layout.Row {
	var r layout.Row
	g.Row(s/g.StripeSectors(), &r)
	return r
}

// tearParity overwrites the parity chunks of the row (the write whose
// parity never reached the members before the power cut).
func tearParity(t *testing.T, mems []*MemDevice, r layout.Row, dataOff int64, chunk uint64) {
	t.Helper()
	junk := make([]byte, chunk*512)
	fillPattern(newRand(77), junk)
	for _, role := range []int{r.P, r.Q} {
		if role < 0 {
			continue
		}
		if _, err := mems[role].WriteAt(junk, dataOff+int64(r.Sector)*512); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReshapeBitmap grows raid5 4->5 and raid6 5->6 with an internal
// bitmap as md 6.1 does: the reshape starts (no refusal), the bitmap keeps
// its offset, chunk size and sync_size (no md_bitmap_resize: dev_sectors
// does not change), a write during the reshape sets the bit of its member
// sectors in the geometry of its side (raid5.c sh->sector), and a power
// cut mid-reshape with a torn write in the new geometry is repaired on the
// next assembly: the reshape continues, then the resync the dirty bits
// ask for fixes the parity (check 0).
func TestReshapeBitmap(t *testing.T) {
	for _, c := range []struct {
		level string
		n     int
	}{{"raid5", 4}, {"raid6", 5}} {
		t.Run(c.level, func(t *testing.T) {
			mems := createChunk(t, spec{level: c.level, n: c.n, chunkKiB: 64, devMiB: []int{8}, bitmap: true}, 64<<10)
			a := open(t, mems, recoverOptions())
			data := make([]byte, a.Size())
			fillPattern(newRand(5), data)
			m := &model{b: data}
			mustWrite(t, a, m, data, 0)
			a.Close() // a clean stop clears the bits
			if d := dirtyChunks(t, mems[0]); len(d) != 0 {
				t.Fatalf("dirty after a clean stop: %v", d)
			}
			h0, _ := readBits(t, mems[0])
			sb0 := readSB(t, mems[0])
			a = open(t, mems, recoverOptions())
			spare := NewMemDevice(8 << 20)
			if _, err := a.AddDevice(spare, AddOptions{Replacement: -1}); err != nil {
				t.Fatal(err)
			}
			if err := a.StartReshape(ReshapeStart{RaidDisks: c.n + 1}); err != nil {
				t.Fatalf("reshape with a bitmap: %v", err)
			}
			all := append(append([]*MemDevice(nil), mems...), spare)
			for i, d := range all {
				s := readSB(t, d)
				if s.FeatureMap&superblock.FeatureBitmapOffset == 0 || s.BitmapOffset != sb0.BitmapOffset || s.FeatureMap&superblock.FeatureReshapeActive == 0 {
					t.Errorf("member %d at the start: features %#x bitmap_offset %d", i, s.FeatureMap, s.BitmapOffset)
				}
			}
			ra := &reshapeAction{a: a}
			p := uint64(0)
			for i := 0; i < 4; i++ {
				n, err := ra.unit(p, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				p += n
			}
			if d := dirtyChunks(t, mems[0]); len(d) != 0 {
				t.Errorf("the reshape's own writes set bits %v (md sets none)", d)
			}
			if err := a.RemoveBitmap(); !errors.Is(err, ErrBusy) {
				t.Errorf("bitmap removal mid-reshape: %v, want EBUSY as md's update_array_info", err)
			}
			// one write on each side of the reshape point
			rs := a.rs.now()
			chunk := rs.New.ChunkSectors()
			newS := p / 2 / rs.New.StripeSectors() * rs.New.StripeSectors()
			oldS := (a.rs.geo.Old.ArraySectors() - 4*rs.Old.StripeSectors()) / rs.Old.StripeSectors() * rs.Old.StripeSectors()
			b := make([]byte, 4096)
			fillPattern(newRand(6), b)
			mustWrite(t, a, m, b, int64(newS)*512)
			fillPattern(newRand(7), b)
			mustWrite(t, a, m, b, int64(oldS)*512)
			newRow, oldRow := rowOf(rs.New, newS), rowOf(rs.Old, oldS)
			bmChunk := uint64(h0.ChunkSize) / 512
			want := []uint64{newRow.Sector / bmChunk, oldRow.Sector / bmChunk}
			if want[0] > want[1] {
				want[0], want[1] = want[1], want[0]
			}
			got := dirtyChunks(t, mems[0])
			if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
				t.Errorf("dirty bits %v, want %v (member sectors %d new, %d old)", got, want, newRow.Sector, oldRow.Sector)
			}
			// the power cut: the new-side write's parity torn
			cut := cloneMems(t, all)
			tearParity(t, cut, newRow, int64(sb0.DataOffset+uint64(int64(readSB(t, mems[0]).NewOffset)))*512, chunk)
			pos := readSB(t, cut[0]).ReshapePosition

			// the array that was not cut finishes, the bitmap as md keeps it
			if err := a.Reshape(context.Background()); err != nil {
				t.Fatal(err)
			}
			full := make([]byte, a.Size())
			copy(full, m.b)
			m = &model{b: full}
			checkContent(t, a, m)
			if mm, err := a.Check(context.Background(), false); err != nil || mm != 0 {
				t.Errorf("check: %d mismatches, %v", mm, err)
			}
			a.Close()
			for i, d := range all {
				h, _ := readBits(t, d)
				s := readSB(t, d)
				if h.ChunkSize != h0.ChunkSize || h.SyncSize != h0.SyncSize || s.BitmapOffset != sb0.BitmapOffset ||
					s.FeatureMap != superblock.FeatureBitmapOffset|sb0.FeatureMap&superblock.FeatureBadBlocks || s.DataOffset >= sb0.DataOffset {
					t.Errorf("member %d after: bitmap chunk %d sync_size %d offset %d, features %#x data_offset %d; before %d %d %d",
						i, h.ChunkSize, h.SyncSize, s.BitmapOffset, s.FeatureMap, s.DataOffset, h0.ChunkSize, h0.SyncSize, sb0.BitmapOffset)
				}
			}

			// the cut image: reshape first, then the bitmap-guided resync
			a = open(t, cut, recoverOptions())
			if ok, p := a.Reshaping(); !ok || p != pos {
				t.Fatalf("cut image: reshaping %v at %d, want %d", ok, p, pos)
			}
			if need, _ := a.NeedsResync(); !need {
				t.Error("the cut image does not need a resync")
			}
			if err := a.Reshape(context.Background()); err != nil {
				t.Fatal(err)
			}
			checkContent(t, a, m)
			if need, _ := a.NeedsResync(); !need {
				t.Error("the resync was dropped with the reshape")
			}
			if err := a.Resync(context.Background()); err != nil {
				t.Fatal(err)
			}
			checkContent(t, a, m)
			if mm, err := a.Check(context.Background(), false); err != nil || mm != 0 {
				t.Errorf("cut image after reshape + resync: check %d mismatches, %v", mm, err)
			}
			a.Close()
			if d := dirtyChunks(t, cut[0]); len(d) != 0 {
				t.Errorf("dirty after the resync and a clean stop: %v", d)
			}
		})
	}
}

// TestTakeoverBitmap: md's takeovers keep an internal bitmap (level_store
// swaps the personality under it): raid5 -> raid6 (Q missing: the new
// member's recovery is a full one, never guided by the bits), back to
// raid5 (Q leaves for the spares), each time the bitmap's offset, chunk
// and sync_size unchanged and the parity right (check 0); raid0's
// takeover refuses an array with a bitmap (EBUSY) and changes nothing.
func TestTakeoverBitmap(t *testing.T) {
	mems := createChunk(t, spec{level: "raid5", n: 3, chunkKiB: 64, devMiB: []int{4}, bitmap: true}, 64<<10)
	h0, _ := readBits(t, mems[0])
	sb0 := readSB(t, mems[0])
	a := open(t, mems, recoverOptions())
	data := make([]byte, a.Size())
	fillPattern(newRand(31), data)
	m := &model{b: data}
	mustWrite(t, a, m, data, 0)
	ev := a.Events()
	if err := a.ChangeLevel(layout.RAID0); !errors.Is(err, ErrBusy) || a.Events() != ev || a.level != layout.RAID5 {
		t.Fatalf("to raid0 with a bitmap: %v (events %d -> %d, level %v), want EBUSY and no change", err, ev, a.Events(), a.level)
	}
	if err := a.ChangeLevel(layout.RAID6); err != nil {
		t.Fatalf("to raid6 with a bitmap: %v", err)
	}
	if a.Degraded() != 1 {
		t.Fatalf("raid6: degraded %d", a.Degraded())
	}
	workload(t, a, m, 32, 40)
	mems = append(mems, NewMemDevice(4<<20))
	if _, err := a.AddDevice(mems[3], AddOptions{Replacement: -1}); err != nil {
		t.Fatal(err)
	}
	waitSync(t, a)
	if a.Degraded() != 0 {
		t.Fatalf("raid6: still degraded %d after the recovery", a.Degraded())
	}
	checkContent(t, a, m)
	if mm, err := a.Check(context.Background(), false); err != nil || mm != 0 {
		t.Errorf("raid6: check %d mismatches, %v", mm, err)
	}
	if err := a.ChangeLevel(layout.RAID5); err != nil {
		t.Fatalf("back to raid5 with a bitmap: %v", err)
	}
	workload(t, a, m, 33, 40)
	if mm, err := a.Check(context.Background(), false); err != nil || mm != 0 {
		t.Errorf("raid5 again: check %d mismatches, %v", mm, err)
	}
	a.Close()
	for i, d := range mems[:3] {
		h, _ := readBits(t, d)
		s := readSB(t, d)
		if s.Level != 5 || s.FeatureMap&superblock.FeatureBitmapOffset == 0 || s.BitmapOffset != sb0.BitmapOffset ||
			h.ChunkSize != h0.ChunkSize || h.SyncSize != h0.SyncSize {
			t.Errorf("member %d: level %d features %#x bitmap offset %d chunk %d sync_size %d", i, s.Level, s.FeatureMap, s.BitmapOffset, h.ChunkSize, h.SyncSize)
		}
		if dc := dirtyChunks(t, d); len(dc) != 0 {
			t.Errorf("member %d: dirty %v after a clean stop", i, dc)
		}
	}
	a = open(t, mems, recoverOptions(), droppedIndexes(mems)...)
	checkContent(t, a, m)
	a.Close()
}

// TestBitmapRoomCheck: the new data offset of a reshape may not reach
// into the bitmap (super_1_allow_new_offset: below sb_start +
// bitmap_offset + the bitmap's 4 KiB pages is refused).
func TestBitmapRoomCheck(t *testing.T) {
	mems := createChunk(t, spec{level: "raid5", n: 3, chunkKiB: 64, devMiB: []int{8}, bitmap: true}, 64<<10)
	a := open(t, mems, recoverOptions())
	defer a.Close()
	sb := readSB(t, mems[0])
	pages := a.bitmapPages()
	end := int64(sb.SuperOffset) + int64(sb.BitmapOffset) + int64(pages)*8
	if pages != 1 || end >= int64(sb.DataOffset) {
		t.Fatalf("bitmap of %d pages ends at %d, data at %d", pages, end, sb.DataOffset)
	}
	if err := a.bitmapRoomCheck(end - int64(sb.DataOffset)); err != nil {
		t.Errorf("new offset right behind the bitmap: %v", err)
	}
	if err := a.bitmapRoomCheck(end - 1 - int64(sb.DataOffset)); !errors.Is(err, ErrNoRoom) {
		t.Errorf("new offset one sector into the bitmap: %v, want ErrNoRoom", err)
	}
	if err := a.bitmapRoomCheck(64); err != nil {
		t.Errorf("data moving up: %v", err)
	}
}
