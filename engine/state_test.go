package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"mdtool/superblock"
)

// fakeClock is a settable clock for safe-mode tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func readSB(t testing.TB, d Device) *superblock.Superblock {
	t.Helper()
	if m, ok := d.(*MemDevice); ok {
		d = m.Reopen()
	}
	ls, err := loadSuper(d, -1)
	if err != nil {
		t.Fatal(err)
	}
	if ls.err != nil {
		t.Fatalf("superblock does not parse cleanly: %v", ls.err)
	}
	return ls.sb
}

// TestSuperblockStates follows md's superblock updates: the first write
// after clean marks the array active (resync_offset 0, events+1) before
// any data is written; safe mode marks it clean again and rolls the event
// count back; stopping an active array marks it clean with events+1.
func TestSuperblockStates(t *testing.T) {
	for _, s := range []spec{
		{level: "raid5", n: 4, chunkKiB: 64},
		{level: "raid1", n: 2},
		{level: "raid10", layout: "n2", n: 4, chunkKiB: 64},
	} {
		t.Run(s.String(), func(t *testing.T) {
			mems := create(t, s)
			e0 := readSB(t, mems[0]).Events
			clk := &fakeClock{t: time.Unix(1700000100, 0)}
			o := testOptions()
			o.Clock = clk.Now
			a := open(t, mems, o)
			type want struct {
				events uint64
				resync uint64
			}
			check := func(what string, w want) {
				t.Helper()
				for i, m := range mems {
					sb := readSB(t, m)
					if sb.Events != w.events || sb.ResyncOffset != w.resync {
						t.Errorf("%s: member %d events %d resync_offset %x, want %d %x", what, i, sb.Events, sb.ResyncOffset, w.events, w.resync)
					}
					if sb.UTime.Seconds() < 1700000100 && sb.Events != e0 {
						t.Errorf("%s: member %d utime %d not updated", what, i, sb.UTime.Seconds())
					}
				}
			}
			// mdadm creates with events 0. md never rolls back to an
			// event count of 0 (events != 1 rule), so the first
			// clean/dirty pair moves forward; later pairs roll back.
			check("after open", want{e0, superblock.MaxSector})
			if !a.Clean() {
				t.Error("array not clean after open")
			}
			p := make([]byte, 4096)
			mustWrite(t, a, nil, p, 0)
			check("after first write", want{e0 + 1, 0})
			if a.Clean() {
				t.Error("array clean after a write")
			}
			a.Tick() // not yet: safe_mode_delay has not passed
			check("before safe mode", want{e0 + 1, 0})
			clk.Add(time.Second)
			a.Tick()
			check("after safe mode", want{e0 + 2, superblock.MaxSector})
			mustWrite(t, a, nil, p, 4096)
			check("second write", want{e0 + 3, 0})
			clk.Add(time.Second)
			a.Tick()
			check("second safe mode rolls back", want{e0 + 2, superblock.MaxSector})
			mustWrite(t, a, nil, p, 4096)
			check("third write", want{e0 + 3, 0})
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			check("after close", want{e0 + 4, superblock.MaxSector})
			want5 := e0 + 4
			// a clean open/close does not touch the superblocks
			a = open(t, mems, o)
			a.Close()
			check("after clean reopen", want{want5, superblock.MaxSector})
		})
	}
}

// TestDirtyOpen: an array left active (crash) opens with its resync_offset
// and is closed with it kept, so md still resyncs it.
func TestDirtyOpen(t *testing.T) {
	s := spec{level: "raid5", n: 4, chunkKiB: 64}
	mems := create(t, s)
	a := open(t, mems, testOptions())
	mustWrite(t, a, nil, make([]byte, 4096), 0)
	// simulate a crash: reopen the devices without closing the array
	b := open(t, mems, testOptions())
	if b.Clean() {
		t.Fatal("crashed array opens clean")
	}
	mustWrite(t, b, nil, make([]byte, 4096), 8192)
	b.Close()
	if sb := readSB(t, mems[0]); sb.ResyncOffset != 0 {
		t.Errorf("resync_offset %x after closing an unsynced array, want 0 (resync pending)", sb.ResyncOffset)
	}
	// a dirty degraded raid5 is refused unless forced
	if _, err := Open(devices(mems, 1), testOptions()); !errors.Is(err, ErrFailed) {
		t.Errorf("dirty degraded open: %v, want ErrFailed", err)
	}
	o := testOptions()
	o.Force = true
	c, err := Open(devices(mems, 1), o)
	if err != nil {
		t.Fatalf("forced dirty degraded open: %v", err)
	}
	c.Close()
	_ = a
}

