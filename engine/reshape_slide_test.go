package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"mdtool/engine/backupfile"
	"mdtool/engine/layout"
	"mdtool/superblock"
)

// slideCase is an in-place reshape through a backup file that keeps or
// lowers the number of data devices.
type slideCase struct {
	name string
	s    spec
	rq   ReshapeStart
	fail []int // roles failed before the reshape
}

func slideCases() []slideCase {
	return []slideCase{
		{name: "raid6-layout", s: spec{level: "raid6", n: 4, chunkKiB: 64, devMiB: []int{3}},
			rq: ReshapeStart{Layout: layout.DDFNContinue, SetLayout: true}},
		{name: "raid6-layout-2missing", s: spec{level: "raid6", n: 4, chunkKiB: 64, devMiB: []int{3}},
			rq: ReshapeStart{Layout: layout.DDFNContinue, SetLayout: true}, fail: []int{1, 3}},
		{name: "raid5-chunk", s: spec{level: "raid5", n: 3, chunkKiB: 64, devMiB: []int{3}},
			rq: ReshapeStart{ChunkSectors: 256}},
		{name: "raid6-5to4", s: spec{level: "raid6", n: 5, chunkKiB: 64, devMiB: []int{3}},
			rq: ReshapeStart{RaidDisks: 4}},
		{name: "raid5-3to2", s: spec{level: "raid5", n: 3, chunkKiB: 64, devMiB: []int{3}},
			rq: ReshapeStart{RaidDisks: 2}},
		// 07changelevels' degraded shrink: with 512K chunks md's rule gives
		// up below 12 chunks per member, and the rows there (one a window)
		// go through the backup file
		{name: "raid6-5to4-512K-degraded", s: spec{level: "raid6", n: 5, chunkKiB: 512, devMiB: []int{8}},
			rq: ReshapeStart{RaidDisks: 4}, fail: []int{0}},
	}
}

// fail0 is the first role not failed (its superblock is written).
func (c slideCase) fail0() int {
	i := 0
	for c.failed(i) {
		i++
	}
	return i
}

func (c slideCase) failed(i int) bool {
	for _, r := range c.fail {
		if r == i {
			return true
		}
	}
	return false
}

// slideSnap is a copy of the members and the backup file taken at a
// reshape hook point (a kill there).
type slideSnap struct {
	point           string
	pos, recorded   uint64
	devs            []*MemDevice
	bf              *memBackup
	torn            [2]uint64 // array sectors whose new stripes were in flight
	nd, dataOffSect uint64
}

// TestReshapeInPlaceSlide: layout and chunk changes and shrinks with a
// backup file run in place (data_offset unchanged, no new_offset) and
// end with the data intact; a kill at every sampled hook point (the
// stripes in flight then torn: zeroed) is finished by a reassembly with
// the backup file with the data intact, and without the file refused at
// least where Grow_restart refuses (the same count always; a shrink
// below first_block; the engine also where it kept rows in the backup),
// the data intact where it is not refused.
func TestReshapeInPlaceSlide(t *testing.T) {
	for _, c := range slideCases() {
		t.Run(c.name, func(t *testing.T) { testSlide(t, c) })
	}
}

