package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"mdtool/engine/wib"
	"mdtool/superblock"
)

func recoverOptions() Options {
	o := testOptions()
	o.NoAutoSync = true
	return o
}

// waitSync waits for the running action with a generous deadline.
func waitSync(t testing.TB, a *Array) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := a.WaitSync(ctx); err != nil {
		t.Fatalf("WaitSync: %v (status %+v)", err, a.SyncStatus())
	}
}

// concurrentWriter writes random blocks into a and the model until stop
// is closed; it returns how many writes it did.
func concurrentWriter(t testing.TB, a *Array, m *model, mu *sync.Mutex, seed uint64, stop chan struct{}, count *atomic.Int64) <-chan int {
	out := make(chan int, 1)
	go func() {
		r := newRand(seed)
		n := 0
		defer func() { out <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			ln := a.block * int64(1+r.IntN(64))
			off := r.Int64N((a.Size()-ln)/a.block+1) * a.block
			p := make([]byte, ln)
			fillPattern(r, p)
			mu.Lock()
			_, err := a.WriteAt(p, off)
			if err == nil {
				m.write(p, off)
			}
			mu.Unlock()
			if err != nil {
				t.Errorf("concurrent write: %v", err)
				return
			}
			n++
			count.Add(1)
			if n%16 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	return out
}

// TestRebuild fails members, adds fresh spares and rebuilds them while
// writes go on; afterwards every member is in sync, check finds no
// mismatch, the data is the model's, and the rebuilt members alone (with
// the minimum of old ones) serve the same data after a reopen.
func TestRebuild(t *testing.T) {
	for _, tc := range []struct {
		s    spec
		drop []int
	}{
		{spec{level: "raid1", n: 2, devMiB: []int{4}}, []int{0}},
		{spec{level: "raid1", n: 3, devMiB: []int{4}, bitmap: true}, []int{1, 2}},
		{spec{level: "raid4", n: 3, chunkKiB: 64, devMiB: []int{4}}, []int{2}},
		{spec{level: "raid5", n: 4, chunkKiB: 64, devMiB: []int{4}, bitmap: true}, []int{1}},
		{spec{level: "raid5", n: 3, chunkKiB: 32, devMiB: []int{4}, metadata: "1.0"}, []int{0}},
		{spec{level: "raid6", n: 5, chunkKiB: 64, devMiB: []int{4}}, []int{3}},
		{spec{level: "raid6", n: 5, chunkKiB: 64, devMiB: []int{4}, bitmap: true}, []int{0, 4}},
		{spec{level: "raid10", n: 4, chunkKiB: 64, devMiB: []int{4}, bitmap: true}, []int{1}},
		{spec{level: "raid10", layout: "f2", n: 4, chunkKiB: 64, devMiB: []int{4}}, []int{2}},
		{spec{level: "raid10", layout: "o2", n: 3, chunkKiB: 64, devMiB: []int{4}}, []int{0}},
	} {
		t.Run(fmt.Sprintf("%v-drop%v", tc.s, tc.drop), func(t *testing.T) {
			mems := createChunk(t, tc.s, 256<<10)
			a := open(t, mems, recoverOptions())
			m := newModel(a.Size())
			p := make([]byte, a.Size())
			fillPattern(newRand(5), p)
			mustWrite(t, a, m, p, 0)
			devIdx := make(map[int]int) // role -> device index
			for _, mi := range a.Members() {
				devIdx[mi.Role] = mi.Device
			}
			for _, r := range tc.drop {
				if err := a.FailDevice(devIdx[r]); err != nil {
					t.Fatalf("fail role %d: %v", r, err)
				}
			}
			if a.Degraded() != len(tc.drop) {
				t.Fatalf("degraded %d after failing %v", a.Degraded(), tc.drop)
			}
			workload(t, a, m, 9, 40) // degraded writes
			for _, r := range tc.drop {
				if err := a.RemoveDevice(devIdx[r]); err != nil {
					t.Fatalf("remove role %d: %v", r, err)
				}
			}
			var mu sync.Mutex
			stop := make(chan struct{})
			var writes atomic.Int64
			done := concurrentWriter(t, a, m, &mu, 77, stop, &writes)
			// The rebuild pauses at its first throttle until the writer
			// has done 20 writes, so they overlap for sure.
			a.SetSyncLimits(SyncLimits{MinKBps: 1, MaxKBps: 1})
			var once sync.Once
			a.sc.sleep = func(ctx context.Context, d time.Duration) {
				once.Do(func() {
					for writes.Load() < 20 && ctx.Err() == nil {
						time.Sleep(time.Millisecond)
					}
					a.SetSyncLimits(SyncLimits{})
				})
			}
			fresh := make([]*MemDevice, len(tc.drop))
			// frozen: both spares are recovered by one action
			if err := a.StartAction(ActionFrozen); err != nil {
				t.Fatal(err)
			}
			for i := range tc.drop {
				fresh[i] = NewMemDevice(tc.s.devSize(0))
				if _, err := a.AddDevice(fresh[i].Reopen(), AddOptions{Replacement: -1}); err != nil {
					t.Fatalf("add: %v", err)
				}
			}
			if st := a.SyncStatus(); st.Action != ActionFrozen {
				t.Errorf("frozen array started %+v", st)
			}
			if err := a.StartAction(ActionRecover); err != nil {
				t.Fatal(err)
			}
			waitSync(t, a)
			close(stop)
			if n := <-done; n < 20 {
				t.Errorf("%d writes ran during the rebuild", n)
			}
			st := a.SyncStatus()
			if st.LastAction != ActionRecover || st.Done != st.Total {
				t.Errorf("status after rebuild: %+v", st)
			}
			if want := uint64(len(tc.drop)) * st.Total; tc.s.level != "raid10" && st.Written != want {
				t.Errorf("rebuild wrote %d sectors, want %d", st.Written, want)
			}
			if a.Degraded() != 0 {
				t.Fatalf("still degraded: %+v", a.Members())
			}
			if mm, err := a.Check(context.Background(), false); err != nil || mm != 0 {
				t.Fatalf("check: %d mismatches, %v", mm, err)
			}
			checkContent(t, a, m)
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			// Superblocks: every active role in sync, no recovery offset.
			all := make([]*MemDevice, 0, len(mems))
			for i, d := range mems {
				if !contains(tc.drop, i) {
					all = append(all, d)
				}
			}
			all = append(all, fresh...)
			ev := readSB(t, all[0]).Events
			for i, d := range all {
				sb := readSB(t, d)
				if sb.FeatureMap&superblock.FeatureRecoveryOffset != 0 || sb.Events != ev || sb.ResyncOffset != superblock.MaxSector {
					t.Errorf("member %d: features %#x events %d/%d resync_offset %x", i, sb.FeatureMap, sb.Events, ev, sb.ResyncOffset)
				}
				if !superblock.ActiveRole(sb.Role()) {
					t.Errorf("member %d has role %#x", i, sb.Role())
				}
			}
			// The rebuilt members serve the data with as few old ones
			// as the level allows.
			keep := append([]*MemDevice(nil), fresh...)
			need := tc.s.n - len(tc.drop)
			switch tc.s.level {
			case "raid1":
				need = 0
			case "raid6":
				need -= 2 - len(tc.drop)
			case "raid10":
				need = tc.s.n - len(tc.drop) // copies vary: keep the others
			}
			for i, d := range mems {
				if !contains(tc.drop, i) && need > 0 {
					keep = append(keep, d)
					need--
				}
			}
			var ds []Device
			for _, d := range keep {
				ds = append(ds, d.Reopen())
			}
			b, err := Open(ds, recoverOptions())
			if err != nil {
				t.Fatalf("open with the rebuilt members: %v", err)
			}
			checkContent(t, b, m)
			b.Close()
		})
	}
}

// pausingSleep replaces the sync thread's sleep: the first throttle
// signals paused and blocks until the action is interrupted.
func pausingSleep(a *Array) <-chan struct{} {
	paused := make(chan struct{})
	var once sync.Once
	a.sc.sleep = func(ctx context.Context, d time.Duration) {
		once.Do(func() { close(paused) })
		<-ctx.Done()
	}
	return paused
}

// offsetWrites counts writes that start below a byte offset.
type offsetWrites struct {
	Device
	below  int64
	from   int64 // only writes at or after from count (skip metadata)
	count  atomic.Int64
	writes atomic.Int64
}

func (o *offsetWrites) WriteAt(p []byte, off int64) (int, error) {
	o.writes.Add(1)
	if off >= o.from && off < o.below {
		o.count.Add(1)
	}
	return o.Device.WriteAt(p, off)
}

// TestRecoveryResume interrupts a recovery, checks the recorded
// recovery_offset, and resumes it after a reopen without writing below
// that offset.
func TestRecoveryResume(t *testing.T) {
	for _, s := range []spec{
		{level: "raid1", n: 2, devMiB: []int{4}, bitmap: true},
		{level: "raid5", n: 3, chunkKiB: 64, devMiB: []int{4}},
		{level: "raid6", n: 4, chunkKiB: 64, devMiB: []int{4}},
	} {
		t.Run(s.String(), func(t *testing.T) {
			mems := createChunk(t, s, 256<<10)
			a := open(t, mems, recoverOptions(), 1) // role 1 missing
			m := newModel(a.Size())
			p := make([]byte, a.Size())
			fillPattern(newRand(11), p)
			mustWrite(t, a, m, p, 0)
			paused := pausingSleep(a)
			a.SetSyncLimits(SyncLimits{MinKBps: 1, MaxKBps: 1})
			spare := NewMemDevice(s.devSize(0))
			if _, err := a.AddDevice(spare.Reopen(), AddOptions{Replacement: -1}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-paused:
			case <-time.After(time.Minute):
				t.Fatal("recovery never throttled")
			}
			if st := a.SyncStatus(); st.Action != ActionRecover || st.Done == 0 || st.Done >= st.Total {
				t.Fatalf("status while paused: %+v", st)
			}
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			sb := readSB(t, spare)
			if sb.FeatureMap&superblock.FeatureRecoveryOffset == 0 || sb.RecoveryOffset == 0 || sb.Role() != 1 {
				t.Fatalf("after interruption: features %#x recovery_offset %d role %d", sb.FeatureMap, sb.RecoveryOffset, sb.Role())
			}
			rec := sb.RecoveryOffset
			cw := &offsetWrites{Device: spare.Reopen(), from: int64(sb.DataOffset) * 512, below: int64(sb.DataOffset+rec) * 512}
			ds := devices(mems, 1)
			ds = append(ds, cw)
			b, err := Open(ds, recoverOptions())
			if err != nil {
				t.Fatal(err)
			}
			if mi := b.Members()[1]; mi.State != Recovering || mi.RecoveryOffset != rec {
				t.Fatalf("reopened: %+v", mi)
			}
			if err := b.StartAction(ActionRecover); err != nil {
				t.Fatal(err)
			}
			waitSync(t, b)
			st := b.SyncStatus()
			if st.LastAction != ActionRecover || b.Degraded() != 0 {
				t.Fatalf("after resume: %+v degraded %d", st, b.Degraded())
			}
			if n := cw.count.Load(); n != 0 {
				t.Errorf("%d writes below the recovery offset %d", n, rec)
			}
			if w, want := st.Written, st.Total-rec; w > want {
				t.Errorf("resumed recovery wrote %d sectors, at most %d expected", w, want)
			}
			if cw.writes.Load() == 0 {
				t.Error("resumed recovery wrote nothing")
			}
			if mm, err := b.Check(context.Background(), false); err != nil || mm != 0 {
				t.Fatalf("check: %d, %v", mm, err)
			}
			checkContent(t, b, m)
			b.Close()
		})
	}
}

// TestReAdd fails a member, writes while it is out, and re-adds it: only
// the chunks the bitmap marks are rebuilt.
func TestReAdd(t *testing.T) {
	const bmChunk = 256 << 10
	for _, s := range []spec{
		{level: "raid1", n: 2, devMiB: []int{8}, bitmap: true},
		{level: "raid5", n: 3, chunkKiB: 64, devMiB: []int{8}, bitmap: true},
		{level: "raid6", n: 4, chunkKiB: 64, devMiB: []int{8}, bitmap: true},
		{level: "raid10", n: 4, chunkKiB: 64, devMiB: []int{8}, bitmap: true},
		{level: "raid10", layout: "f2", n: 3, chunkKiB: 64, devMiB: []int{8}, bitmap: true},
	} {
		t.Run(s.String(), func(t *testing.T) {
			mems := createChunk(t, s, bmChunk)
			clk := &fakeClock{t: time.Unix(1700000100, 0)}
			o := recoverOptions()
			o.Clock = clk.Now
			a := open(t, mems, o)
			m := newModel(a.Size())
			p := make([]byte, a.Size())
			fillPattern(newRand(3), p)
			mustWrite(t, a, m, p, 0)
			for i := 0; i < 4; i++ { // let the bitmap daemon clear the bits
				clk.Add(10 * time.Second)
				a.Tick()
			}
			bmp := a.bm.(*wib.Bitmap)
			if n := bmp.DirtyChunks(); n != 0 {
				t.Fatalf("%d dirty chunks before the failure", n)
			}
			if err := a.FailDevice(1); err != nil {
				t.Fatal(err)
			}
			// Writes while degraded: three small ones in distinct chunks.
			for _, off := range []int64{0, a.Size() / 2, a.Size() - 4096} {
				q := make([]byte, 4096)
				fillPattern(newRand(uint64(off)), q)
				mustWrite(t, a, m, q, off)
			}
			for i := 0; i < 4; i++ {
				clk.Add(10 * time.Second)
				a.Tick()
			}
			dirty := bmp.DirtyChunks()
			if dirty == 0 {
				t.Fatal("no dirty chunk after degraded writes")
			}
			total := a.geo.DevSectors(0)
			cs := bmp.ChunkSectors()
			var want uint64
			if s.level == "raid10" {
				// the bitmap is in array sectors: count the member
				// sectors of role 1 that hold a dirty chunk's data
				for ms := uint64(0); ms < total; ms++ {
					if v, ok := a.geo.Unmap(1, ms); ok && bmp.Dirty(v) {
						want++
					}
				}
			} else {
				for c := uint64(0); c*cs < total; c++ {
					if bmp.Dirty(c * cs) {
						want += min(cs, total-c*cs)
					}
				}
			}
			// Not re-addable while the device is still a (faulty) member.
			if _, err := a.AddDevice(mems[1].Reopen(), AddOptions{ReAdd: true, Replacement: -1}); !errors.Is(err, ErrBusy) {
				t.Fatalf("re-add before remove: %v", err)
			}
			if err := a.RemoveDevice(1); err != nil {
				t.Fatal(err)
			}
			if _, err := a.AddDevice(mems[1].Reopen(), AddOptions{ReAdd: true, Replacement: -1}); err != nil {
				t.Fatal(err)
			}
			waitSync(t, a)
			st := a.SyncStatus()
			if st.LastAction != ActionRecover || a.Degraded() != 0 {
				t.Fatalf("after re-add: %+v, degraded %d", st, a.Degraded())
			}
			if st.Written != want {
				t.Errorf("re-add wrote %d sectors, want %d (%d dirty chunks of %d sectors)", st.Written, want, dirty, cs)
			}
			if mm, err := a.Check(context.Background(), false); err != nil || mm != 0 {
				t.Fatalf("check: %d, %v", mm, err)
			}
			checkContent(t, a, m)
			for i := 0; i < 4; i++ {
				clk.Add(10 * time.Second)
				a.Tick()
			}
			if n := bmp.DirtyChunks(); n != 0 {
				t.Errorf("%d dirty chunks after the re-add finished", n)
			}
			a.Close()
		})
	}
}

// TestReAddRefused: without a bitmap, or with a device older than the
// bitmap's events_cleared, a re-add is refused and writes nothing.
func TestReAddRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		bitmap bool
		age    bool
	}{
		{"no-bitmap", false, false},
		{"too-old", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec{level: "raid1", n: 2, devMiB: []int{4}, bitmap: tc.bitmap}
			mems := createChunk(t, s, 256<<10)
			clk := &fakeClock{t: time.Unix(1700000100, 0)}
			o := recoverOptions()
			o.Clock = clk.Now
			old := make([]byte, s.devSize(0))
			mems[1].Reopen().ReadAt(old, 0) // the member as it was
			a := open(t, mems, o)
			if tc.age {
				// Events move on and the bitmap clears while in sync.
				for i := 0; i < 3; i++ {
					mustWrite(t, a, nil, make([]byte, 4096), 0)
					for j := 0; j < 4; j++ {
						clk.Add(10 * time.Second)
						a.Tick()
					}
				}
			}
			a.FailDevice(1)
			a.RemoveDevice(1)
			dev := NewMemDevice(s.devSize(0))
			dev.WriteAt(old, 0)
			cw := &offsetWrites{Device: dev.Reopen(), below: 1 << 62}
			if _, err := a.AddDevice(cw, AddOptions{ReAdd: true, Replacement: -1}); !errors.Is(err, ErrNotReAddable) {
				t.Fatalf("re-add: %v, want ErrNotReAddable", err)
			}
			if n := cw.writes.Load(); n != 0 {
				t.Errorf("%d writes to a refused device", n)
			}
			a.Close()
		})
	}
}

