package engine

import (
	"context"
	"sync/atomic"
	"testing"

	"mdtool/superblock"
)

// cancelAfter cancels a context once a member has taken n writes.
type cancelAfter struct {
	Device
	n      *atomic.Int64
	cancel context.CancelFunc
}

func (d cancelAfter) WriteAt(p []byte, off int64) (int, error) {
	if d.n.Add(-1) == 0 {
		d.cancel()
	}
	return d.Device.WriteAt(p, off)
}

// TestReshapeFinish: the engine continues a reshape from
// reshape_position, interrupted once (the position is recorded and a
// reopen resumes from it), to its end: the array is in the new geometry
// (size, data offset, layout, no reshape bits, data_size grown by the
// offset moved), the old data is unchanged and the added capacity reads
// as zeroes.
func TestReshapeFinish(t *testing.T) {
	for _, c := range []struct {
		level string
		n     int
		pos   uint64
	}{{"raid5", 4, 512 * 9}, {"raid6", 5, 384 * 12}} {
		t.Run(c.level, func(t *testing.T) {
			mems, data := midReshape(t, c.level, c.n, c.pos, -256)
			sb0 := readSB(t, mems[0])
			// interrupted after a few windows
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var left atomic.Int64
			left.Store(40)
			var ds []Device
			for _, m := range mems {
				ds = append(ds, cancelAfter{Device: m.Reopen(), n: &left, cancel: cancel})
			}
			a, err := Open(ds, recoverOptions())
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Reshape(ctx); err == nil {
				t.Fatal("the interrupted reshape returned nil")
			}
			_, pos := a.Reshaping()
			checkContent(t, a, &model{b: data})
			a.Close()
			sb := readSB(t, mems[0])
			if pos <= c.pos || sb.ReshapePosition != pos || sb.FeatureMap&superblock.FeatureReshapeActive == 0 {
				t.Fatalf("interrupted at %d: superblock records %d (features %#x), started at %d", pos, sb.ReshapePosition, sb.FeatureMap, c.pos)
			}
			a = open(t, mems, recoverOptions())
			if ok, p := a.Reshaping(); !ok || p != pos {
				t.Fatalf("reopened at %v %d, want %d", ok, p, pos)
			}
			checkContent(t, a, &model{b: data})
			if err := a.Reshape(context.Background()); err != nil {
				t.Fatal(err)
			}
			if ok, _ := a.Reshaping(); ok {
				t.Fatal("still reshaping")
			}
			k := c.n // data disks after the grow
			if c.level == "raid6" {
				k = c.n - 1
			}
			want := int64(sb0.Size/128*128) * 512 * int64(k)
			if a.Size() != want || a.Geometry().RaidDisks() != c.n+1 {
				t.Fatalf("after the reshape: size %d raid_disks %d, want %d %d", a.Size(), a.Geometry().RaidDisks(), want, c.n+1)
			}
			full := make([]byte, want)
			copy(full, data)
			m := &model{b: full}
			checkContent(t, a, m)
			workload(t, a, m, 5, 50)
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			for i, d := range mems {
				s := readSB(t, d)
				if s.FeatureMap&reshapeBits != 0 || s.DataOffset != sb0.DataOffset-256 || s.DataSize != sb0.DataSize+256 ||
					s.RaidDisks != uint32(c.n+1) || s.Layout != sb0.NewLayout || s.ChunkSize != sb0.NewChunk {
					t.Errorf("member %d: features %#x data_offset %d data_size %d raid_disks %d layout %d chunk %d",
						i, s.FeatureMap, s.DataOffset, s.DataSize, s.RaidDisks, s.Layout, s.ChunkSize)
				}
			}
			a = open(t, mems, recoverOptions())
			checkContent(t, a, m)
			if mm, err := a.Check(context.Background(), false); err != nil || mm != 0 {
				t.Errorf("check after the reshape: %d mismatches, %v", mm, err)
			}
			a.Close()
		})
	}
}

// crashAt takes a copy of every member (the power-cut image: all writes
// before this one) when the members have taken n writes in all.
type crashAt struct {
	Device
	n    *atomic.Int64
	snap func()
}

func (d crashAt) WriteAt(p []byte, off int64) (int, error) {
	if d.n.Add(-1) == 0 {
		d.snap()
	}
	return d.Device.WriteAt(p, off)
}

func cloneMems(t *testing.T, mems []*MemDevice) []*MemDevice {
	t.Helper()
	out := make([]*MemDevice, len(mems))
	for i, m := range mems {
		b := make([]byte, m.Geometry().Size)
		if _, err := m.Reopen().ReadAt(b, 0); err != nil {
			t.Fatal(err)
		}
		out[i] = NewMemDevice(int64(len(b)))
		out[i].WriteAt(b, 0)
	}
	return out
}

// TestReshapeCrash cuts the power at several points of a reshape the
// engine continues (every member write before the cut landed, none
// after): each image opens at its recorded reshape_position with the
// data intact, and the reshape then finishes with the data intact and
// the parity consistent. This is the checkpoint rule: no window
// overwrites old data a restart from the recorded position still reads.
func TestReshapeCrash(t *testing.T) {
	base, data := midReshape(t, "raid5", 4, 512*9, -256)
	// count the member writes of a whole reshape
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
	// the last 2n writes are the superblocks of the switch to the new
	// geometry and those of Close: cut before the last data write,
	// before the first and in the middle of the switch's superblocks,
	// and during Close's
	t2 := total.Load() - 2*n
	for _, cut := range []int64{1, 6, 17, 40, 77, 130, 211, total.Load() / 2, t2, t2 + 1, t2 + 3, t2 + n + 2} {
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
		_, pos := a.Reshaping()
		t.Logf("cut after %d writes: resumes at %d", cut, pos)
		m := &model{b: make([]byte, a.Size())}
		copy(m.b, data)
		checkContent(t, a, m)
		if err := a.Reshape(context.Background()); err != nil {
			t.Fatal(err)
		}
		m = &model{b: make([]byte, a.Size())}
		copy(m.b, data)
		checkContent(t, a, m)
		if mm, err := a.Check(context.Background(), false); err != nil || mm != 0 {
			t.Errorf("cut %d (resumed at %d): check %d mismatches, %v", cut, pos, mm, err)
		}
		a.Close()
	}
}