func testSlide(t *testing.T, c slideCase) {
	mems := create(t, c.s)
	clk := &fakeClock{t: time.Now()} // advanced by the hook: md's 10 s records mid-way
	o := recoverOptions()
	o.Clock = clk.Now
	a := open(t, mems, o)
	for _, r := range c.fail {
		if err := a.Fail(r); err != nil {
			t.Fatal(err)
		}
	}
	parity := c.s.n - a.striped.DataDisks()
	od := a.striped.DataDisks()
	nd := od
	if c.rq.RaidDisks != 0 {
		nd = c.rq.RaidDisks - parity
		ch := a.striped.ChunkSectors()
		if err := a.SetArraySize(a.striped.DevSectors(0) / ch * ch * uint64(nd)); err != nil {
			t.Fatal(err)
		}
	}
	data := make([]byte, a.Size())
	fillPattern(newRand(5), data)
	m := &model{b: data}
	mustWrite(t, a, m, data, 0)
	sb0 := readSB(t, mems[0])
	bf := &memBackup{}
	stride := int(uint64(a.Size()>>9)/2048*3/20) + 1
	var snaps []*slideSnap
	events, nbackup := 0, 0
	// the window written last, in flight until the next unit flushes the
	// members (a kill at a move or a record loses it); before any backup
	// (a shrink above its backed-up rows) a record loses the rows moved
	// since the last one
	var last [2]uint64
	backedUp := false
	ReshapeHook = func(point string, pos, recorded, total uint64) {
		if point == "finish" {
			return
		}
		events++
		if point == "backup" {
			if nbackup++; nbackup%3 == 0 {
				defer clk.Add(11 * time.Second) // the next unit records (reshape_checkpoint)
			}
		}
		if events%stride == 0 || point == "backup" && len(snaps) < 40 {
			s := &slideSnap{point: point, pos: pos, recorded: recorded, bf: bf.clone(), nd: uint64(nd),
				dataOffSect: sb0.DataOffset}
			for _, d := range mems {
				s.devs = append(s.devs, cloneMem(t, d))
			}
			switch {
			case point == "backup":
				s.torn = [2]uint64{min(pos, recorded), max(pos, recorded)}
			case backedUp:
				s.torn = last
			case point != "move" && nd != od:
				s.torn = [2]uint64{min(pos, recorded), max(pos, recorded)}
			}
			if len(snaps) < 40 {
				snaps = append(snaps, s)
			}
		}
		if point == "backup" {
			last, backedUp = [2]uint64{min(pos, recorded), max(pos, recorded)}, true
		}
	}
	defer func() { ReshapeHook = nil }()
	rq := c.rq
	rq.Backup = bf
	if err := a.StartReshape(rq); err != nil {
		t.Fatal(err)
	}
	for i, d := range mems {
		if c.failed(i) {
			continue // faulty members get no superblock writes
		}
		s := readSB(t, d)
		if s.FeatureMap&superblock.FeatureReshapeActive == 0 || s.FeatureMap&superblock.FeatureNewOffset != 0 || s.NewOffset != 0 {
			t.Fatalf("member %d at the start: features %#x new_offset %d", i, s.FeatureMap, s.NewOffset)
		}
	}
	checkContent(t, a, m)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := a.Reshape(ctx); err != nil {
		t.Fatal(err)
	}
	ReshapeHook = nil
	checkContent(t, a, m)
	a.Close()
	checkSlideEnd(t, c, mems, sb0, bf)
	backups := 0
	for _, s := range snaps {
		if s.point == "backup" {
			backups++
		}
	}
	if len(snaps) < 3 || backups == 0 {
		t.Fatalf("%d kill points, %d after a backup", len(snaps), backups)
	}
	if nd == od || c.s.chunkKiB >= 512 {
		// the engine records by md's rule only (the same count every 10 s;
		// a shrink also where reshape_request's rule asks): kills find the
		// backup ahead of reshape_position (a shrink runs backwards: below
		// it), and some after a record
		ahead, timed := 0, 0
		for _, s := range snaps {
			h, err := backupfile.Decode(s.bf.b[:backupfile.Size])
			pos := readSB(t, s.devs[c.fail0()]).ReshapePosition
			secs := h.Sections()
			if err == nil && len(secs) > 0 {
				first, last := secs[0], secs[len(secs)-1]
				if nd == od && pos < min(first.ArrayStart, last.ArrayStart) ||
					nd < od && pos > max(first.ArrayStart+first.Length, last.ArrayStart+last.Length) {
					ahead++
				}
			}
			if nd == od && pos > 0 || nd < od && pos < a.striped.ArraySectors() {
				timed++
			}
		}
		if ahead == 0 || timed == 0 {
			t.Fatalf("of %d kill points %d find the backup ahead of reshape_position, %d a record", len(snaps), ahead, timed)
		}
	}
	fb := firstBlock(uint64(sb0.ChunkSize), uint64(sb0.ChunkSize), od, nd)
	if c.rq.ChunkSectors != 0 {
		fb = firstBlock(uint64(sb0.ChunkSize), c.rq.ChunkSectors, od, nd)
	}
	for i, s := range snaps {
		t.Run(fmt.Sprintf("kill%02d-%s-%d", i, s.point, s.recorded), func(t *testing.T) {
			restartSlide(t, c, s, m, sb0, nd == od || readSB(t, s.devs[c.fail0()]).ReshapePosition < fb)
		})
	}
}

