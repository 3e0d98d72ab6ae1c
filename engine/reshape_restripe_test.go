package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"mdtool/engine/layout"
	"mdtool/superblock"
)

// restripe is one restriping reshape the engine starts: the array
// created, the reshape asked for, and (shrinks) the component size given
// room after the data first and the array size reduced.
type restripe struct {
	name  string
	s     spec
	rq    ReshapeStart
	compK uint64 // component size to set first (KiB; 0: as created)
}

func restripeCases() []restripe {
	return []restripe{
		{name: "raid5-chunk512-64", s: spec{level: "raid5", n: 4, chunkKiB: 512}, rq: ReshapeStart{ChunkSectors: 128}},
		{name: "raid5-chunk64-256", s: spec{level: "raid5", n: 4, chunkKiB: 64}, rq: ReshapeStart{ChunkSectors: 512}},
		{name: "raid5-ls-ra", s: spec{level: "raid5", n: 4, chunkKiB: 64},
			rq: ReshapeStart{Layout: layout.RightAsymmetric, SetLayout: true}},
		{name: "raid6-chunk64-128", s: spec{level: "raid6", n: 5, chunkKiB: 64}, rq: ReshapeStart{ChunkSectors: 256}},
		{name: "raid5-5to4", s: spec{level: "raid5", n: 5, chunkKiB: 64}, rq: ReshapeStart{RaidDisks: 4}, compK: 6 << 10},
		{name: "raid6-6to5", s: spec{level: "raid6", n: 6, chunkKiB: 64}, rq: ReshapeStart{RaidDisks: 5}, compK: 6 << 10},
		// more room after the data than before: mdadm moves it up
		{name: "raid5-chunk64-128-up", s: spec{level: "raid5", n: 4, chunkKiB: 64}, rq: ReshapeStart{ChunkSectors: 256}, compK: 6 << 10},
	}
}

// startRestripe creates the case's array, fills it, starts the reshape
// and closes it: the members then record the reshape at its start.
func startRestripe(t *testing.T, c restripe) ([]*MemDevice, []byte, *superblock.Superblock) {
	t.Helper()
	mems := create(t, c.s)
	a := open(t, mems, recoverOptions())
	if c.compK != 0 {
		if _, err := a.GrowSize(c.compK*2, true); err != nil {
			t.Fatal(err)
		}
	}
	if c.rq.RaidDisks != 0 && c.rq.RaidDisks < c.s.n {
		err := a.StartReshape(c.rq)
		if !errors.Is(err, ErrShrinkSize) {
			t.Fatalf("shrink before the array size was reduced: %v, want ErrShrinkSize", err)
		}
		k := uint64(c.rq.RaidDisks - (c.s.n - a.striped.DataDisks()))
		if err := a.SetArraySize(a.striped.DevSectors(0) / a.striped.ChunkSectors() * a.striped.ChunkSectors() * k); err != nil {
			t.Fatal(err)
		}
	}
	data := make([]byte, a.Size())
	fillPattern(newRand(11), data)
	mustWrite(t, a, &model{b: data}, data, 0)
	sb0 := readSB(t, mems[0])
	if err := a.StartReshape(c.rq); err != nil {
		t.Fatal(err)
	}
	checkContent(t, a, &model{b: data})
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	return mems, data, sb0
}

