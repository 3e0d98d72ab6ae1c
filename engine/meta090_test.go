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
// checksums, each member's this_disk its own slot), records a failed
// member as md does (slot removed+faulty, the member under a spare's
// number) and refuses what would write 1.x metadata.
func TestEngine090(t *testing.T) {
	mems := create(t, spec{level: "raid5", n: 4, chunkKiB: 64, metadata: "0.90", bitmap: true})
	a := open(t, mems, testOptions())
	m := newModel(a.Size())
	p := make([]byte, 3*a.IOOpt()+12345&^511)
	fillPattern(newRand(7), p)
	mustWrite(t, a, m, p, 4096)
	if err := a.AddBitmap(8, bitmap.Header{}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("AddBitmap on 0.90: %v", err)
	}
	if err := a.RemoveBitmap(); !errors.Is(err, ErrUnsupported) {
		t.Errorf("RemoveBitmap on 0.90: %v", err)
	}
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
