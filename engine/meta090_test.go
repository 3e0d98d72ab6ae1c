package engine

import (
	"errors"
	"testing"

	"mdtool/bitmap"
	"mdtool/superblock"
)

// read090 parses the 0.90 superblock of a memory member.
func read090(t *testing.T, m *MemDevice) *superblock.SuperblockV090 {
	t.Helper()
	raw := make([]byte, superblock.Size090)
	if _, err := m.Reopen().ReadAt(raw, int64(superblock.Offset090(uint64(m.Geometry().Size)))); err != nil {
		t.Fatal(err)
	}
	sb, err := superblock.Parse090(raw)
	if err != nil {
		t.Fatalf("0.90 superblock: %v", err)
	}
	return sb
}

// A 0.90 raid5 with a bitmap, as create -e 0.90 writes it: the engine
// serves it, keeps its superblocks in 0.90 form (clean after Close, valid
// checksums, each member's this_disk its own slot), removes and adds its
// bitmap (--grow --bitmap) and records a failed member as md does (slot
// removed+faulty, the member under a spare's number).
func TestEngine090(t *testing.T) {
	mems := create(t, spec{level: "raid5", n: 4, chunkKiB: 64, metadata: "0.90", bitmap: true})
	a := open(t, mems, testOptions())
	m := newModel(a.Size())
	p := make([]byte, 3*a.IOOpt()+12345&^511)
	fillPattern(newRand(7), p)
	mustWrite(t, a, m, p, 4096)
	// --grow --bitmap=none, then internal (add_internal_bitmap0's
	// header: 4 KiB after the superblock, 0.90's uuid words).
	if err := a.RemoveBitmap(); err != nil {
		t.Fatalf("RemoveBitmap on 0.90: %v", err)
	}
	if sb := read090(t, mems[0]); sb.State&superblock.SB090BitmapPresent != 0 || a.HasBitmap() {
		t.Errorf("after the removal: state %#x, bitmap %v", sb.State, a.HasBitmap())
	}
	h := bitmap.Header{Magic: bitmap.Magic, Version: bitmap.Version, UUID: read090(t, mems[0]).BitmapUUID090(),
		ChunkSize: 64 << 10, DaemonSleep: 5, SyncSize: a.BitmapSyncSectors()}
	if err := a.AddBitmap(8, h); err != nil {
		t.Fatalf("AddBitmap on 0.90: %v", err)
	}
	if err := a.AddBitmap(8, h); !errors.Is(err, ErrBitmapPresent) {
		t.Errorf("a second AddBitmap: %v", err)
	}
	mustWrite(t, a, m, p[:4096], 1<<20)
	a.Close() // (memory members report ErrClosed at Close)
	var ev uint64
	for i, mem := range mems {
		sb := read090(t, mem)
		if sb.State != superblock.SB090Clean|superblock.SB090BitmapPresent || sb.ThisDisk.Number != uint32(i) ||
			sb.ThisDisk.State != superblock.Disk090Active|superblock.Disk090Sync || sb.ActiveDisks != 4 || sb.FailedDisks != 0 {
			t.Errorf("member %d: state %#x this_disk %+v active %d failed %d", i, sb.State, sb.ThisDisk, sb.ActiveDisks, sb.FailedDisks)
		}
		if i > 0 && sb.Events() != ev {
			t.Errorf("member %d: events %d, member 0 %d", i, sb.Events(), ev)
		}
		ev = sb.Events()
		raw := make([]byte, bitmap.HeaderSize)
		if _, err := mem.Reopen().ReadAt(raw, int64(superblock.Offset090(uint64(mem.Geometry().Size)))+4096); err != nil {
			t.Fatal(err)
		}
		if bh, err := bitmap.Parse(raw); err != nil || bh.UUID != sb.BitmapUUID090() || bh.Events != sb.Events() || bh.ChunkSize != 64<<10 {
			t.Errorf("member %d: the added bitmap %+v, %v (superblock events %d)", i, bh, err, sb.Events())
		}
	}

	a = open(t, mems, testOptions())
	checkContent(t, a, m)
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	a.Close() // (memory members report ErrClosed at Close)
	sb := read090(t, mems[0])
	if d := sb.Disks[1]; d.State != superblock.Disk090Removed|superblock.Disk090Faulty {
		t.Errorf("failed slot 1: %+v", d)
	}
	if d := sb.Disks[4]; d.State != superblock.Disk090Faulty || d.Number != 4 {
		t.Errorf("failed member: %+v", d)
	}
	if sb.Events() <= ev || sb.ActiveDisks != 3 || sb.FailedDisks != 1 || sb.WorkingDisks != 3 {
		t.Errorf("after the failure: events %d (before %d) active %d failed %d working %d", sb.Events(), ev, sb.ActiveDisks, sb.FailedDisks, sb.WorkingDisks)
	}
	// Degraded, it still serves the data.
	a = open(t, mems, testOptions(), 1)
	checkContent(t, a, m)
	a.Close()
}
