package layout

import (
	"errors"
	"testing"
)

// The raid5 4->5 reshape the kernel left in the VM (mdadm 4.2 --grow
// --raid-devices=5 on 32 MiB members, power cut at 32%): examine says
// raid_disks 5, delta_disks 1, chunk 64K, left-symmetric, size 63488,
// reshape_position 61440, data_offset 2048, new offset 1536.
func kernelRAID5Grow() (Params, ReshapeParams) {
	return Params{Level: RAID5, Layout: LeftSymmetric, ChunkSectors: 128, RaidDisks: 5, ComponentSectors: 63488},
		ReshapeParams{Position: 61440, NewLevel: RAID5, NewLayout: LeftSymmetric, NewChunk: 128, DeltaDisks: 1, MinOffsetDiff: -512}
}

func TestReshapeKernelGrow(t *testing.T) {
	p, r := kernelRAID5Grow()
	rs, err := NewReshape(p, r)
	if err != nil {
		t.Fatal(err)
	}
	if rs.Old.RaidDisks() != 4 || rs.New.RaidDisks() != 5 || rs.Old.DataDisks() != 3 || rs.New.DataDisks() != 4 {
		t.Fatalf("old %d/%d new %d/%d disks", rs.Old.RaidDisks(), rs.Old.DataDisks(), rs.New.RaidDisks(), rs.New.DataDisks())
	}
	// /sys/block/md0/size during the reshape: 95232 KiB.
	if got := rs.ArraySectors(); got != 190464 {
		t.Errorf("array sectors %d, kernel 190464", got)
	}
	if rs.Backwards || rs.Progress != 61440 || rs.Safe != 61440 {
		t.Errorf("backwards %v progress %d safe %d", rs.Backwards, rs.Progress, rs.Safe)
	}
	// Sector 61439 is moved: new geometry, 4 data disks: chunk 479, stripe
	// 119, data index 3; left-symmetric 5 disks: parity on 4-119%5=0, so
	// data index 3 on role (0+1+3)%5=4, member sector 119*128+127.
	if rs.SideOf(61439) != SideNew || rs.SideOf(61440) != SideOld {
		t.Fatalf("sides around the point: %v %v", rs.SideOf(61439), rs.SideOf(61440))
	}
	if a := rs.New.Locate(61439); a.Role != 4 || a.Sector != 119*128+127 {
		t.Errorf("new geometry: sector 61439 at %+v", a)
	}
	// Sector 61440 is not: old geometry, 3 data disks: chunk 480, stripe
	// 160, data index 0; parity on 3-160%4=3, data index 0 on role 0,
	// member sector 160*128.
	if a := rs.Old.Locate(61440); a.Role != 0 || a.Sector != 160*128 {
		t.Errorf("old geometry: sector 61440 at %+v", a)
	}
}

func TestReshapeSides(t *testing.T) {
	g := &Reshape{Progress: 1024, Safe: 1024}
	for _, c := range []struct {
		backwards   bool
		progress    uint64
		safe        uint64
		s           uint64
		side        Side
		n, wantRun  uint64
		description string
	}{
		{false, 1024, 1024, 0, SideNew, 100, 100, "forwards: below the point is moved"},
		{false, 1024, 1024, 1023, SideNew, 100, 1, "forwards: run stops at the point"},
		{false, 1024, 1024, 1024, SideOld, 100, 100, "forwards: at the point is old"},
		{false, 1024, 1024, 1 << 40, SideOld, 8, 8, "forwards: far above is old"},
		{true, 1024, 1024, 0, SideOld, 2000, 1024, "backwards: below the point is old"},
		{true, 1024, 1024, 1024, SideNew, 100, 100, "backwards: at the point is moved"},
		{false, 2048, 1024, 500, SideNew, 1000, 524, "forwards window: below safe is new"},
		{false, 2048, 1024, 1500, SideWindow, 1000, 548, "forwards window: between safe and progress waits"},
		{false, 2048, 1024, 2048, SideOld, 10, 10, "forwards window: at progress is old"},
		{true, 1024, 2048, 500, SideOld, 10, 10, "backwards window: below progress is old"},
		{true, 1024, 2048, 1500, SideWindow, 1000, 548, "backwards window: between progress and safe waits"},
		{true, 1024, 2048, 3000, SideNew, 10, 10, "backwards window: above safe is new"},
	} {
		g.Backwards, g.Progress, g.Safe = c.backwards, c.progress, c.safe
		side, run := g.Run(c.s, c.n)
		if side != c.side || run != c.wantRun || g.SideOf(c.s) != c.side {
			t.Errorf("%s: sector %d: %v run %d, want %v run %d", c.description, c.s, side, run, c.side, c.wantRun)
		}
	}
}

func TestNewReshapeRefusals(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  func(p *Params, r *ReshapeParams)
		ok   bool
		back bool
	}{
		{"kernel case", func(p *Params, r *ReshapeParams) {}, true, false},
		{"not on a new stripe", func(p *Params, r *ReshapeParams) { r.Position += 128 }, false, false},
		// 4 data disks x 128: 512 is a new stripe; the old geometry
		// needs no alignment (raid5_run rounds here_old down).
		{"old stripe need not align", func(p *Params, r *ReshapeParams) { r.Position = 512 }, true, false},
		{"start without moving data_offset", func(p *Params, r *ReshapeParams) { r.Position, r.MinOffsetDiff = 0, 0 }, false, false},
		{"start with data_offset moved down", func(p *Params, r *ReshapeParams) { r.Position = 0 }, true, false},
		// here_new = 1536/512*128 = 384, here_old = 1536/384*128 = 512:
		// 384 >= 512 - 0 is false: far enough.
		{"far enough without offset change", func(p *Params, r *ReshapeParams) { r.Position, r.MinOffsetDiff = 1536, 0 }, true, false},
		// here_new = 512/512*128 = 128, here_old = 512/384*128 = 128.
		{"too early without offset change", func(p *Params, r *ReshapeParams) { r.Position, r.MinOffsetDiff = 512, 0 }, false, false},
		{"level change", func(p *Params, r *ReshapeParams) { r.NewLevel = RAID6 }, false, false},
		{"in place", func(p *Params, r *ReshapeParams) { r.DeltaDisks, r.NewLayout, r.MinOffsetDiff = 0, RightSymmetric, 0 }, false, false},
		{"same disks, data_offset moved a chunk, backwards bit", func(p *Params, r *ReshapeParams) {
			r.DeltaDisks, r.NewLayout, r.MinOffsetDiff, r.Backwards, r.Position = 0, RightSymmetric, 256, true, 512
		}, true, true},
		{"backwards bit ignored when growing", func(p *Params, r *ReshapeParams) { r.Backwards = true }, true, false},
		{"shrinking goes backwards", func(p *Params, r *ReshapeParams) {
			p.RaidDisks, r.DeltaDisks, r.MinOffsetDiff, r.Position = 4, -1, 512, 3*128*20
		}, true, true},
	} {
		p, r := kernelRAID5Grow()
		c.mod(&p, &r)
		rs, err := NewReshape(p, r)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("%s: err %v, want ok %v", c.name, err, c.ok)
			continue
		}
		if rs != nil && rs.Backwards != c.back {
			t.Errorf("%s: backwards %v", c.name, rs.Backwards)
		}
	}
}