// TestConcurrentWritesOneTransition: many writers racing on a clean array
// produce exactly one active transition.
func TestConcurrentWritesOneTransition(t *testing.T) {
	s := spec{level: "raid6", n: 5, chunkKiB: 64}
	mems := create(t, s)
	e0 := readSB(t, mems[0]).Events
	a := open(t, mems, testOptions())
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			p := make([]byte, 4096)
			if _, err := a.WriteAt(p, int64(i)*1<<20); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	if ev := readSB(t, mems[2]).Events; ev != e0+1 {
		t.Errorf("events %d after concurrent first writes, want %d", ev, e0+1)
	}
	a.Close()
}

// TestMemberFailure: a member whose writes fail becomes faulty; the others
// record role 0xfffe for it and advance events; the array keeps working
// degraded and reads the right data; the bitmap is told about it.
func TestMemberFailure(t *testing.T) {
	for _, s := range []spec{
		{level: "raid5", n: 4, chunkKiB: 64},
		{level: "raid6", n: 5, chunkKiB: 64},
		{level: "raid1", n: 3},
		{level: "raid10", layout: "n2", n: 4, chunkKiB: 64},
		{level: "raid10", layout: "f2", n: 4, chunkKiB: 64},
	} {
		t.Run(s.String(), func(t *testing.T) {
			mems := create(t, s)
			devs := devices(mems)
			fd := NewFaultDevice(devs[1], 1)
			devs[1] = fd
			var logs []string
			var logMu sync.Mutex
			o := testOptions()
			o.Logf = func(f string, args ...any) { logMu.Lock(); logs = append(logs, f); logMu.Unlock() }
			a, err := Open(devs, o)
			if err != nil {
				t.Fatal(err)
			}
			m := newModel(a.Size())
			workload(t, a, m, 5, 20)
			e1 := readSB(t, mems[0]).Events
			fd.AddRule(FaultRule{Ops: OpWrite})
			workload(t, a, m, 6, 40)
			if st := a.Members()[1].State; st != Faulty {
				t.Fatalf("member 1 is %v, want faulty", st)
			}
			if a.Degraded() != 1 {
				t.Errorf("degraded %d", a.Degraded())
			}
			sb := readSB(t, mems[0])
			devNum := readSB(t, mems[1]).DevNumber
			if sb.DevRoles[devNum] != superblock.RoleFaulty {
				t.Errorf("role of the failed member in the others' superblock: %#x", sb.DevRoles[devNum])
			}
			if sb.Events <= e1 {
				t.Errorf("events %d did not advance past %d", sb.Events, e1)
			}
			checkContent(t, a, m)
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			// Reassembly leaves the failed member out and serves the data.
			b := open(t, mems, testOptions())
			if b.Degraded() != 1 {
				t.Errorf("reassembled degraded %d, want 1", b.Degraded())
			}
			checkContent(t, b, m)
			b.Close()
		})
	}
}

