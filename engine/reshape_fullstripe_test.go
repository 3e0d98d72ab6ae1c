package engine

import (
	"context"
	"testing"
	"time"
)

// TestReshapeFullStripeNoReads: while a raid5 4->5 reshape is held in
// the middle (the test's hook at a window with room on both sides), a write of one whole
// stripe of the new geometry on the done side and one of the old
// geometry on the side not yet moved read nothing from the members
// (issue 14: the zero-read-in full-stripe writes hold on both sides of
// the reshape point), and a write of a new-geometry stripe's size at an
// old-geometry offset on the old side does read (it is not whole there).
// The content is right after the reshape.
func TestReshapeFullStripeNoReads(t *testing.T) {
	mems := create(t, spec{level: "raid5", n: 4, chunkKiB: 64, devMiB: []int{8}})
	var counts []*CountingDevice
	var devs []Device
	for _, m := range mems {
		c := &CountingDevice{Device: m}
		counts = append(counts, c)
		devs = append(devs, c)
	}
	a, err := Open(devs, recoverOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	data := make([]byte, a.Size())
	fillPattern(newRand(31), data)
	m := &model{b: data}
	mustWrite(t, a, m, data, 0)
	spare := &CountingDevice{Device: NewMemDevice(8 << 20)}
	counts = append(counts, spare)
	if _, err := a.AddDevice(spare, AddOptions{Replacement: -1}); err != nil {
		t.Fatal(err)
	}
	if err := a.StartReshape(ReshapeStart{RaidDisks: 5}); err != nil {
		t.Fatal(err)
	}
	type win struct{ lo, hi uint64 }
	held, release := make(chan win), make(chan struct{})
	size := uint64(a.Size() >> 9)
	holding := false
	reshapeHoldHook = func(lo, hi uint64) {
		// the first window with room for the writes on both sides
		if !holding && lo >= 2048 && hi+4096 <= size {
			holding = true
			held <- win{lo, hi}
			<-release
		}
	}
	defer func() { reshapeHoldHook = nil }()
	done := make(chan error, 1)
	go func() { done <- a.Reshape(context.Background()) }()
	var w win
	select {
	case w = <-held:
	case err := <-done:
		t.Fatalf("the reshape ended before a window with room on both sides: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("no window with room on both sides after 2 minutes")
	}
	reads := func() int64 {
		var n int64
		for _, c := range counts {
			n += c.Reads.Load()
		}
		return n
	}
	const oldRow, newRow = 3 * 128, 4 * 128 // sectors of data per stripe: 3 and 4 data chunks of 64 KiB
	newOff := uint64(0)
	oldOff := (w.hi + 2048 + oldRow - 1) / oldRow * oldRow
	if newOff+4*newRow > w.lo || oldOff+2*oldRow > uint64(a.Size()>>9) {
		t.Fatalf("window [%d, %d): no whole stripe on both sides", w.lo, w.hi)
	}
	r := newRand(32)
	for _, c := range []struct {
		what  string
		off   uint64 // sectors
		n     int    // sectors
		reads bool
	}{
		{"a new-geometry stripe on the done side", newOff, newRow, false},
		{"three new-geometry stripes on the done side", newOff + newRow, 3 * newRow, false},
		{"an old-geometry stripe on the old side", oldOff, oldRow, false},
		{"a new-geometry stripe's size on the old side", oldOff + oldRow, newRow, true},
	} {
		p := make([]byte, c.n<<9)
		fillPattern(r, p)
		r0 := reads()
		ch := make(chan error, 1)
		go func() { _, err := a.WriteAt(p, int64(c.off)<<9); ch <- err }()
		gateWait(t, ch, c.what)
		copy(m.b[c.off<<9:], p)
		if got := reads() - r0; (got != 0) != c.reads {
			t.Errorf("%s at sector %d: %d member reads, want reads %v", c.what, c.off, got, c.reads)
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if grown := a.Size(); grown > int64(len(m.b)) {
		m.b = append(m.b, make([]byte, grown-int64(len(m.b)))...)
	}
	checkContent(t, a, m)
}