type countWrites struct {
	Device
	n *atomic.Int64
}

func (d countWrites) WriteAt(p []byte, off int64) (int, error) {
	d.n.Add(1)
	return d.Device.WriteAt(p, off)
}

// TestReshapeWindow: a request between the recorded reshape_position
// (reshape_safe) and reshape_progress is held as md holds it: the
// position is recorded first, then the request runs in the new geometry.
func TestReshapeWindow(t *testing.T) {
	mems, data := midReshape(t, "raid5", 4, 512*9, -256)
	a := open(t, mems, recoverOptions())
	defer a.Close()
	ra := &reshapeAction{a: a}
	p := a.rs.progress.Load()
	for i := 0; i < 8 && a.rs.safe.Load() == p; i++ {
		n, err := ra.unit(p, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		p += n
	}
	safe := a.rs.safe.Load()
	if safe == p {
		t.Fatal("every window was recorded: no window to test")
	}
	if sb := readSB(t, mems[0]); sb.ReshapePosition != safe {
		t.Fatalf("superblock records %d, reshape_safe %d", sb.ReshapePosition, safe)
	}
	m := &model{b: data}
	b := make([]byte, 4096)
	fillPattern(newRand(3), b)
	mustWrite(t, a, m, b, int64(safe)*512) // in the window
	if sb := readSB(t, mems[0]); sb.ReshapePosition != p || a.rs.safe.Load() != p {
		t.Fatalf("after a write in the window: superblock records %d, reshape_safe %d, want %d", sb.ReshapePosition, a.rs.safe.Load(), p)
	}
	checkContent(t, a, m)
}

// TestReshapeStart: the engine grows raid5 4->5 and raid6 5->6 onto a
// spare as mdadm 4.2 + md do it (data_offset moved down by mdadm's
// min_offset_change, superblocks recording the reshape at 0 first),
// serves and writes during the reshape, and finishes it.
func TestReshapeStart(t *testing.T) {
	if got := MinOffsetChange(128, 3, 4); got != 512 {
		t.Errorf("min_offset_change 64K 3->4 data disks: %d, mdadm 512 (the kernel run's new offset)", got)
	}
	if got := MinOffsetChange(128, 4, 6); got != 384 {
		t.Errorf("min_offset_change 64K 4->6 data disks: %d, want lcm(512,768)/4 = 384", got)
	}
	for _, c := range []struct {
		level string
		n     int
	}{{"raid5", 4}, {"raid6", 5}} {
		t.Run(c.level, func(t *testing.T) {
			mems := create(t, spec{level: c.level, n: c.n, chunkKiB: 64, devMiB: []int{8}})
			a := open(t, mems, recoverOptions())
			data := make([]byte, a.Size())
			fillPattern(newRand(9), data)
			m := &model{b: data}
			mustWrite(t, a, m, data, 0)
			if err := a.StartReshape(ReshapeStart{RaidDisks: c.n + 1}); err == nil {
				t.Fatal("started a reshape without a spare")
			}
			spare := NewMemDevice(8 << 20)
			if _, err := a.AddDevice(spare, AddOptions{Replacement: -1}); err != nil {
				t.Fatal(err)
			}
			sb0 := readSB(t, mems[0])
			if err := a.StartReshape(ReshapeStart{RaidDisks: c.n + 1}); err != nil {
				t.Fatal(err)
			}
			all := append(append([]*MemDevice(nil), mems...), spare)
			for i, d := range all {
				s := readSB(t, d)
				if s.FeatureMap&superblock.FeatureReshapeActive == 0 || s.ReshapePosition != 0 || s.DeltaDisks != 1 ||
					s.NewOffset != -512 || s.RaidDisks != uint32(c.n+1) || s.NewLayout != sb0.Layout || s.NewChunk != sb0.ChunkSize {
					t.Errorf("member %d at the start: features %#x pos %d delta %d new_offset %d raid_disks %d",
						i, s.FeatureMap, s.ReshapePosition, s.DeltaDisks, s.NewOffset, s.RaidDisks)
				}
			}
			if r := readSB(t, spare).Role(); r != uint16(c.n) {
				t.Errorf("the spare has role %d, want %d", r, c.n)
			}
			checkContent(t, a, m)
			// part of the way, with writes on both sides
			ctx, cancel := context.WithCancel(context.Background())
			ra := &reshapeAction{a: a}
			p := uint64(0)
			for i := 0; i < 6; i++ {
				n, err := ra.unit(p, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				p += n
			}
			workload(t, a, m, 3, 100)
			checkContent(t, a, m)
			cancel()
			if err := a.Reshape(ctx); err == nil {
				t.Fatal("Reshape with a cancelled context returned nil")
			}
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
			if s := readSB(t, spare); s.FeatureMap&reshapeBits != 0 || s.DataOffset != sb0.DataOffset-512 || s.RaidDisks != uint32(c.n+1) {
				t.Errorf("after: features %#x data_offset %d raid_disks %d", s.FeatureMap, s.DataOffset, s.RaidDisks)
			}
		})
	}
}