// restartSlide reassembles a kill copy: without the backup file refused
// when refuse says so (Grow_restart's rule; the engine refuses more where
// it kept rows in the backup), and where it is not refused the reshape
// goes on (to its end, or to where it needs the file) with the data
// intact; with the file it is finished with the data intact.
func restartSlide(t *testing.T, c slideCase, s *slideSnap, m *model, sb0 *superblock.Superblock, refuse bool) {
	if s.torn[1] > s.torn[0] {
		lo, hi := s.torn[0]/s.nd, (s.torn[1]+s.nd-1)/s.nd
		for _, d := range s.devs {
			d.WriteAt(make([]byte, (hi-lo)<<9), int64(s.dataOffSect+lo)<<9)
		}
	}
	ds := make([]Device, len(s.devs))
	probe := make([]Device, len(s.devs)) // Close closes the devices
	for i, d := range s.devs {
		ds[i], probe[i] = d, cloneMem(t, d)
	}
	po := recoverOptions()
	po.Force = len(c.fail) > 0 // a dirty degraded array (md: start_dirty_degraded)
	b, err := Open(probe, po)
	switch {
	case refuse && !errors.Is(err, ErrBackupNeeded):
		t.Fatalf("opened without the backup file: %v, want ErrBackupNeeded", err)
	case err == nil:
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		if err := b.Reshape(ctx); err != nil && !errors.Is(err, ErrUnsupported) {
			t.Fatalf("without the backup file: %v", err)
		}
		cancel()
		checkContent(t, b, m)
		b.Close()
	case !errors.Is(err, ErrBackupNeeded):
		t.Fatalf("without the backup file: %v", err)
	}
	o := po
	o.ReshapeBackup = s.bf
	b, err = Open(ds, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := b.Reshape(ctx); err != nil {
		t.Fatal(err)
	}
	checkContent(t, b, m)
	b.Close()
	checkSlideEnd(t, c, s.devs, sb0, s.bf)
}

// checkSlideEnd: the finished reshape's superblocks keep data_offset and
// data_size, carry no reshape bits and the new shape; the backup file
// holds no section.
func checkSlideEnd(t *testing.T, c slideCase, devs []*MemDevice, sb0 *superblock.Superblock, bf *memBackup) {
	t.Helper()
	n := c.s.n
	if c.rq.RaidDisks != 0 {
		n = c.rq.RaidDisks
	}
	for i, d := range devs {
		if c.failed(i) {
			continue
		}
		s := readSB(t, d)
		if s.FeatureMap&reshapeBits != 0 || s.DataOffset != sb0.DataOffset || s.DataSize != sb0.DataSize ||
			s.RaidDisks != uint32(n) || s.NewOffset != 0 {
			t.Errorf("member %d at the end: features %#x data_offset %d/%d data_size %d/%d raid_disks %d",
				i, s.FeatureMap, s.DataOffset, sb0.DataOffset, s.DataSize, sb0.DataSize, s.RaidDisks)
		}
		if c.rq.SetLayout && s.Layout != uint32(c.rq.Layout) || c.rq.ChunkSectors != 0 && uint64(s.ChunkSize) != c.rq.ChunkSectors {
			t.Errorf("member %d at the end: layout %d chunk %d", i, s.Layout, s.ChunkSize)
		}
	}
	h, err := backupfile.Decode(bf.b[:backupfile.Size])
	if err != nil || len(h.Sections()) != 0 || h.SetUUID != sb0.SetUUID {
		t.Errorf("backup file at the end: %+v %v (want this array's, no section)", h, err)
	}
}

// TestReshapeInPlaceSlideStop: a layout change through a backup file
// interrupted (the sync thread stopped) forgets its section and lets its
// held window go; the array serves it meanwhile, and a reassembly with
// the file (the empty header of this array) continues and finishes it,
// while one without the file, or with an empty header that is not the
// engine's (mdadm's), is refused (Grow_restart).
func TestReshapeInPlaceSlideStop(t *testing.T) {
	mems := create(t, spec{level: "raid5", n: 3, chunkKiB: 64, devMiB: []int{3}})
	a := open(t, mems, recoverOptions())
	data := make([]byte, a.Size())
	fillPattern(newRand(9), data)
	m := &model{b: data}
	mustWrite(t, a, m, data, 0)
	bf := &memBackup{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	moves := 0
	ReshapeHook = func(point string, pos, recorded, total uint64) {
		if point == "move" {
			if moves++; moves == 3 {
				cancel()
			}
		}
	}
	defer func() { ReshapeHook = nil }()
	if err := a.StartReshape(ReshapeStart{Layout: layout.RightAsymmetric, SetLayout: true, Backup: bf}); err != nil {
		t.Fatal(err)
	}
	a.Reshape(ctx)
	ReshapeHook = nil
	if ok, p := a.Reshaping(); !ok || p == 0 {
		t.Fatalf("after the stop: reshaping %v at %d, want mid-way", ok, p)
	}
	h, err := backupfile.Decode(bf.b[:backupfile.Size])
	if err != nil || len(h.Sections()) != 0 {
		t.Fatalf("after the stop the backup holds %+v %v, want no section", h, err)
	}
	mustWrite(t, a, m, data[:64<<10], 0) // the held window was let go
	checkContent(t, a, m)
	a.Close()
	ds := make([]Device, len(mems))
	probe := make([]Device, len(mems))
	for i, d := range mems {
		r := d.Reopen()
		ds[i], probe[i] = r, cloneMem(t, r)
	}
	if _, err := Open(probe, recoverOptions()); !errors.Is(err, ErrBackupNeeded) {
		t.Fatalf("without the backup file: %v, want ErrBackupNeeded", err)
	}
	// the same empty header as mdadm's child leaves it between two
	// windows (forget_backup; its pad zeroed): md may have run past the
	// recorded position, Grow_restart refuses, and so does the engine
	untagged := *h
	untagged.Tag = [16]byte{}
	mb := &memBackup{b: append([]byte(nil), bf.b...)}
	copy(mb.b, backupfile.Encode(&untagged))
	po := recoverOptions()
	po.ReshapeBackup = mb
	if _, err := Open(probe, po); !errors.Is(err, ErrBackupNeeded) {
		t.Fatalf("with mdadm's empty header: %v, want ErrBackupNeeded", err)
	}
	o := recoverOptions()
	o.ReshapeBackup = bf
	b, err := Open(ds, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Reshape(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkContent(t, b, m)
	b.Close()
	if s := readSB(t, ds[0]); s.FeatureMap&reshapeBits != 0 || s.Layout != uint32(layout.RightAsymmetric) {
		t.Fatalf("at the end: features %#x layout %d", s.FeatureMap, s.Layout)
	}
}
