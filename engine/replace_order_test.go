package engine

import (
	"testing"
)

// TestReplaceTakesLastSpare: without --with, the spare added last becomes
// the replacement, as md's remove_and_add_spares offers the rdev list's
// head (the device bound last) first (tests/01replace: after "-CR -n4 -x2
// d0..d5" and "--replace d1", d5 is the replacement, and removing it is
// refused as busy).
func TestReplaceTakesLastSpare(t *testing.T) {
	s := spec{level: "raid1", n: 2, devMiB: []int{4}}
	mems := createChunk(t, s, 256<<10)
	a := open(t, mems, recoverOptions())
	defer a.Close()
	var idx [2]int
	for i := range idx {
		var err error
		if idx[i], err = a.AddDevice(NewMemDevice(s.devSize(0)), AddOptions{Replacement: -1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Replace(1, -1); err != nil {
		t.Fatal(err)
	}
	waitSync(t, a)
	ms := a.Members()
	if ms[1].Device != idx[1] || ms[1].State != InSync {
		t.Fatalf("role 1 after the replace: %+v (spares were devices %v)", ms[1], idx)
	}
	for _, mi := range ms {
		if mi.Device == idx[0] && mi.State != Spare {
			t.Errorf("the spare added first is %v, not a spare", mi.State)
		}
	}
}

// TestReplaceEvents: the superblock writes of a replacement, as md 6.1
// makes them (tests/01replace in the VM: 17 -> replaced member 20, the
// others 22 without --with; 19 and 21 with it): md's own hot add of the
// spare (not with --with, which writes the spare's slot), md_do_sync's
// end while the replaced member is still in sync, md_reap_sync_thread's
// update with it faulty, and remove_and_add_spares taking it out of its
// slot -- so the others end two events past the replaced member, and
// --with one event below the replacement md chose itself.
func TestReplaceEvents(t *testing.T) {
	run := func(with bool) (old, others uint64) {
		s := spec{level: "raid1", n: 2, devMiB: []int{4}}
		mems := createChunk(t, s, 256<<10)
		a := open(t, mems, recoverOptions())
		spare := NewMemDevice(s.devSize(0))
		idx, err := a.AddDevice(spare.Reopen(), AddOptions{Replacement: -1})
		if err != nil {
			t.Fatal(err)
		}
		waitSync(t, a)
		w := -1
		if with {
			w = idx
		}
		if err := a.Replace(1, w); err != nil {
			t.Fatal(err)
		}
		waitSync(t, a)
		a.Close()
		old, others = readSB(t, mems[1]).Events, readSB(t, mems[0]).Events
		if e := readSB(t, spare).Events; e != others {
			t.Errorf("with=%v: the replacement has events %d, the other member %d", with, e, others)
		}
		return old, others
	}
	old, others := run(false)
	if others != old+2 {
		t.Errorf("without --with: replaced member %d, the others %d; want 2 more", old, others)
	}
	oldW, othersW := run(true)
	if othersW != oldW+2 || othersW+1 != others {
		t.Errorf("with --with: replaced member %d, the others %d; without: %d, %d", oldW, othersW, old, others)
	}
}
