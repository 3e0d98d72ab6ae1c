package engine

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"mdtool/superblock"
)

// wbOpen opens the array and sets write-back mode.
func wbOpen(t *testing.T, mems []*MemDevice) *Array {
	t.Helper()
	a := open(t, mems, recoverOptions())
	if a.JournalMode() != JournalWriteThrough {
		t.Fatalf("a start in mode %v, want write-through", a.JournalMode())
	}
	if err := a.SetJournalMode(JournalWriteBack); err != nil {
		t.Fatal(err)
	}
	if a.JournalMode() != JournalWriteBack {
		t.Fatalf("mode %v after setting write-back", a.JournalMode())
	}
	return a
}

// memberContent reads the array from its members alone (what a start
// without the journal's help would see): the cache is bypassed.
func memberContent(t *testing.T, a *Array, off, n int64) []byte {
	t.Helper()
	b := make([]byte, n)
	if err := a.pieces(off, n, func(o, l int64, full bool) error {
		return a.pers.read(b[o-off:o-off+l], uint64(o>>9))
	}); err != nil {
		t.Fatal(err)
	}
	return b
}

// In write-back mode a write completes with its data in the journal and
// the cache, not on the members; reads see it; writing the cache out
// (here the switch back to write-through) puts it on the members with
// consistent parity.
func TestJournalWriteBackCaches(t *testing.T) {
	for _, s := range journalSpecs() {
		t.Run(s.String(), func(t *testing.T) {
			mems := create(t, s)
			a := wbOpen(t, mems)
			defer a.Close()
			p := make([]byte, 12<<10)
			fillPattern(newRand(5), p)
			before := memberContent(t, a, 8192, int64(len(p)))
			if _, err := a.WriteAt(p, 8192); err != nil {
				t.Fatal(err)
			}
			if !a.jnl.cached() {
				t.Fatal("nothing cached after a write-back write")
			}
			if got := memberContent(t, a, 8192, int64(len(p))); !bytes.Equal(got, before) {
				t.Fatal("a write-back write went to the members")
			}
			got := make([]byte, len(p)+1024)
			if _, err := a.ReadAt(got, 8192-512); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[512:512+len(p)], p) {
				t.Fatal("a read does not see the cached write")
			}
			// A 1 KiB write into a cached page merges with it.
			q := make([]byte, 1024)
			fillPattern(newRand(6), q)
			if _, err := a.WriteAt(q, 8192+2048); err != nil {
				t.Fatal(err)
			}
			copy(p[2048:], q)
			if n, err := a.Check(context.Background(), false); err != nil || n != 0 {
				t.Fatalf("members inconsistent while cached: %d mismatches, %v", n, err)
			}
			if err := a.SetJournalMode(JournalWriteThrough); err != nil {
				t.Fatal(err)
			}
			if a.jnl.cached() {
				t.Fatal("pages still cached after the switch to write-through")
			}
			if got := memberContent(t, a, 8192, int64(len(p))); !bytes.Equal(got, p) {
				t.Fatal("the members do not hold the written data after the write-out")
			}
			if n, err := a.Check(context.Background(), false); err != nil || n != 0 {
				t.Fatalf("parity after the write-out: %d mismatches, %v", n, err)
			}
		})
	}
}

// A write-back workload several times the cache and the log: every read
// along the way sees the latest data, restarts (the stop writes the
// cache out) keep it, and the parity stays consistent.
func TestJournalWriteBackWorkload(t *testing.T) {
	for _, s := range journalSpecs() {
		t.Run(s.String(), func(t *testing.T) {
			mems := create(t, s)
			a := wbOpen(t, mems)
			m := newModel(a.Size())
			for round := uint64(0); round < 3; round++ {
				for part := uint64(0); part < 4; part++ {
					workload(t, a, m, 10*round+part+1, 120)
					checkContent(t, a, m)
				}
				if a.jnl.c.epoch.Load() == 0 {
					t.Fatal("the cache was never written out: the workload proves nothing")
				}
				if err := a.Close(); err != nil {
					t.Fatal(err)
				}
				// The stop wrote the cache out, its data logged before
				// and its parity then: the log's last io_unit holds
				// parity only, which md's recovery skips.
				o := recoverOptions()
				o.Name = "md"
				logs := captureLog(&o)
				a = open(t, mems, o)
				if !containsPrefix(logs(), "md/raid:md: starting from clean shutdown") {
					t.Errorf("a start after a write-back stop: %q, want md's clean shutdown", logs())
				}
				checkContent(t, a, m)
				if n, err := a.Check(context.Background(), false); err != nil || n != 0 {
					t.Fatalf("parity mismatches %d, %v", n, err)
				}
				if err := a.SetJournalMode(JournalWriteBack); err != nil {
					t.Fatal(err)
				}
			}
			a.Close()
		})
	}
}