// TestReadErrorRepair: a read error on a working member is repaired by
// rewriting the block from redundancy; the member stays in sync.
func TestReadErrorRepair(t *testing.T) {
	for _, s := range []spec{
		{level: "raid5", n: 4, chunkKiB: 64},
		{level: "raid6", n: 5, chunkKiB: 64},
		{level: "raid1", n: 2},
		{level: "raid10", layout: "o2", n: 3, chunkKiB: 64},
	} {
		t.Run(s.String(), func(t *testing.T) {
			mems := create(t, s)
			a := open(t, mems, testOptions())
			m := newModel(a.Size())
			p := make([]byte, a.Size())
			fillPattern(newRand(9), p)
			mustWrite(t, a, m, p, 0)
			a.Close()
			devs := devices(mems)
			var fds []*FaultDevice
			for i := range devs {
				fd := NewFaultDevice(devs[i], uint64(i))
				// a bad sector range on every member, healed by a write
				fd.AddRule(FaultRule{Ops: OpRead, Off: 3<<20 + int64(i)*8192, Len: 4096, HealOnWrite: true})
				fds = append(fds, fd)
				devs[i] = fd
			}
			a, err := Open(devs, testOptions())
			if err != nil {
				t.Fatal(err)
			}
			checkContent(t, a, m)
			for i, info := range a.Members() {
				if info.State != InSync {
					t.Errorf("member %d is %v after read errors", i, info.State)
				}
			}
			st := a.Stats()
			if st.ReadErrors == 0 || st.CorrectedReads == 0 {
				t.Errorf("stats %+v: expected read errors and corrections", st)
			}
			// the repaired sectors read without errors now
			checkContent(t, a, m)
			if mm, err := a.Check(context.Background(), false); err != nil || mm != 0 {
				t.Errorf("check: %d %v", mm, err)
			}
			a.Close()
		})
	}
}

// TestLastCopyWriteError: md never fails the last copy of raid1 data; a
// write that reaches no copy is an error for the caller.
func TestLastCopyWriteError(t *testing.T) {
	mems := create(t, spec{level: "raid1", n: 2})
	devs := devices(mems)
	f0, f1 := NewFaultDevice(devs[0], 1), NewFaultDevice(devs[1], 2)
	devs[0], devs[1] = f0, f1
	a, err := Open(devs, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	p := make([]byte, 4096)
	f0.AddRule(FaultRule{Ops: OpWrite, Off: 2 << 20, Len: 1 << 20})
	if _, err := a.WriteAt(p, 1<<20); err != nil {
		t.Fatalf("write with one copy failing: %v", err)
	}
	if a.Members()[0].State != Faulty {
		t.Fatalf("member 0 is %v", a.Members()[0].State)
	}
	f1.AddRule(FaultRule{Ops: OpWrite, Off: 2 << 20, Len: 1 << 20})
	if _, err := a.WriteAt(p, 1<<20); err == nil {
		t.Fatal("write that reached no copy succeeded")
	}
	if a.Members()[1].State != InSync {
		t.Errorf("last member is %v, md keeps it in sync", a.Members()[1].State)
	}
}

// TestBitmapWriteError: a member whose bitmap writes fail becomes faulty
// (md_error from the bitmap path) and the data write goes on degraded, also
// when the failure happens while the superblocks are being written.
func TestBitmapWriteError(t *testing.T) {
	s := spec{level: "raid5", n: 4, chunkKiB: 64, bitmap: true, devMiB: []int{64}}
	mems := create(t, s)
	devs := devices(mems)
	fd := NewFaultDevice(devs[2], 3)
	devs[2] = fd
	clk := &fakeClock{t: time.Unix(1700000100, 0)}
	o := testOptions()
	o.Clock = clk.Now
	a, err := Open(devs, o)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		clk.Add(6 * time.Second)
		a.Tick()
	}
	// fail every write to the metadata area of member 2
	fd.AddRule(FaultRule{Ops: OpWrite, Off: 0, Len: 1 << 20})
	m := newModel(a.Size())
	p := make([]byte, 64<<10)
	fillPattern(newRand(5), p)
	mustWrite(t, a, m, p, 0)
	deadline := time.Now().Add(5 * time.Second)
	for a.Members()[2].State != Faulty && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st := a.Members()[2].State; st != Faulty {
		t.Fatalf("member 2 is %v", st)
	}
	checkContent(t, a, m)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	sb := readSB(t, mems[0])
	if r := sb.DevRoles[readSB(t, mems[2]).DevNumber]; r != superblock.RoleFaulty {
		t.Errorf("role of member 2 in member 0's superblock: %#x", r)
	}
}
