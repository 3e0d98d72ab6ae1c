package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"mdtool/bitmap"
	"mdtool/engine/layout"
	"mdtool/engine/r5log"
	"mdtool/superblock"
)

func journalSpecs() []spec {
	return []spec{
		{level: "raid5", n: 4, chunkKiB: 64, journal: true},
		{level: "raid6", n: 5, chunkKiB: 64, journal: true},
		{level: "raid4", n: 3, chunkKiB: 16, journal: true},
	}
}

// A journaled array reads back what was written, through restarts and
// through ring wrap-arounds (the workload writes several times the
// 8 MiB log), and the members stay consistent (parity matches).
func TestJournalWorkload(t *testing.T) {
	for _, s := range journalSpecs() {
		t.Run(s.String(), func(t *testing.T) {
			mems := create(t, s)
			a := open(t, mems, testOptions())
			if a.jnl == nil {
				t.Fatal("no journal running")
			}
			m := newModel(a.Size())
			for round := uint64(0); round < 3; round++ {
				workload(t, a, m, round+1, 300)
				checkContent(t, a, m)
				if err := a.Close(); err != nil {
					t.Fatal(err)
				}
				a = open(t, mems, testOptions())
				checkContent(t, a, m)
			}
			if n, err := a.Check(context.Background(), false); err != nil || n != 0 {
				t.Fatalf("parity mismatches %d, %v", n, err)
			}
			a.Close()
		})
	}
}

// A crash after the log write and before the member writes: the members
// as they were, the journal as it is after the writes. The next start
// replays the log, and the array holds what was written.
func TestJournalCrashReplay(t *testing.T) {
	for _, s := range journalSpecs() {
		t.Run(s.String(), func(t *testing.T) {
			mems := create(t, s)
			a := open(t, mems, testOptions())
			m := newModel(a.Size())
			workload(t, a, m, 7, 50)
			// A restart leaves an empty log: room for what follows
			// without a checkpoint.
			a.Close()
			a = open(t, mems, testOptions())
			before := make([]*MemDevice, s.n)
			for i := range before {
				before[i] = cloneMem(t, mems[i])
			}
			a.jnl.mu.Lock()
			tail := a.jnl.tail
			a.jnl.mu.Unlock()
			workload(t, a, m, 8, 6) // logged, then written to the members
			a.jnl.mu.Lock()
			moved := a.jnl.tail != tail
			a.jnl.mu.Unlock()
			if moved {
				// a checkpoint flushed the members: they would not be
				// as before in a real crash
				t.Fatal("the log was checkpointed during the writes: make them fewer")
			}
			jour := cloneMem(t, mems[s.n])
			a.Close()
			crash := append(before, jour)
			a = open(t, crash, testOptions())
			checkContent(t, a, m)
			if n, err := a.Check(context.Background(), false); err != nil || n != 0 {
				t.Fatalf("parity mismatches %d, %v", n, err)
			}
			a.Close()
			// The replay ended with a new log start: a second start
			// replays nothing.
			a = open(t, crash, testOptions())
			checkContent(t, a, m)
			a.Close()
		})
	}
}

// Without its journal the array runs read-only (md: "journal disk is
// missing, force array readonly").
func TestJournalMissingReadOnly(t *testing.T) {
	s := journalSpecs()[0]
	mems := create(t, s)
	a := open(t, mems, testOptions(), s.n)
	if _, err := a.WriteAt(make([]byte, 4096), 0); err != ErrReadOnly {
		t.Fatalf("write without the journal: %v, want ErrReadOnly", err)
	}
	a.Close()
}

// The superblocks carry the journal's role and feature, and journal_tail
// points at a valid meta block after a stop.
func TestJournalTail(t *testing.T) {
	s := journalSpecs()[0]
	mems := create(t, s)
	a := open(t, mems, testOptions())
	m := newModel(a.Size())
	workload(t, a, m, 3, 100)
	a.Close()
	j := mems[s.n].Reopen()
	head := make([]byte, 4096)
	if _, err := j.ReadAt(head, 4096); err != nil {
		t.Fatal(err)
	}
	sb, err := superblock.Parse(head)
	if err != nil {
		t.Fatal(err)
	}
	if sb.FeatureMap&superblock.FeatureJournal == 0 || sb.Role() != superblock.RoleJournal {
		t.Fatalf("journal superblock: feature 0x%x role 0x%x", sb.FeatureMap, sb.Role())
	}
	mb := make([]byte, 4096)
	if _, err := j.ReadAt(mb, int64(sb.DataOffset+sb.RecoveryOffset)*512); err != nil {
		t.Fatal(err)
	}
	meta, err := r5log.DecodeMeta(r5log.Seed(sb.SetUUID), mb)
	if err != nil {
		t.Fatalf("meta block at journal_tail %d: %v", sb.RecoveryOffset, err)
	}
	if meta.Position != sb.RecoveryOffset {
		t.Fatalf("meta block at %d says position %d", sb.RecoveryOffset, meta.Position)
	}
	if bytes.Equal(mb, make([]byte, 4096)) {
		t.Fatal("empty meta block")
	}
}

