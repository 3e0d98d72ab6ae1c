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