// TestReshapeRestripe: the engine changes chunk, layout and (shrinking)
// the number of devices of raid5/6 as mdadm 4.2 + md 6.1 do without a
// backup file: data offset moved down (forwards) when there is more room
// before the data, up (backwards, reshape_position counting down from
// the end) for a shrink; data served and written through the reshape,
// interrupted and reopened mid-way; at the end the superblocks hold the
// new shape (md_finish_reshape's data_offset and data_size, the removed
// members spares) and the parity is consistent.
func TestReshapeRestripe(t *testing.T) {
	for _, c := range restripeCases() {
		t.Run(c.name, func(t *testing.T) {
			mems, data, sb0 := startRestripe(t, c)
			sb := readSB(t, mems[0])
			shrink := c.rq.RaidDisks != 0 && c.rq.RaidDisks < c.s.n
			up := shrink || c.compK != 0 // room after the data
			backwards := sb.FeatureMap&superblock.FeatureReshapeBackwards != 0
			if backwards != up || (sb.NewOffset > 0) != up || sb.NewOffset == 0 ||
				sb.FeatureMap&superblock.FeatureReshapeActive == 0 {
				t.Fatalf("started: features %#x new_offset %d (shrink %v)", sb.FeatureMap, sb.NewOffset, shrink)
			}
			a := open(t, mems, recoverOptions())
			_, pos := a.Reshaping()
			if want := uint64(0); !up && pos != want || up && pos != a.rs.geo.New.ArraySectors() {
				t.Fatalf("starts at %d (new array %d)", pos, a.rs.geo.New.ArraySectors())
			}
			m := &model{b: data}
			ra := &reshapeAction{a: a}
			for i := 0; i < 5; i++ {
				if _, err := ra.unit(0, 1<<20); err != nil {
					t.Fatal(err)
				}
			}
			workload(t, a, m, 5, 60)
			checkContent(t, a, m)
			a.Close()
			a = open(t, mems, recoverOptions())
			checkContent(t, a, m)
			if err := a.Reshape(context.Background()); err != nil {
				t.Fatal(err)
			}
			checkContent(t, a, m)
			workload(t, a, m, 6, 40)
			if mm, err := a.Check(context.Background(), false); err != nil || mm != 0 {
				t.Errorf("check: %d mismatches, %v", mm, err)
			}
			a.Close()
			checkFinished(t, c, mems, sb0, sb.NewOffset)
			a = open(t, mems, recoverOptions())
			checkContent(t, a, m)
			a.Close()
		})
	}
}

// checkFinished checks the superblocks after the reshape.
func checkFinished(t *testing.T, c restripe, mems []*MemDevice, sb0 *superblock.Superblock, off int32) {
	t.Helper()
	n := c.s.n
	if c.rq.RaidDisks != 0 {
		n = c.rq.RaidDisks
	}
	for i, d := range mems {
		s := readSB(t, d)
		wantLayout, wantChunk := sb0.Layout, sb0.ChunkSize
		if c.rq.SetLayout {
			wantLayout = uint32(c.rq.Layout)
		}
		if c.rq.ChunkSectors != 0 {
			wantChunk = uint32(c.rq.ChunkSectors)
		}
		if s.FeatureMap&reshapeBits != 0 || s.DataOffset != uint64(int64(sb0.DataOffset)+int64(off)) ||
			s.DataSize != uint64(int64(sb0.DataSize)-int64(off)) || s.RaidDisks != uint32(n) ||
			s.Layout != wantLayout || s.ChunkSize != wantChunk {
			t.Errorf("member %d: features %#x data_offset %d data_size %d raid_disks %d layout %d chunk %d",
				i, s.FeatureMap, s.DataOffset, s.DataSize, s.RaidDisks, s.Layout, s.ChunkSize)
		}
		if i >= n && s.Role() != superblock.RoleSpare {
			t.Errorf("member %d (removed) has role %d, want spare", i, s.Role())
		}
	}
}

// TestReshapeRestripeCrash cuts the power at several points of each
// restriping reshape (every member write before the cut landed, none
// after): each image opens at its recorded reshape_position with the
// data intact, and finishes with the data intact and the parity
// consistent.
func TestReshapeRestripeCrash(t *testing.T) {
	for _, c := range restripeCases() {
		t.Run(c.name, func(t *testing.T) {
			base, data, _ := startRestripe(t, c)
			var total atomic.Int64
			{
				var ds []Device
				for _, m := range cloneMems(t, base) {
					ds = append(ds, countWrites{Device: m, n: &total})
				}
				a, err := Open(ds, recoverOptions())
				if err != nil {
					t.Fatal(err)
				}
				if err := a.Reshape(context.Background()); err != nil {
					t.Fatal(err)
				}
				a.Close()
			}
			n := int64(len(base))
			t2 := total.Load() - 2*n
			for _, cut := range []int64{1, 9, 33, 70, total.Load() / 3, total.Load() / 2, total.Load() * 4 / 5, t2, t2 + 1, t2 + n + 1} {
				crashRestripe(t, base, data, cut)
			}
		})
	}
}

