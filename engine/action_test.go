package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// fakeAction is a syncAction over a sync space of total sectors in spans
// of spanLen, every second one needing work, done in units of unitLen.
type fakeAction struct {
	a                *Array
	total, from      uint64
	spanLen, unitLen uint64
	stopAt           uint64 // interrupt (stopSync) in the unit at this position; 0: never
	units            []uint64
	spans            []string
	cps              []uint64
	shown            SyncStatus // SyncStatus in the first unit
	finished         int
	finishPos        uint64
	finishErr        error
}

func (f *fakeAction) name() string { return "fake" }

func (f *fakeAction) prepare() (uint64, uint64, bool, error) {
	return f.total, f.from, true, nil
}

func (f *fakeAction) span(s, total uint64) (uint64, bool, error) {
	return min(s+f.spanLen, total), (s/f.spanLen)%2 == 0, nil
}

func (f *fakeAction) unit(p, max uint64) (uint64, error) {
	if len(f.units) == 0 {
		f.shown = f.a.SyncStatus()
	}
	f.units = append(f.units, p)
	if f.stopAt != 0 && p == f.stopAt {
		f.a.stopSync(false) // like `idle`: cancels the claimed context
	}
	return min(f.unitLen, max), nil
}

func (f *fakeAction) spanDone(s uint64, work, aborted bool) {
	f.spans = append(f.spans, fmt.Sprintf("%d:%v:%v", s, work, aborted))
}

func (f *fakeAction) checkpoint(pos uint64, inSpan bool) { f.cps = append(f.cps, pos) }

func (f *fakeAction) finish(pos uint64, err error) error {
	f.finished++
	f.finishPos, f.finishErr = pos, err
	return err
}

// TestDriveAction: drive walks an action's range in spans and units,
// skips the spans that need no work, shows its progress, records
// progress every 1/16 of the range, and on interruption stops inside the
// span, tells the span it was aborted and finishes where it got to.
func TestDriveAction(t *testing.T) {
	s := spec{level: "raid1", n: 2, devMiB: []int{16}}
	mems := create(t, s)
	clk := &fakeClock{t: time.Unix(1700000100, 0)}
	o := recoverOptions()
	o.Clock = clk.Now // still: only the 1/16 rule records progress
	a := open(t, mems, o)
	defer a.Close()
	a.sc.sleep = func(context.Context, time.Duration) {}

	run := func(f *fakeAction) error {
		t.Helper()
		ctx, ok := a.claim(context.Background(), f.name())
		if !ok {
			t.Fatal("sync slot busy")
		}
		defer a.release(true)
		return a.drive(ctx, f)
	}

	f := &fakeAction{a: a, total: 1600, spanLen: 100, unitLen: 30}
	if err := run(f); err != nil {
		t.Fatalf("drive: %v", err)
	}
	if f.finished != 1 || f.finishPos != 1600 || f.finishErr != nil {
		t.Fatalf("finish called %d times, last at %d with %v; want once at 1600 with nil", f.finished, f.finishPos, f.finishErr)
	}
	if f.shown.Action != "fake" || f.shown.Total != 1600 {
		t.Fatalf("status in the first unit: action %q total %d", f.shown.Action, f.shown.Total)
	}
	if len(f.spans) != 16 {
		t.Fatalf("%d spans ended, want 16: %v", len(f.spans), f.spans)
	}
	for i, sp := range f.spans {
		if want := fmt.Sprintf("%d:%v:false", i*100, i%2 == 0); sp != want {
			t.Fatalf("span %d ended as %q, want %q", i, sp, want)
		}
	}
	// units of 30 in spans of 100: 0 30 60 90 in every worked span
	if len(f.units) != 8*4 {
		t.Fatalf("%d units, want 32: %v", len(f.units), f.units)
	}
	for i, p := range f.units {
		if want := uint64(i/4*200 + i%4*30); p != want {
			t.Fatalf("unit %d at %d, want %d", i, p, want)
		}
	}
	// 1/16 of 1600 is 101 sectors: progress is recorded at the first
	// unit or span end at least that far on, never at the end of the
	// range (finish records that).
	if got := fmt.Sprint(f.cps); got != "[200 400 600 800 1000 1200 1400]" {
		t.Fatalf("checkpoints at %s, want [200 400 600 800 1000 1200 1400]", got)
	}
	if st := a.SyncStatus(); st.Done != 1600 {
		t.Fatalf("progress at the end %d, want 1600", st.Done)
	}

	// Interrupted in the unit at 460, after starting at 300.
	g := &fakeAction{a: a, total: 1600, from: 300, spanLen: 100, unitLen: 30, stopAt: 460}
	err := run(g)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted drive returned %v", err)
	}
	if len(g.units) == 0 || g.units[0] != 400 || g.units[len(g.units)-1] != 460 {
		t.Fatalf("units %v: want the first at 400 (300 needs none) and the last at 460", g.units)
	}
	if last := g.spans[len(g.spans)-1]; last != "400:true:true" {
		t.Fatalf("last span ended as %q, want aborted 400:true:true (%v)", last, g.spans)
	}
	if g.finished != 1 || g.finishPos != 490 || !errors.Is(g.finishErr, context.Canceled) {
		t.Fatalf("finish called %d times at %d with %v; want once at 490 with context.Canceled", g.finished, g.finishPos, g.finishErr)
	}
}