// TestManageRefusals: removing an active member, failing the last copy,
// and adding a too small device are refused without writing anything.
func TestManageRefusals(t *testing.T) {
	s := spec{level: "raid1", n: 2, devMiB: []int{4}}
	mems := createChunk(t, s, 0)
	cws := make([]*offsetWrites, len(mems))
	var ds []Device
	for i, m := range mems {
		cws[i] = &offsetWrites{Device: m.Reopen(), below: 1 << 62}
		ds = append(ds, cws[i])
	}
	a, err := Open(ds, recoverOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.RemoveDevice(0); !errors.Is(err, ErrBusy) {
		t.Errorf("remove of an active member: %v", err)
	}
	if err := a.FailDevice(0); err != nil {
		t.Fatal(err)
	}
	before := [2]int64{cws[0].writes.Load(), cws[1].writes.Load()}
	if err := a.FailDevice(1); !errors.Is(err, ErrBusy) {
		t.Errorf("fail of the last copy: %v", err)
	}
	if err := a.RemoveDevice(1); !errors.Is(err, ErrBusy) {
		t.Errorf("remove of the last copy: %v", err)
	}
	small := &offsetWrites{Device: NewMemDevice(1 << 20), below: 1 << 62}
	if _, err := a.AddDevice(small, AddOptions{Replacement: -1}); err == nil {
		t.Error("a 1 MiB device was added to an array of 4 MiB members")
	}
	after := [2]int64{cws[0].writes.Load(), cws[1].writes.Load()}
	if before != after || small.writes.Load() != 0 {
		t.Errorf("refusals wrote: before %v after %v, small device %d", before, after, small.writes.Load())
	}
	if a.Members()[1].State != InSync || a.FailedReason() != "" {
		t.Errorf("last copy state %v, failed reason %q", a.Members()[1].State, a.FailedReason())
	}
}

// TestSyncSpeedLimit: with a fake clock that only moves when the sync
// thread sleeps, a resync at sync_speed_max = 1000 KiB/s takes at least
// as much (fake) time as the limit allows.
func TestSyncSpeedLimit(t *testing.T) {
	s := spec{level: "raid1", n: 2, devMiB: []int{4}}
	mems := createChunk(t, s, 0)
	clk := &fakeClock{t: time.Unix(1700000100, 0)}
	o := recoverOptions()
	o.Clock = clk.Now
	a := open(t, mems, o)
	mustWrite(t, a, nil, make([]byte, 4096), 0)
	// crash: reopen without closing, a resync is pending
	b := open(t, mems, o)
	var slept atomic.Int64
	b.sc.sleep = func(ctx context.Context, d time.Duration) {
		slept.Add(int64(d))
		clk.Add(d)
	}
	const maxKBps = 1000
	b.SetSyncLimits(SyncLimits{MinKBps: 10, MaxKBps: maxKBps})
	start := clk.Now()
	if err := b.StartAction(ActionResync); err != nil {
		t.Fatal(err)
	}
	waitSync(t, b)
	st := b.SyncStatus()
	if st.LastAction != ActionResync || st.Done != st.Total {
		t.Fatalf("status: %+v", st)
	}
	elapsed := clk.Now().Sub(start)
	kib := float64(st.Total) / 2
	// md's rate estimate divides by whole seconds + 1: allow one second.
	if min := time.Duration((kib/maxKBps - 1) * float64(time.Second)); elapsed < min {
		t.Errorf("%.0f KiB synced in %v of fake time, the limit needs at least %v", kib, elapsed, min)
	}
	if slept.Load() == 0 {
		t.Error("the sync never slept")
	}
	b.Close()
	// Without a limit (defaults) the same resync needs no sleep.
	c := open(t, mems, o)
	mustWrite(t, c, nil, make([]byte, 4096), 0)
	d := open(t, mems, o)
	var slept2 atomic.Int64
	d.sc.sleep = func(ctx context.Context, dd time.Duration) { slept2.Add(int64(dd)) }
	if err := d.Resync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if slept2.Load() != 0 {
		t.Errorf("resync at default limits slept %v", time.Duration(slept2.Load()))
	}
	d.Close()
}

// TestAutoResync: a crashed array opened with the daemon resyncs on its
// own, and reports it.
func TestAutoResync(t *testing.T) {
	s := spec{level: "raid5", n: 3, chunkKiB: 64, devMiB: []int{4}}
	mems := createChunk(t, s, 0)
	a := open(t, mems, testOptions())
	mustWrite(t, a, nil, make([]byte, 1<<20), 0)
	corruptParity(t, a, mems, 0)
	// crash; reopen with the background goroutine
	o := DefaultOptions()
	o.SafeModeDelay = 20 * time.Millisecond
	b := open(t, mems, o)
	// Like md_run, Open starts the pending resync before it returns: a
	// status read (or `wait`) right after assembly sees it.
	if st := b.SyncStatus(); st.Action != ActionResync && st.LastAction != ActionResync {
		t.Errorf("status right after Open: %+v, want a resync started", st)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if need, _ := b.NeedsResync(); !need && b.SyncStatus().Action == ActionIdle {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no automatic resync: %+v", b.SyncStatus())
		}
		time.Sleep(10 * time.Millisecond)
	}
	st := b.SyncStatus()
	if st.LastAction != ActionResync || st.Mismatches == 0 || st.Written == 0 {
		t.Errorf("status after the automatic resync: %+v", st)
	}
	if mm, err := b.Check(context.Background(), false); err != nil || mm != 0 {
		t.Errorf("check: %d, %v", mm, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if sb := readSB(t, mems[0]); sb.ResyncOffset != superblock.MaxSector {
		t.Errorf("resync_offset %x after close", sb.ResyncOffset)
	}
}

// TestStartAction: check and repair run in the background; busy and
// degraded refusals.
func TestStartAction(t *testing.T) {
	s := spec{level: "raid5", n: 3, chunkKiB: 64, devMiB: []int{4}}
	mems := createChunk(t, s, 0)
	a := open(t, mems, recoverOptions())
	defer a.Close()
	mustWrite(t, a, nil, make([]byte, 1<<20), 0)
	corruptParity(t, a, mems, 0)
	paused := pausingSleep(a)
	a.SetSyncLimits(SyncLimits{MinKBps: 1, MaxKBps: 1})
	if err := a.StartAction(ActionCheck); err != nil {
		t.Fatal(err)
	}
	<-paused
	if err := a.StartAction(ActionRepair); !errors.Is(err, ErrBusy) {
		t.Errorf("second action: %v", err)
	}
	if err := a.StartAction(ActionIdle); err != nil {
		t.Fatal(err)
	}
	a.sc.sleep = func(context.Context, time.Duration) {}
	a.SetSyncLimits(SyncLimits{})
	if err := a.StartAction(ActionCheck); err != nil {
		t.Fatal(err)
	}
	waitSync(t, a)
	if st := a.SyncStatus(); st.LastAction != ActionCheck || st.Mismatches != 8 || st.Written != 0 {
		t.Errorf("check status: %+v", st)
	}
	if err := a.StartAction(ActionRepair); err != nil {
		t.Fatal(err)
	}
	waitSync(t, a)
	if st := a.SyncStatus(); st.LastAction != ActionRepair || st.Mismatches != 8 || st.Written == 0 {
		t.Errorf("repair status: %+v", st)
	}
	if mm, err := a.Check(context.Background(), false); err != nil || mm != 0 {
		t.Errorf("check after repair: %d, %v", mm, err)
	}
	if err := a.FailDevice(2); err != nil {
		t.Fatal(err)
	}
	if err := a.StartAction(ActionCheck); !errors.Is(err, ErrDegradedCheck) {
		t.Errorf("check on a degraded array: %v", err)
	}
}

// TestReplace hot-replaces a member while writes go on: the spare is
// rebuilt as its replacement, takes over the role, and the old member
// becomes faulty; the data and the parity stay right.
func TestReplace(t *testing.T) {
	for _, s := range []spec{
		{level: "raid1", n: 2, devMiB: []int{4}, bitmap: true},
		{level: "raid5", n: 3, chunkKiB: 64, devMiB: []int{4}},
		{level: "raid6", n: 4, chunkKiB: 64, devMiB: []int{4}, bitmap: true},
		{level: "raid10", n: 4, chunkKiB: 64, devMiB: []int{4}},
	} {
		t.Run(s.String(), func(t *testing.T) {
			mems := createChunk(t, s, 256<<10)
			a := open(t, mems, recoverOptions())
			m := newModel(a.Size())
			p := make([]byte, a.Size())
			fillPattern(newRand(17), p)
			mustWrite(t, a, m, p, 0)
			spare := NewMemDevice(s.devSize(0))
			idx, err := a.AddDevice(spare.Reopen(), AddOptions{Replacement: -1})
			if err != nil {
				t.Fatal(err)
			}
			if st := a.Members()[s.n]; st.State != Spare || st.Device != idx {
				t.Fatalf("added spare: %+v", st)
			}
			var mu sync.Mutex
			stop := make(chan struct{})
			var writes atomic.Int64
			done := concurrentWriter(t, a, m, &mu, 99, stop, &writes)
			a.SetSyncLimits(SyncLimits{MinKBps: 1, MaxKBps: 1})
			var once sync.Once
			sawRepl := false
			a.sc.sleep = func(ctx context.Context, d time.Duration) {
				once.Do(func() {
					for _, mi := range a.Members() {
						if mi.Device == idx && mi.Role == 1 && mi.State == Recovering {
							sawRepl = true
						}
					}
					for writes.Load() < 20 && ctx.Err() == nil {
						time.Sleep(time.Millisecond)
					}
					a.SetSyncLimits(SyncLimits{})
				})
			}
			if err := a.Replace(1, idx); err != nil {
				t.Fatal(err)
			}
			if err := a.Replace(0, -1); !errors.Is(err, ErrBusy) {
				t.Errorf("second replace while one runs: %v", err)
			}
			waitSync(t, a)
			close(stop)
			<-done
			if !sawRepl {
				t.Error("the replacement was not listed as recovering role 1")
			}
			ms := a.Members()
			if ms[1].Device != idx || ms[1].State != InSync || a.Degraded() != 0 {
				t.Fatalf("after replace: %+v", ms)
			}
			faulty := false
			for _, mi := range ms[s.n:] {
				if mi.Device == 1 && mi.State == Faulty {
					faulty = true
				}
			}
			if !faulty {
				t.Errorf("the replaced member is not faulty: %+v", ms)
			}
			if mm, err := a.Check(context.Background(), false); err != nil || mm != 0 {
				t.Fatalf("check: %d, %v", mm, err)
			}
			checkContent(t, a, m)
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			if sb := readSB(t, spare); sb.Role() != 1 || sb.FeatureMap&0x12 != 0 {
				t.Errorf("replacement superblock: role %d features %#x", sb.Role(), sb.FeatureMap)
			}
			ds := devices(mems, 1)
			ds = append(ds, spare.Reopen())
			b, err := Open(ds, recoverOptions())
			if err != nil {
				t.Fatal(err)
			}
			if b.Degraded() != 0 {
				t.Errorf("reopened without the old member: degraded %d", b.Degraded())
			}
			checkContent(t, b, m)
			b.Close()
		})
	}
}

// TestFailedReason: beyond its redundancy the array refuses writes and
// says why; within it, it has no reason.
func TestFailedReason(t *testing.T) {
	s := spec{level: "raid5", n: 3, chunkKiB: 64, devMiB: []int{4}}
	mems := createChunk(t, s, 0)
	a := open(t, mems, recoverOptions())
	defer a.Close()
	if err := a.FailDevice(0); err != nil {
		t.Fatal(err)
	}
	if r := a.FailedReason(); r != "" {
		t.Errorf("degraded within redundancy: reason %q", r)
	}
	mustWrite(t, a, nil, make([]byte, 4096), 0)
	a.FailDevice(2)
	if r := a.FailedReason(); r == "" {
		t.Error("no reason after losing two raid5 members")
	}
	if _, err := a.WriteAt(make([]byte, 4096), 0); !errors.Is(err, ErrFailed) {
		t.Errorf("write to a failed array: %v", err)
	}
	if _, err := a.AddDevice(NewMemDevice(s.devSize(0)), AddOptions{Replacement: -1}); !errors.Is(err, ErrFailed) {
		t.Errorf("add to a failed array: %v", err)
	}
}

// TestAutoRecovery: an array opened degraded with a spare among its
// devices rebuilds onto it by itself (md_check_recovery), and the bitmap
// is clean afterwards.
func TestAutoRecovery(t *testing.T) {
	s := spec{level: "raid1", n: 2, devMiB: []int{4}, bitmap: true}
	mems := createChunk(t, s, 256<<10)
	a := open(t, mems, recoverOptions())
	m := newModel(a.Size())
	workload(t, a, m, 5, 20)
	if err := a.FailDevice(0); err != nil {
		t.Fatal(err)
	}
	workload(t, a, m, 6, 20) // sets NEEDED bits
	if err := a.RemoveDevice(0); err != nil {
		t.Fatal(err)
	}
	a.StartAction(ActionFrozen)
	spare := NewMemDevice(s.devSize(0))
	if _, err := a.AddDevice(spare.Reopen(), AddOptions{Replacement: -1}); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if sb := readSB(t, spare); sb.Role() != superblock.RoleSpare {
		t.Fatalf("spare superblock role %#x", sb.Role())
	}
	o := DefaultOptions()
	o.SafeModeDelay = 10 * time.Millisecond
	b, err := Open([]Device{mems[1].Reopen(), spare.Reopen()}, o)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for b.Degraded() != 0 || b.SyncStatus().Action != ActionIdle {
		if time.Now().After(deadline) {
			t.Fatalf("no automatic recovery: %+v %+v", b.SyncStatus(), b.Members())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st := b.SyncStatus(); st.LastAction != ActionRecover || st.Written != st.Total {
		t.Errorf("status: %+v", st)
	}
	checkContent(t, b, m)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	bits := func(d *MemDevice) uint64 {
		h, bb := readBits(t, d.Reopen())
		n := uint64(0)
		for i := uint64(0); i < h.Chunks(); i++ {
			if bb.Test(i) {
				n++
			}
		}
		return n
	}
	if n := bits(spare); n != 0 {
		t.Errorf("%d bitmap bits set after the recovery and a clean stop", n)
	}
}

// TestDegradedMirrorResync: a crashed raid1 opened with a member missing
// resyncs the copies that remain (md does; raid4/5/6 cannot).
func TestDegradedMirrorResync(t *testing.T) {
	s := spec{level: "raid1", n: 3, devMiB: []int{4}}
	mems := createChunk(t, s, 0)
	a := open(t, mems, recoverOptions())
	m := newModel(a.Size())
	workload(t, a, m, 8, 20)
	// crash, then the copies differ on member 1
	b := open(t, mems, recoverOptions(), 2)
	mm := b.roles[1]
	mems[1].WriteAt([]byte{9, 9, 9}, mm.dataOff+4096)
	if need, _ := b.NeedsResync(); !need {
		t.Fatal("no resync pending after the crash")
	}
	if err := b.Resync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := b.SyncStatus(); st.Mismatches == 0 || st.Written == 0 {
		t.Errorf("degraded resync status: %+v", st)
	}
	if need, _ := b.NeedsResync(); need {
		t.Error("resync still pending")
	}
	x, y := make([]byte, 1<<20), make([]byte, 1<<20)
	mems[0].Reopen().ReadAt(x, b.roles[0].dataOff)
	mems[1].Reopen().ReadAt(y, mm.dataOff)
	if !bytes.Equal(x, y) {
		t.Error("the remaining copies differ after the resync")
	}
	checkContent(t, b, m)
	b.Close()
}

// TestReplaceResume: a replacement interrupted by Close records its
// recovery_offset and MD_FEATURE_REPLACEMENT; the next Open resumes it
// from there.
func TestReplaceResume(t *testing.T) {
	s := spec{level: "raid5", n: 3, chunkKiB: 64, devMiB: []int{4}, bitmap: true}
	mems := createChunk(t, s, 256<<10)
	a := open(t, mems, recoverOptions())
	m := newModel(a.Size())
	p := make([]byte, a.Size())
	fillPattern(newRand(23), p)
	mustWrite(t, a, m, p, 0)
	spare := NewMemDevice(s.devSize(0))
	idx, err := a.AddDevice(spare.Reopen(), AddOptions{Replacement: -1})
	if err != nil {
		t.Fatal(err)
	}
	paused := pausingSleep(a)
	a.SetSyncLimits(SyncLimits{MinKBps: 1, MaxKBps: 1})
	if err := a.Replace(1, idx); err != nil {
		t.Fatal(err)
	}
	<-paused
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	sb := readSB(t, spare)
	rec := sb.RecoveryOffset
	if sb.Role() != 1 || sb.FeatureMap&superblock.FeatureReplacement == 0 || sb.FeatureMap&superblock.FeatureRecoveryOffset == 0 || rec == 0 {
		t.Fatalf("interrupted replacement: role %d features %#x recovery_offset %d", sb.Role(), sb.FeatureMap, rec)
	}
	if old := readSB(t, mems[1]); old.Role() != 1 || old.FeatureMap&superblock.FeatureReplacement != 0 {
		t.Fatalf("replaced member: role %d features %#x", old.Role(), old.FeatureMap)
	}
	cw := &offsetWrites{Device: spare.Reopen(), from: int64(sb.DataOffset) * 512, below: int64(sb.DataOffset+rec) * 512}
	ds := append(devices(mems), cw)
	b, err := Open(ds, recoverOptions())
	if err != nil {
		t.Fatal(err)
	}
	ms := b.Members()
	if len(ms) != 4 || ms[3].Role != 1 || ms[3].State != Recovering || ms[3].RecoveryOffset != rec || ms[1].Device != 1 {
		t.Fatalf("reopened: %+v", ms)
	}
	if err := b.StartAction(ActionRecover); err != nil {
		t.Fatal(err)
	}
	waitSync(t, b)
	ms = b.Members()
	if ms[1].Device != 3 || ms[1].State != InSync || b.Degraded() != 0 {
		t.Fatalf("after resume: %+v", ms)
	}
	if n := cw.count.Load(); n != 0 {
		t.Errorf("%d writes below the replacement's recovery offset %d", n, rec)
	}
	if st := b.SyncStatus(); st.Written != st.Total-rec {
		t.Errorf("resumed replacement wrote %d sectors, want %d", st.Written, st.Total-rec)
	}
	if mm, err := b.Check(context.Background(), false); err != nil || mm != 0 {
		t.Fatalf("check: %d, %v", mm, err)
	}
	checkContent(t, b, m)
	b.Close()
}

// TestSyncThrottle drives md_do_sync's throttle directly: below
// sync_speed_min it never waits, above it it yields to user I/O only when
// there is some, and above sync_speed_max it sleeps until the rate is
// back under the limit.
func TestSyncThrottle(t *testing.T) {
	s := spec{level: "raid1", n: 2, devMiB: []int{4}}
	mems := createChunk(t, s, 0)
	clk := &fakeClock{t: time.Unix(1700000100, 0)}
	o := recoverOptions()
	o.Clock = clk.Now
	a := open(t, mems, o)
	defer a.Close()
	var sleeps []time.Duration
	a.sc.sleep = func(ctx context.Context, d time.Duration) {
		sleeps = append(sleeps, d)
		clk.Add(d)
	}
	ctx, ok := a.claim(context.Background(), ActionResync)
	if !ok {
		t.Fatal("sync slot busy")
	}
	a.begin(ActionResync, 1<<20, 0)
	for _, tc := range []struct {
		name     string
		lim      SyncLimits
		userIO   bool
		io       uint64
		wantLong int // sleeps of 500 ms
		wantYld  int // short yields to user I/O
	}{
		{"below-min-busy", SyncLimits{MinKBps: 1 << 30, MaxKBps: 1 << 31}, true, 128, 0, 0},
		{"between-idle", SyncLimits{MinKBps: 1, MaxKBps: 1 << 30}, false, 128, 0, 0},
		{"between-busy", SyncLimits{MinKBps: 1, MaxKBps: 1 << 30}, true, 128, 0, 1},
		{"above-max", SyncLimits{MinKBps: 1, MaxKBps: 100}, false, 2048, 2, 0},
	} {
		sleeps = nil
		a.SetSyncLimits(tc.lim)
		if tc.userIO {
			a.userIO.add(0, 1)
		}
		if err := a.step(ctx, 0, tc.io); err != nil {
			t.Fatal(err)
		}
		long, yld := 0, 0
		for _, d := range sleeps {
			if d >= 500*time.Millisecond {
				long++
			} else {
				yld++
			}
		}
		if long < tc.wantLong || (tc.wantLong == 0 && long != 0) || yld != tc.wantYld {
			t.Errorf("%s: sleeps %v, want %d long and %d yields", tc.name, sleeps, tc.wantLong, tc.wantYld)
		}
	}
	a.release(true)
}

// TestRecoveryDisabled: a recovery that fails (a read error on a
// survivor where the stripe has no other redundancy) is not retried by
// the daemon over and over (md's recovery_disabled) until the next
// management operation.
func TestRecoveryDisabled(t *testing.T) {
	s := spec{level: "raid5", n: 3, chunkKiB: 64, devMiB: []int{4}}
	mems := createChunk(t, s, 0)
	var starts atomic.Int64
	o := DefaultOptions()
	o.SafeModeDelay = 5 * time.Millisecond
	o.Logf = func(f string, args ...any) {
		if strings.HasPrefix(f, "md: recovery of %d member") {
			starts.Add(1)
		}
	}
	fd := NewFaultDevice(mems[0].Reopen(), 1)
	ds := []Device{fd, mems[1].Reopen(), mems[2].Reopen()}
	a, err := Open(ds, o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.FailDevice(2); err != nil {
		t.Fatal(err)
	}
	if err := a.RemoveDevice(2); err != nil {
		t.Fatal(err)
	}
	fd.AddRule(FaultRule{Ops: OpRead, Off: 3 << 20, Len: 4096})
	if _, err := a.AddDevice(NewMemDevice(s.devSize(0)), AddOptions{Replacement: -1}); err != nil {
		t.Fatal(err)
	}
	waitSync(t, a)
	time.Sleep(300 * time.Millisecond) // many daemon ticks
	waitSync(t, a)
	if n := starts.Load(); n != 1 {
		t.Errorf("the failing recovery started %d times", n)
	}
	if a.Degraded() != 1 {
		t.Errorf("degraded %d", a.Degraded())
	}
	fd.ClearRules()
	if err := a.StartAction(ActionRecover); err != nil {
		t.Fatal(err)
	}
	waitSync(t, a)
	if a.Degraded() != 0 || starts.Load() != 2 {
		t.Errorf("after clearing the fault: degraded %d, %d starts", a.Degraded(), starts.Load())
	}
}

// TestRecoveryCrashResume: the images taken in the middle of a recovery
// (a crash) record the last checkpoint (every 1/16 of the member) as
// recovery_offset; opening them resumes from there.
func TestRecoveryCrashResume(t *testing.T) {
	s := spec{level: "raid5", n: 4, chunkKiB: 64, devMiB: []int{8}, bitmap: true}
	mems := createChunk(t, s, 256<<10)
	clk := &fakeClock{t: time.Unix(1700000100, 0)}
	o := recoverOptions()
	o.Clock = clk.Now
	a := open(t, mems, o, 2)
	m := newModel(a.Size())
	p := make([]byte, a.Size())
	fillPattern(newRand(31), p)
	mustWrite(t, a, m, p, 0)
	total := a.geo.DevSectors(0)
	crashed := make(chan struct{})
	var once sync.Once
	a.SetSyncLimits(SyncLimits{MinKBps: 1, MaxKBps: 1})
	a.sc.sleep = func(ctx context.Context, d time.Duration) {
		if a.sc.pos.Load() < total/2 {
			clk.Add(time.Hour) // the rate falls under the limit: go on
			return
		}
		once.Do(func() { close(crashed) })
		<-ctx.Done()
	}
	spare := NewMemDevice(s.devSize(0))
	if _, err := a.AddDevice(spare.Reopen(), AddOptions{Replacement: -1}); err != nil {
		t.Fatal(err)
	}
	<-crashed
	// the crash: copy the images as they are now
	snap := func(d *MemDevice) *MemDevice {
		b := make([]byte, d.Geometry().Size)
		d.Reopen().ReadAt(b, 0)
		c := NewMemDevice(int64(len(b)))
		c.WriteAt(b, 0)
		return c
	}
	var imgs []*MemDevice
	for i, d := range mems {
		if i != 2 {
			imgs = append(imgs, snap(d))
		}
	}
	sp := snap(spare)
	a.Close()
	sb := readSB(t, sp)
	rec := sb.RecoveryOffset
	step := total/16 + 1
	if sb.FeatureMap&superblock.FeatureRecoveryOffset == 0 || rec == 0 || rec > total/2 || rec+2*step < total/2 {
		t.Fatalf("crash image: recovery_offset %d (total %d, checkpoints every %d)", rec, total, step)
	}
	cw := &offsetWrites{Device: sp.Reopen(), from: int64(sb.DataOffset) * 512, below: int64(sb.DataOffset+rec) * 512}
	ds := devices(imgs)
	ds = append(ds, cw)
	b, err := Open(ds, recoverOptions())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.StartAction(ActionRecover); err != nil {
		t.Fatal(err)
	}
	waitSync(t, b)
	if b.Degraded() != 0 || cw.count.Load() != 0 {
		t.Fatalf("resumed: degraded %d, %d writes below %d", b.Degraded(), cw.count.Load(), rec)
	}
	if st := b.SyncStatus(); st.Written != total-rec {
		t.Errorf("resumed recovery wrote %d, want %d", st.Written, total-rec)
	}
	if mm, err := b.Check(context.Background(), false); err != nil || mm != 0 {
		t.Fatalf("check: %d, %v", mm, err)
	}
	checkContent(t, b, m)
	b.Close()
}

// TestIdleDaemonNoBusy: the background goroutine of an idle array never
// makes StartAction answer ErrBusy.
func TestIdleDaemonNoBusy(t *testing.T) {
	s := spec{level: "raid1", n: 2, devMiB: []int{2}}
	mems := createChunk(t, s, 0)
	o := DefaultOptions()
	o.SafeModeDelay = 5 * time.Millisecond // daemon ticks every 5 ms
	a := open(t, mems, o)
	defer a.Close()
	for i := 0; i < 30; i++ {
		if err := a.StartAction(ActionCheck); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		waitSync(t, a)
		time.Sleep(time.Duration(i%7) * time.Millisecond)
	}
	if st := a.SyncStatus(); st.LastAction != ActionCheck || st.Mismatches != 0 {
		t.Errorf("status: %+v", st)
	}
}