func crashRestripe(t *testing.T, base []*MemDevice, data []byte, cut int64) {
	t.Helper()
	mems := cloneMems(t, base)
	var snap []*MemDevice
	var left atomic.Int64
	left.Store(cut)
	var ds []Device
	for _, m := range mems {
		ds = append(ds, crashAt{Device: m.Reopen(), n: &left, snap: func() { snap = cloneMems(t, mems) }})
	}
	a, err := Open(ds, recoverOptions())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Reshape(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if snap == nil {
		t.Fatalf("cut %d: the reshape made fewer writes", cut)
	}
	a = open(t, snap, recoverOptions())
	defer a.Close()
	_, pos := a.Reshaping()
	m := &model{b: data}
	t.Run(fmt.Sprintf("cut%d-at%d", cut, pos), func(t *testing.T) {
		checkContent(t, a, m)
		if err := a.Reshape(context.Background()); err != nil {
			t.Fatal(err)
		}
		checkContent(t, a, m)
		if mm, err := a.Check(context.Background(), false); err != nil || mm != 0 {
			t.Errorf("check %d mismatches, %v", mm, err)
		}
	})
}

// TestReshapeOffsetChoice: mdadm 4.2's choose_offset and
// min_offset_change for the shapes of the restripe tests (the kernel
// test compares the offsets mdadm writes with the engine's).
func TestReshapeOffsetChoice(t *testing.T) {
	for _, c := range []struct{ lo, hi, min, max, want uint64 }{
		{80, 4096, 80, 3072, 2048}, // 1.2, data at 2 MiB, 1024 sectors needed: down to 1 MiB
		{80, 2048, 80, 1024, 1024},
		{80, 2048, 80, 1920, 1024},
		{2048, 4096, 2048 + 384, 4096, 4096}, // the middle 3072 rounds up past the lower bound
	} {
		if got := chooseOffset(c.lo, c.hi, c.min, c.max); got != c.want {
			t.Errorf("choose_offset(%d, %d, %d, %d) = %d, want %d", c.lo, c.hi, c.min, c.max, got, c.want)
		}
	}
	for _, c := range []struct {
		oc, nc uint64
		od, nd int
		want   uint64
	}{{1024, 128, 3, 3, 1024}, {128, 512, 3, 3, 512}, {128, 128, 4, 3, 384}, {128, 256, 3, 3, 256}, {128, 128, 3, 4, 512}} {
		if got := ReshapeMinOffset(c.oc, c.nc, c.od, c.nd); got != c.want {
			t.Errorf("min_offset_change chunk %d->%d, %d->%d data disks: %d, want %d", c.oc, c.nc, c.od, c.nd, got, c.want)
		}
	}
}

// TestReshapeRecordRule: md's reshape_request rule, and where the engine
// records more: with the data offset moved down by twice the larger
// chunk (raid5 chunk 512K->64K on 1.2 with data at 2 MiB), md's worst
// case read point never passes its write point, so md records nothing
// of its own; two rows past the recorded position the next row would
// overwrite old data a restart reads, and the engine records first.
func TestReshapeRecordRule(t *testing.T) {
	mems, _, _ := startRestripe(t, restripeCases()[0])
	a := open(t, mems, recoverOptions())
	defer a.Close()
	ra := &reshapeAction{a: a}
	_, row := ra.reshapeSectors()
	if d := a.minOffsetDiff(); d != -2048 {
		t.Fatalf("min_offset_diff %d, want -2048", d)
	}
	for p := uint64(0); p < 6*row; p += row {
		if ra.mdMustRecord(p, 0) {
			t.Errorf("md's rule records at %d (safe 0)", p)
		}
	}
	if !ra.clear(row, 2*row, 0) || ra.clear(2*row, 3*row, 0) || !ra.clear(2*row, 3*row, row) {
		t.Errorf("overlap: rows 1 (safe 0) %v, 2 (safe 0) %v, 2 (safe 1) %v; want true false true",
			ra.clear(row, 2*row, 0), ra.clear(2*row, 3*row, 0), ra.clear(2*row, 3*row, row))
	}
	// the walk: the recorded position never lags two rows behind
	for i := 0; i < 8; i++ {
		if _, err := ra.unit(0, row); err != nil {
			t.Fatal(err)
		}
		if p, s := a.rs.progress.Load(), a.rs.safe.Load(); p > s+2*row {
			t.Fatalf("after step %d: progress %d, recorded %d", i, p, s)
		}
	}
	// shrink (backwards): md's own rule records
	mems, _, _ = startRestripe(t, restripeCases()[4])
	b := open(t, mems, recoverOptions())
	defer b.Close()
	rb := &reshapeAction{a: b}
	_, row = rb.reshapeSectors()
	end := b.rs.geo.New.ArraySectors()
	fired := false
	for p := end; p > row*4 && !fired; p -= row {
		fired = rb.mdMustRecord(p, end)
	}
	if !fired {
		t.Error("md's rule never records walking a shrink back from the end without a record")
	}
}

// TestReshapeRestripeDegraded: md 6.1 restripes and shrinks a degraded
// array (not failed: raid5_start_reshape's has_failed); the engine does
// too, reading the missing member's data through parity, and refuses to
// add devices to it without a spare. The data survives the reshape and a reopen (still
// degraded by the one missing role).
func TestReshapeRestripeDegraded(t *testing.T) {
	for _, c := range []restripe{restripeCases()[1], restripeCases()[5]} {
		t.Run(c.name, func(t *testing.T) {
			mems := create(t, c.s)
			a := open(t, mems, recoverOptions(), 1)
			if c.compK != 0 {
				if _, err := a.GrowSize(c.compK*2, true); err != nil {
					t.Fatal(err)
				}
				k := uint64(c.rq.RaidDisks - (c.s.n - a.striped.DataDisks()))
				if err := a.SetArraySize(a.striped.DevSectors(0) / a.striped.ChunkSectors() * a.striped.ChunkSectors() * k); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.StartReshape(ReshapeStart{RaidDisks: c.s.n + 1}); err == nil {
				t.Fatal("added devices to a degraded array")
			}
			data := make([]byte, a.Size())
			fillPattern(newRand(12), data)
			m := &model{b: data}
			mustWrite(t, a, m, data, 0)
			if err := a.StartReshape(c.rq); err != nil {
				t.Fatal(err)
			}
			ra := &reshapeAction{a: a}
			for i := 0; i < 3; i++ {
				if _, err := ra.unit(0, 1<<20); err != nil {
					t.Fatal(err)
				}
			}
			workload(t, a, m, 8, 40)
			checkContent(t, a, m)
			if err := a.Reshape(context.Background()); err != nil {
				t.Fatal(err)
			}
			checkContent(t, a, m)
			a.Close()
			a = open(t, mems, recoverOptions(), 1)
			defer a.Close()
			if ok, _ := a.Reshaping(); ok || a.Degraded() != 1 {
				t.Fatalf("reopened: reshaping %v, degraded %d", ok, a.Degraded())
			}
			checkContent(t, a, m)
		})
	}
}

// TestReshapeNoRoom: without the room mdadm 4.2 needs to move the data
// offset (after the data for a shrink whose component size fills the
// device; before it for a growth on 1.0 metadata) the reshape is refused
// with a *NoRoomError (mdadm would want a backup file), and nothing
// changes.
func TestReshapeNoRoom(t *testing.T) {
	mems := create(t, spec{level: "raid5", n: 5, chunkKiB: 64})
	a := open(t, mems, recoverOptions())
	defer a.Close()
	if err := a.SetArraySize(a.striped.DevSectors(0) * 3); err != nil {
		t.Fatal(err)
	}
	var nr *NoRoomError
	err := a.StartReshape(ReshapeStart{RaidDisks: 4})
	if !errors.As(err, &nr) || !nr.Backwards || nr.Need != 384 || !errors.Is(err, ErrNoRoom) {
		t.Fatalf("shrink without room after the data: %v", err)
	}
	if ok, _ := a.Reshaping(); ok || readSB(t, mems[0]).FeatureMap&superblock.FeatureReshapeActive != 0 {
		t.Fatal("a refused reshape left a reshape behind")
	}
	m10 := create(t, spec{level: "raid5", n: 4, chunkKiB: 64, metadata: "1.0"})
	b := open(t, m10, recoverOptions())
	defer b.Close()
	if _, err := b.AddDevice(NewMemDevice(8<<20), AddOptions{Replacement: -1}); err != nil {
		t.Fatal(err)
	}
	err = b.StartReshape(ReshapeStart{RaidDisks: 5})
	if !errors.As(err, &nr) || nr.Backwards || nr.Have != 0 {
		t.Fatalf("growing 1.0 (no room before the data): %v", err)
	}
}
