package engine

import (
	"errors"
	"testing"
	"time"

	"mdtool/superblock"
)

// TestSetRaidDisksEvents: a raid1 --raid-devices change counts events as
// md 6.1 does. On a clean array raid1_reshape's md_allow_write marks it
// active (events+1), update_array_info's md_update_sb(mddev, 1) follows
// (+1, also after raid1_reshape's -EBUSY), and md_check_recovery's
// set_in_sync marks it clean at once (+1: never rolled back after a
// forced update). On an active array only the forced update counts.
func TestSetRaidDisksEvents(t *testing.T) {
	s := spec{level: "raid1", n: 2}
	mems := create(t, s)
	clk := &fakeClock{t: time.Unix(1700000100, 0)}
	o := testOptions()
	o.Clock = clk.Now
	a := open(t, mems, o)
	defer a.Close()
	e0 := readSB(t, mems[0]).Events
	check := func(what string, events uint64, clean bool) {
		t.Helper()
		if got := a.Events(); got != events {
			t.Errorf("%s: array events %d, want %d", what, got, events)
		}
		if a.Clean() != clean {
			t.Errorf("%s: clean %v, want %v", what, a.Clean(), clean)
		}
		resync := uint64(superblock.MaxSector)
		if !clean {
			resync = 0
		}
		for i, m := range mems {
			if sb := readSB(t, m); sb.Events != events || sb.ResyncOffset != resync {
				t.Errorf("%s: member %d events %d resync_offset %x, want %d %x", what, i, sb.Events, sb.ResyncOffset, events, resync)
			}
		}
	}
	if err := a.SetRaidDisks(3); err != nil {
		t.Fatal(err)
	}
	check("grow 2->3", e0+3, true)
	if err := a.SetRaidDisks(2); err != nil {
		t.Fatal(err)
	}
	check("shrink 3->2", e0+6, true)
	if err := a.SetRaidDisks(1); !errors.Is(err, ErrBusy) {
		t.Fatalf("shrink below the members in slots: %v, want ErrBusy", err)
	}
	check("refused shrink 2->1", e0+9, true)
	// Active (a write, safe mode not yet due): only the forced update.
	mustWrite(t, a, nil, make([]byte, 4096), 0)
	check("write", e0+10, false)
	if err := a.SetRaidDisks(3); err != nil {
		t.Fatal(err)
	}
	check("grow 2->3 while active", e0+11, false)
	clk.Add(time.Second)
	a.Tick()
	check("safe mode", e0+12, true)
}
