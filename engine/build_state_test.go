package engine

import (
	"bytes"
	"testing"
	"time"

	"mdtool/engine/layout"
)

// TestBuildCleanState: an array without superblocks (mdadm -B) follows md
// 6.1's clean/active rule like any other (md_write_start clears in_sync,
// the safemode timer's set_in_sync sets it safe_mode_delay after the last
// write; md_update_sb writes nothing for !persistent): a raid1 built with
// --assume-clean is clean, active after a write, clean again once the
// delay has passed, and nothing but the data reaches its members.
func TestBuildCleanState(t *testing.T) {
	mems := []*MemDevice{NewMemDevice(1 << 20), NewMemDevice(1 << 20)}
	clk := &fakeClock{t: time.Unix(1700000100, 0)}
	o := testOptions()
	o.Clock = clk.Now
	a, err := OpenBuild(devices(mems), BuildParams{Level: layout.RAID1, RaidDisks: 2, Roles: []int{0, 1}, AssumeClean: true}, o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if !a.Clean() {
		t.Fatal("built with assume-clean: not clean")
	}
	p := bytes.Repeat([]byte{0x5a}, 4096)
	mustWrite(t, a, nil, p, 8192)
	if a.Clean() {
		t.Error("clean after a write")
	}
	a.Tick() // safe_mode_delay has not passed
	if a.Clean() {
		t.Error("clean before safe_mode_delay has passed")
	}
	clk.Add(time.Second)
	a.Tick()
	if !a.Clean() {
		t.Error("not clean safe_mode_delay after the last write")
	}
	if ev := a.Events(); ev != 0 {
		t.Errorf("events %d, want 0 (no superblock)", ev)
	}
	for i, m := range mems {
		got := memRead(t, m, 0, 1<<20)
		want := make([]byte, 1<<20)
		copy(want[8192:], p)
		if !bytes.Equal(got, want) {
			t.Errorf("member %d: bytes other than the data written", i)
		}
	}
}