// A crash in write-back mode (every device copied at one instant while
// the array runs, the cache holding data the members never got): the
// next start recovers the data-only stripes from the log, and the array
// reads as written, with consistent parity; a second start has nothing
// left to recover.
func TestJournalWriteBackCrash(t *testing.T) {
	for _, s := range journalSpecs() {
		t.Run(s.String(), func(t *testing.T) {
			mems := create(t, s)
			a := wbOpen(t, mems)
			m := newModel(a.Size())
			for round := uint64(0); round < 3; round++ {
				workload(t, a, m, 40+round, 90+int(round)*7)
				if !a.jnl.cached() {
					t.Fatalf("round %d: nothing cached at the crash", round)
				}
				crash := cloneMems(t, mems)
				o := recoverOptions()
				o.Name = "md"
				logs := captureLog(&o)
				b := open(t, crash, o)
				if l := logs(); !containsPrefix(l, "md/raid:md: recovering ") || containsPrefix(l, "md/raid:md: recovering 0 data-only") {
					t.Fatalf("round %d: recovery said %q, want data-only stripes", round, l)
				}
				checkContent(t, b, m)
				if n, err := b.Check(context.Background(), false); err != nil || n != 0 {
					t.Fatalf("round %d: parity mismatches %d, %v", round, n, err)
				}
				b.Close()
				logs = captureLog(&o)
				b = open(t, crash, o)
				checkContent(t, b, m)
				b.Close()
				if l := logs(); containsPrefix(l, "md/raid:md: recovering ") && !containsPrefix(l, "md/raid:md: recovering 0 data-only") {
					t.Fatalf("round %d: the second start recovers data-only stripes again: %q", round, l)
				}
			}
			a.Close()
		})
	}
}

// Concurrent writers and readers in write-back mode, with the cache
// written out many times under them: each reader sees its writer's
// latest bytes; after a restart too; parity consistent.
func TestJournalWriteBackConcurrent(t *testing.T) {
	s := spec{level: "raid5", n: 4, chunkKiB: 16, journal: true}
	mems := create(t, s)
	a := wbOpen(t, mems)
	m := newModel(a.Size())
	concurrentWriters(t, a, m, 11, 200, true)
	if a.jnl.c.epoch.Load() == 0 {
		t.Fatal("the cache was never written out")
	}
	checkContent(t, a, m)
	a.Close()
	a = open(t, mems, recoverOptions())
	checkContent(t, a, m)
	if n, err := a.Check(context.Background(), false); err != nil || n != 0 {
		t.Fatalf("parity mismatches %d, %v", n, err)
	}
	a.Close()
}

// md's rules for journal_mode: write-back is refused on a degraded array
// (EINVAL) and without a journal (ENODEV); a member failing in
// write-back mode switches the journal to write-through, the cache
// written out (r5c_update_on_rdev_error).
func TestJournalWriteBackModes(t *testing.T) {
	s := journalSpecs()[0]
	plain := create(t, spec{level: "raid5", n: 4, chunkKiB: 64})
	b := open(t, plain, recoverOptions())
	if err := b.SetJournalMode(JournalWriteBack); !errors.Is(err, ErrNoJournal) {
		t.Errorf("write-back without a journal: %v, want ErrNoJournal", err)
	}
	b.Close()

	mems := create(t, s)
	a := wbOpen(t, mems)
	m := newModel(a.Size())
	workload(t, a, m, 3, 40)
	if !a.jnl.cached() {
		t.Fatal("nothing cached")
	}
	// the daemon's --fail (FailDevice), as md's set_disk_faulty
	if err := a.FailDevice(1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for a.JournalMode() != JournalWriteThrough || a.jnl.c.switching.Load() {
		if time.Now().After(deadline) {
			t.Fatal("still write-back after a member failed")
		}
		time.Sleep(time.Millisecond)
	}
	if a.jnl.cached() {
		t.Fatal("pages still cached after the switch")
	}
	if err := a.SetJournalMode(JournalWriteBack); !errors.Is(err, ErrDegradedWriteBack) || !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("write-back on a degraded array: %v, want ErrDegradedWriteBack", err)
	}
	workload(t, a, m, 4, 20)
	checkContent(t, a, m)
	a.Close()
	a = open(t, mems, recoverOptions())
	checkContent(t, a, m)
	a.Close()
}

func containsPrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// The journal device failing (md_error from the log's write or flush
// completion): the write that met the failure fails, the journal member
// is faulty in the other members' superblocks, later writes fail, and
// data cached in write-back mode still goes to the members (md writes
// injournal stripes out with the log failed). The next start finds no
// journal and runs read-only, with every write acknowledged before the
// failure in place.
func TestJournalDeviceFails(t *testing.T) {
	for _, wb := range []bool{false, true} {
		name := "write-through"
		if wb {
			name = "write-back"
		}
		t.Run(name, func(t *testing.T) {
			_, mems, m, p := journalFailed(t, wb)
			b := open(t, mems, recoverOptions())
			defer b.Close()
			if _, err := b.WriteAt(p, 0); err != ErrReadOnly {
				t.Errorf("a write after a start without the journal: %v, want ErrReadOnly", err)
			}
			checkContent(t, b, m)
		})
	}
}

// journalFailed runs a workload on the first of journalSpecs (in
// write-back mode when wb), then fails the journal device's writes and
// flushes: the next writes must fail (ErrJournal), the journal member
// turn faulty in the other members' superblocks with md's disk failure
// line, write-back fall back to write-through (its cache written out to
// the members) and the array read as the model says. It returns the
// spec, the members after the array's stop, the model and a page the
// caller may try to write.
func journalFailed(t *testing.T, wb bool) (spec, []*MemDevice, *model, []byte) {
	t.Helper()
	s := journalSpecs()[0]
	mems := create(t, s)
	devs := devices(mems)
	fd := NewFaultDevice(devs[s.n], 1)
	devs[s.n] = fd
	o := recoverOptions()
	o.Name = "md0"
	logs := captureLog(&o)
	a, err := Open(devs, o)
	if err != nil {
		t.Fatal(err)
	}
	if wb {
		if err := a.SetJournalMode(JournalWriteBack); err != nil {
			t.Fatal(err)
		}
	}
	m := newModel(a.Size())
	workload(t, a, m, 21, 60)
	if wb && !a.jnl.cached() {
		t.Fatal("nothing cached before the failure")
	}
	fd.AddRule(FaultRule{Ops: OpWrite | OpFlush})
	p := make([]byte, 4096)
	fillPattern(newRand(22), p)
	if _, err := a.WriteAt(p, 1<<20); !errors.Is(err, ErrJournal) {
		t.Fatalf("a write with the journal device failing: %v, want ErrJournal", err)
	}
	// the failed write's page holds either its old or its new data
	got := make([]byte, 4096)
	if _, err := a.ReadAt(got, 1<<20); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, p) && !bytes.Equal(got, m.b[1<<20:1<<20+4096]) {
		t.Fatal("the failed write's page holds neither its old nor its new data")
	}
	m.write(got, 1<<20)
	if _, err := a.WriteAt(p, 2<<20); !errors.Is(err, ErrJournal) {
		t.Fatalf("a write after the journal failed: %v, want ErrJournal", err)
	}
	var jst MemberState
	for _, mi := range a.Members() {
		if mi.Device == s.n {
			jst = mi.State
		}
	}
	if jst != Faulty {
		t.Fatalf("the journal member is %v after its failure, want faulty", jst)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for wb && (a.JournalMode() != JournalWriteThrough || a.jnl.c.switching.Load()) {
		if time.Now().After(deadline) {
			t.Fatal("still write-back after the journal failed")
		}
		time.Sleep(time.Millisecond)
	}
	checkContent(t, a, m)
	a.Close()
	if !containsPrefix(logs(), "md/raid:md0: Disk failure on ") {
		t.Errorf("no disk failure line: %q", logs())
	}
	head := make([]byte, 4096)
	if _, err := mems[0].Reopen().ReadAt(head, 4096); err != nil {
		t.Fatal(err)
	}
	sb0, err := superblock.Parse(head)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mems[s.n].Reopen().ReadAt(head, 4096); err != nil {
		t.Fatal(err)
	}
	sbj, err := superblock.Parse(head)
	if err != nil {
		t.Fatal(err)
	}
	if r := sb0.DevRoles[sbj.DevNumber]; r != superblock.RoleFaulty {
		t.Errorf("member 0 records the journal's role as 0x%x, want faulty", r)
	}
	return s, mems, m, p
}
