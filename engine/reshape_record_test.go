package engine

import (
	"context"
	"testing"
	"time"
)

// clockWrites advances a fake clock by step on every write of a member.
type clockWrites struct {
	Device
	clk  *fakeClock
	step time.Duration
}

func (d clockWrites) WriteAt(p []byte, off int64) (int, error) {
	d.clk.Add(d.step)
	return d.Device.WriteAt(p, off)
}

// TestReshapeRecordCadence: a reshape started on the running array
// records reshape_position where md 6.1 does and where a restart would
// otherwise read overwritten data, nothing more: md_do_sync's 1/16
// progress records do not apply to a reshape, and md's rule runs with
// raid5_run's min_offset_diff, 0 for a reshape started after the array
// ran (in place for the rule, which then never asks with as many data
// disks after as before). So with a still clock the records are the
// engine's overlap rule alone: with the data moved down by D sectors the
// new rows may run ahead of the recorded position by D per member less
// the old stripe that holds it, i.e. a record every 3*D/row - 1 rows,
// plus md_update_sb at the end. With a clock that passes 10 s at every
// write, reshape_request's timer asks for a record before every row after
// the first unit (the first moves a whole window, 1 MiB, as no write
// has yet happened since the start).
func TestReshapeRecordCadence(t *testing.T) {
	for i, c := range restripeCases()[:3] {
		// 4 x 8 MiB raid5, 3 data disks of 14336 or 12288 sectors,
		// data_offset moved down 2048 (chunk 512K -> 64K: 12 rows of 3072
		// array sectors, a record every 2 rows) or 1024 (64K -> 256K: 28
		// rows of 1536, a record every 2; a layout change: 112 rows of
		// 384, a record every 8, the first window 5 rows)
		want := []uint64{5, 13, 13}[i] + 1
		timed := []uint64{12, 28, 112 - 4}[i]
		for _, tick := range []time.Duration{0, 11 * time.Second} {
			mems := create(t, c.s)
			clk := &fakeClock{t: time.Unix(1700000100, 0)}
			o := recoverOptions()
			o.Clock = clk.Now
			ds := make([]Device, len(mems))
			for j, m := range mems {
				ds[j] = clockWrites{Device: m.Reopen(), clk: clk, step: tick}
			}
			a, err := Open(ds, o)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.StartReshape(c.rq); err != nil {
				t.Fatal(err)
			}
			ev := a.Events()
			if err := a.Reshape(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := a.Events() - ev
			a.Close()
			if tick != 0 {
				want = timed
			}
			if got != want {
				t.Errorf("%s (clock +%v a write): %d superblock updates through the reshape, want %d", c.name, tick, got, want)
			}
		}
	}
}

// TestReshapeShrinkRecords: an in-place shrink through a backup file
// (07changelevels' degraded raid6 5 -> 4, 512K chunk) records
// reshape_position where md 6.1's rule asks and at the end only: with a
// still clock, the superblock updates through the reshape are the rows
// at which reshape_request's rule (min_offset_diff 0: started on the
// running array) asks, walking down from the end, plus the end's record
// and the finish. Below 12 chunks per member md's rule gives up; the
// rows there go through the backup file, without a record of their own.
func TestReshapeShrinkRecords(t *testing.T) {
	mems := create(t, spec{level: "raid6", n: 5, chunkKiB: 512, devMiB: []int{21}})
	clk := &fakeClock{t: time.Unix(1700000100, 0)}
	o := recoverOptions()
	o.Clock = clk.Now
	a := open(t, mems, o)
	if err := a.Fail(0); err != nil {
		t.Fatal(err)
	}
	ch := a.striped.ChunkSectors()
	if err := a.SetArraySize(a.striped.DevSectors(0) / ch * ch * 2); err != nil {
		t.Fatal(err)
	}
	backups := 0
	ReshapeHook = func(point string, pos, recorded, total uint64) {
		if point == "backup" {
			backups++
		}
	}
	defer func() { ReshapeHook = nil }()
	if err := a.StartReshape(ReshapeStart{RaidDisks: 4, Backup: &memBackup{}}); err != nil {
		t.Fatal(err)
	}
	total := a.rs.geo.New.ArraySectors()
	ev := a.Events()
	if err := a.Reshape(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := a.Events() - ev
	a.Close()
	r, row := ch, 2*ch
	want, s := uint64(2), total
	for at := total; at >= row; at -= row {
		if at != s && mdRecordRule(at, s, r, 3, 2, 0, true) {
			want, s = want+1, at
		}
	}
	t.Logf("%d superblock updates, %d rows backed up", got, backups)
	if got != want || backups == 0 {
		t.Errorf("%d superblock updates through the shrink (%d rows backed up), want %d (md's rule, the end)", got, backups, want)
	}
}

// TestReshapeSetupEvents: mdadm's setup of an in-place shrink of a
// degraded array costs the superblock updates md 6.1 makes for it (seen
// in 07changelevels' kernel trace): raising the stripe cache
// (ReshapeStart.StripeCache) marks the clean array active and clean again
// (md_allow_write, then md's thread: two updates, both counted on a
// degraded array), SET_ARRAY_INFO (SetArrayInfo) one more, then the
// start's own; a cache already as large costs nothing.
func TestReshapeSetupEvents(t *testing.T) {
	mems := create(t, spec{level: "raid6", n: 5, chunkKiB: 512, devMiB: []int{21}})
	a := open(t, mems, recoverOptions())
	if err := a.Fail(0); err != nil {
		t.Fatal(err)
	}
	ch := a.striped.ChunkSectors()
	if err := a.SetArraySize(a.striped.DevSectors(0) / ch * ch * 2); err != nil {
		t.Fatal(err)
	}
	ev := a.Events()
	if err := a.StartReshape(ReshapeStart{RaidDisks: 4, Backup: &memBackup{}, StripeCache: 512, SetArrayInfo: true}); err != nil {
		t.Fatal(err)
	}
	if got := a.Events() - ev; got != 4 {
		t.Errorf("%d superblock updates at the start, want 4", got)
	}
	if err := a.Reshape(context.Background()); err != nil {
		t.Fatal(err)
	}
	ev = a.Events()
	a.meta.mu.Lock()
	err := a.reshapeSetupLocked(ReshapeStart{StripeCache: 512})
	a.meta.mu.Unlock()
	if err != nil || a.Events() != ev {
		t.Errorf("the cache raised again: %v, %d updates", err, a.Events()-ev)
	}
	a.Close()
}