// md refuses to reshape, resize, take over or add a bitmap to an array
// with a journal (EINVAL), and so does the engine.
func TestJournalRefusesChanges(t *testing.T) {
	s := journalSpecs()[0]
	mems := create(t, s)
	a := open(t, mems, testOptions())
	defer a.Close()
	if _, err := a.GrowSize(1<<20, false); !errors.Is(err, ErrJournaled) {
		t.Errorf("grow size: %v", err)
	}
	if err := a.ChangeLevel(layout.RAID6); !errors.Is(err, ErrJournaled) {
		t.Errorf("level change: %v", err)
	}
	if err := a.StartReshape(ReshapeStart{}); !errors.Is(err, ErrJournaled) {
		t.Errorf("reshape: %v", err)
	}
	if err := a.AddBitmap(8, bitmap.Header{}); !errors.Is(err, ErrJournaled) {
		t.Errorf("bitmap: %v", err)
	}
}

// An array without superblocks (OpenBuild) has no journal member: its
// device 0 is a data member, and size changes stay allowed.
func TestJournalNoneOnBuild(t *testing.T) {
	mems := []*MemDevice{NewMemDevice(1 << 20), NewMemDevice(1 << 20)}
	a, err := OpenBuild(devices(mems), BuildParams{Level: layout.RAID1, RaidDisks: 2, Roles: []int{0, 1}}, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.jm != nil || a.journaled() {
		t.Fatalf("a built raid1 has a journal: member %v", a.jm)
	}
	if mi := a.Members()[0]; mi.State != InSync {
		t.Fatalf("device 0 is %v, want in_sync", mi.State)
	}
}

// Concurrent writers on a journaled array: whole stripes, single pages
// and 512-byte pieces of shared pages, each writer in its own bytes; the
// ring wraps several times. Every byte reads back as its writer left it,
// after a restart too, and the parity is consistent.
func TestJournalConcurrent(t *testing.T) {
	s := spec{level: "raid5", n: 4, chunkKiB: 16, journal: true}
	mems := create(t, s)
	a := open(t, mems, testOptions())
	m := newModel(a.Size())
	concurrentWriters(t, a, m, 1, 150, false)
	checkContent(t, a, m)
	if n, err := a.Check(context.Background(), false); err != nil || n != 0 {
		t.Fatalf("parity mismatches %d, %v", n, err)
	}
	a.Close()
	a = open(t, mems, testOptions())
	checkContent(t, a, m)
	a.Close()
}

// concurrentWriters runs 6 writers at once, each with iters writes in its
// own region (48 KiB, then 4 KiB, then a 512-byte slot of its own in the
// first 16 pages, which every writer touches), recorded in m; with
// readBack each reads its write back at once and compares. seed offsets
// the writers' random sources.
func concurrentWriters(t *testing.T, a *Array, m *model, seed uint64, iters int, readBack bool) {
	t.Helper()
	const writers = 6
	const shared = 16 * 4096 // pages every writer puts 512 bytes into
	region := (a.Size() - shared) / writers &^ 4095
	var wg sync.WaitGroup
	var mu sync.Mutex
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := newRand(uint64(w) + seed)
			base := shared + int64(w)*region
			for i := 0; i < iters; i++ {
				var off, n int64
				switch i % 3 {
				case 0:
					n = 48 << 10
					off = base + r.Int64N(region/n)*n
				case 1:
					n = 4096
					off = base + r.Int64N(region/n)*n
				default:
					n = 512
					off = int64(r.IntN(shared/4096))*4096 + int64(w)*512
				}
				p := make([]byte, n)
				fillPattern(r, p)
				mu.Lock() // the model's order: each writer owns its bytes
				m.write(p, off)
				mu.Unlock()
				if _, err := a.WriteAt(p, off); err != nil {
					errs <- err
					return
				}
				if !readBack {
					continue
				}
				got := make([]byte, n)
				if _, err := a.ReadAt(got, off); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, p) {
					errs <- errors.New("a read right after a write returned other data")
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// captureLog makes o's Logf collect the lines; the returned function
// gives those logged so far.
func captureLog(o *Options) func() []string {
	var mu sync.Mutex
	var lines []string
	o.Logf = func(f string, args ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(f, args...))
		mu.Unlock()
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), lines...)
	}
}
