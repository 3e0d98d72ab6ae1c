package wib

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"mdtool/bitmap"
)

var g12 = MemberGeom{LogicalBlock: 512, PhysicalBlock: 4096, BitmapStart: 8192, Limit: 1 << 20}

func twoMembers() []MemberGeom {
	a, b := g12, g12
	b.Index = 1
	b.PhysicalBlock = 512
	return []MemberGeom{a, b}
}

const dsleep = 5 * time.Second

// The kernel's lazy clear: counter 3 -> (EndWrite) 2 -> (pass) 1 ->
// (pass) 0 with the in-memory bit cleared -> (pass) bit written. With
// passes every daemon_sleep the on-disk bit goes 2-3 daemon_sleep after
// the write ended.
func TestLazyClearTiming(t *testing.T) {
	geoms := twoMembers()
	b, r, clk := setup{h: stdHeader, geoms: geoms, sub: true}.build(t)
	t0 := clk.Now()
	c := uint64(chunkPage1)
	s := b.chunkSector(c)
	if err := b.StartWrite(s, 8); err != nil {
		t.Fatal(err)
	}
	onDisk := func() bool {
		a, bb := r.diskBit(0, geoms[0], c), r.diskBit(1, geoms[1], c)
		if a != bb {
			t.Fatalf("members disagree about chunk %d: %v %v", c, a, bb)
		}
		return a
	}
	tick := func(d time.Duration) {
		t.Helper()
		if err := b.Tick(t0.Add(d)); err != nil {
			t.Fatalf("Tick(+%v): %v", d, err)
		}
	}
	// In flight: never cleared, however many passes.
	for i := 1; i <= 5; i++ {
		tick(time.Duration(i) * dsleep)
		if !onDisk() || !b.Dirty(s) {
			t.Fatalf("pass %d: bit cleared while the write is in flight", i)
		}
	}
	t1 := t0.Add(5 * dsleep)
	b.EndWrite(s, 8, true)                // at t1 (just after the last pass)
	tick(5*dsleep + dsleep - time.Second) // too early: no pass
	if w := b.ctr[c].Load() & kernMask; w != 2 {
		t.Fatalf("counter %d after an early Tick, want 2", w)
	}
	tick(6 * dsleep) // pass: 2 -> 1
	if w := b.ctr[c].Load() & kernMask; w != 1 || !onDisk() || !b.Dirty(s) {
		t.Fatalf("after 1 pass: counter %d, disk %v; want 1, set", w, onDisk())
	}
	tick(7 * dsleep) // pass: 1 -> 0, in memory only
	if b.Dirty(s) || !onDisk() {
		t.Fatalf("after 2 passes: Dirty %v disk %v; want clear in memory, set on disk", b.Dirty(s), onDisk())
	}
	r.resetLog()
	tick(8 * dsleep) // pass: the cleared bit is written
	if onDisk() {
		t.Fatalf("after 3 passes (%v after the write ended): bit still on disk", t0.Add(8*dsleep).Sub(t1))
	}
	// Only the block holding the bit is written, on each member.
	got := map[int]ext{}
	for _, w := range r.writes() {
		got[w.member] = ext{w.off, int64(len(w.data))}
	}
	if len(r.writes()) != 2 || got[0] != (ext{4096, 4096}) || got[1] != (ext{4608, 512}) {
		t.Fatalf("clearing writes %s", fmtWrites(r.writes()))
	}
	if d := t0.Add(8 * dsleep).Sub(t1); d <= 2*dsleep || d > 3*dsleep {
		t.Fatalf("bit cleared %v after the write, want within (2, 3] x daemon_sleep", d)
	}
	checkDiskMatchesImage(t, b, r, 0)
	checkDiskMatchesImage(t, b, r, 1)
}

// A write between the passes resets the counter and keeps the bit.
func TestLazyClearRestartedByWrite(t *testing.T) {
	b, r, clk := setup{h: stdHeader, geoms: []MemberGeom{g12}, sub: true}.build(t)
	t0 := clk.Now()
	s := b.chunkSector(chunkLast)
	mustStart(t, b, s)
	b.EndWrite(s, 8, true)
	b.Tick(t0.Add(dsleep)) // 2 -> 1
	r.resetLog()
	mustStart(t, b, s) // 1 -> 3, fast path: the bit is durable
	if n := len(r.writes()); n != 0 {
		t.Fatalf("StartWrite on a set, durable bit wrote %d times", n)
	}
	b.EndWrite(s, 8, true)
	b.Tick(t0.Add(2 * dsleep)) // 2 -> 1
	b.Tick(t0.Add(3 * dsleep)) // 1 -> 0
	if !r.diskBit(0, g12, chunkLast) {
		t.Fatal("bit written clear one pass early")
	}
	// Re-set after the in-memory clear but before it was written: the
	// bit is set again and must be durable before StartWrite returns.
	mustStart(t, b, s)
	if !r.diskBit(0, g12, chunkLast) || !b.Dirty(s) {
		t.Fatal("bit lost")
	}
	b.Tick(t0.Add(4 * dsleep))
	if !r.diskBit(0, g12, chunkLast) {
		t.Fatal("pending clear written over a new write")
	}
}

func mustStart(t *testing.T, b *Bitmap, s uint64) {
	t.Helper()
	if err := b.StartWrite(s, 8); err != nil {
		t.Fatalf("StartWrite(%d): %v", s, err)
	}
}

// ok=false keeps the chunk NEEDED until a resync has handled it.
func TestFailedWriteNeedsResync(t *testing.T) {
	b, r, clk := setup{h: stdHeader, geoms: []MemberGeom{g12}, sub: true}.build(t)
	t0 := clk.Now()
	s := b.chunkSector(chunkPage0)
	mustStart(t, b, s)
	b.EndWrite(s, 8, false)
	for i := 1; i <= 6; i++ {
		b.Tick(t0.Add(time.Duration(i) * dsleep))
	}
	if !b.Dirty(s) || !r.diskBit(0, g12, chunkPage0) {
		t.Fatal("NEEDED chunk cleared by the daemon")
	}
	if need, n := b.StartSync(s, true); !need || n != 8 {
		t.Fatalf("StartSync(degraded) = %v, %d", need, n)
	}
	if w := b.ctr[chunkPage0].Load(); w&neededBit == 0 || w&resyncBit != 0 {
		t.Fatalf("degraded StartSync changed flags: %#x", w)
	}
	if need, _ := b.StartSync(s+3, false); !need {
		t.Fatal("StartSync: not needed")
	}
	if w := b.ctr[chunkPage0].Load(); w&neededBit != 0 || w&resyncBit == 0 {
		t.Fatalf("StartSync flags %#x, want RESYNC only", w)
	}
	if need, _ := b.StartSync(b.chunkSector(chunkPage1), false); need {
		t.Fatal("clean chunk reported as needing resync")
	}
	if n := b.EndSync(s+3, false); n != 5 {
		t.Fatalf("EndSync covered %d sectors, want 5", n)
	}
	for i := 7; i <= 9; i++ {
		b.Tick(t0.Add(time.Duration(i) * dsleep))
	}
	if b.Dirty(s) || r.diskBit(0, g12, chunkPage0) {
		t.Fatal("resynced chunk not cleared after 3 passes")
	}
}

func TestAbortedSyncStaysNeeded(t *testing.T) {
	b, _, clk := setup{h: stdHeader, geoms: []MemberGeom{g12}, sub: true}.build(t)
	s := b.chunkSector(5)
	mustStart(t, b, s)
	b.EndWrite(s, 8, false)
	b.StartSync(s, false)
	b.EndSync(s, true)
	if w := b.ctr[5].Load(); w&neededBit == 0 {
		t.Fatalf("aborted sync lost NEEDED: %#x", w)
	}
	b.StartSync(s, false)
	b.CloseSync()
	if w := b.ctr[5].Load(); w&(neededBit|resyncBit) != 0 {
		t.Fatalf("CloseSync left flags %#x", w)
	}
	for i := 1; i <= 3; i++ {
		b.Tick(clk.Advance(dsleep))
	}
	if b.Dirty(s) {
		t.Fatal("chunk not cleared after CloseSync")
	}
}

// Bits set at load: NEEDED from NeededFrom on (kernel start=recovery_cp);
// before it they are idle and cleared by the daemon.
func TestLoadNeededFrom(t *testing.T) {
	bits := make([]byte, 8160)
	set := []uint64{1, 100, 40000, 65279}
	for _, c := range set {
		bitmap.Bits(bits).Set(c)
	}
	r := newRecTarget(t, g12)
	r.install(stdHeader, bits)
	clk := newFakeClock()
	b, err := New(Config{Header: stdHeader, Bits: bits, SubPage: true, Clock: clk.Now,
		NeededFrom: 40000 * 8}, r)
	if err != nil {
		t.Fatal(err)
	}
	if n := b.DirtyChunks(); n != 4 {
		t.Fatalf("DirtyChunks = %d, want 4", n)
	}
	for _, c := range set {
		if !b.Dirty(b.chunkSector(c)) {
			t.Errorf("chunk %d not dirty after load", c)
		}
	}
	if len(r.writes()) != 0 {
		t.Fatal("New wrote to the members")
	}
	// Loaded bits are durable: the fast path applies.
	mustStart(t, b, b.chunkSector(100))
	b.EndWrite(b.chunkSector(100), 8, true)
	if len(r.writes()) != 0 {
		t.Fatal("StartWrite on a loaded bit wrote the bitmap")
	}
	for i := 0; i < 3; i++ {
		b.Tick(clk.Advance(dsleep))
	}
	for _, c := range set {
		want := c >= 40000 // NEEDED (ends at or after NeededFrom)
		if got := r.diskBit(0, g12, c); got != want {
			t.Errorf("chunk %d on disk after 3 passes: %v, want %v", c, got, want)
		}
	}
}

func TestEventsCleared(t *testing.T) {
	geoms := twoMembers()
	b, r, clk := setup{h: stdHeader, geoms: geoms, sub: true}.build(t)
	hdr := func() *bitmap.Header { return r.diskHeader(1, geoms[1]) }

	// SetEvents writes events at once; events_cleared stays.
	if err := b.SetEvents(11, false); err != nil {
		t.Fatal(err)
	}
	if h := hdr(); h.Events != 11 || h.EventsCleared != 10 {
		t.Fatalf("header events %d/%d, want 11/10", h.Events, h.EventsCleared)
	}
	// A successful write on a clean array advances events_cleared; the
	// next daemon pass writes it, before the bits it clears.
	s := b.chunkSector(chunkPage1)
	mustStart(t, b, s)
	b.EndWrite(s, 8, true)
	if h := hdr(); h.EventsCleared != 10 {
		t.Fatal("events_cleared written before the daemon pass")
	}
	r.resetLog()
	b.Tick(clk.Advance(dsleep))
	if h := hdr(); h.EventsCleared != 11 {
		t.Fatalf("events_cleared %d after a pass, want 11", h.EventsCleared)
	}
	hdrWrite := -1
	for i, w := range r.writes() {
		if w.off == 0 && hdrWrite < 0 {
			hdrWrite = i
		}
	}
	b.Tick(clk.Advance(dsleep))
	b.Tick(clk.Advance(dsleep))
	if r.diskBit(0, geoms[0], chunkPage1) {
		t.Fatal("bit not cleared")
	}
	ws := r.writes()
	if hdrWrite < 0 {
		t.Fatal("no header write")
	}
	for i, w := range ws {
		if w.off != 0 && i < hdrWrite {
			t.Fatalf("bit write %d before the header write %d", i, hdrWrite)
		}
	}
	// Degraded: events_cleared does not advance.
	if err := b.SetEvents(12, true); err != nil {
		t.Fatal(err)
	}
	mustStart(t, b, s)
	b.EndWrite(s, 8, true)
	for i := 0; i < 3; i++ {
		b.Tick(clk.Advance(dsleep))
	}
	if h := hdr(); h.Events != 12 || h.EventsCleared != 11 {
		t.Fatalf("degraded: header events %d/%d, want 12/11", h.Events, h.EventsCleared)
	}
	// Events rolling back pull events_cleared with them.
	if err := b.SetEvents(9, false); err != nil {
		t.Fatal(err)
	}
	if h := hdr(); h.Events != 9 || h.EventsCleared != 9 {
		t.Fatalf("rollback: header events %d/%d, want 9/9", h.Events, h.EventsCleared)
	}
	// BITMAP_WRITE_ERROR is dropped by SetEvents.
	if b.Header().State&bitmap.StateWriteError != 0 {
		t.Fatal("write error state kept")
	}
	checkDiskMatchesImage(t, b, r, 0)
}

// The header is written to every member before any other block of the
// same flush.
func TestHeaderFirst(t *testing.T) {
	geoms := twoMembers()
	b, r, _ := setup{h: stdHeader, geoms: geoms, sub: true}.build(t)
	b.mu.Lock()
	b.hdr.Events = 20
	b.putHeaderLocked()
	for _, c := range []uint64{chunkPage1, chunkLast} {
		bitmap.BitsOf(b.img).Set(c)
		b.markChunkLocked(c)
	}
	err := b.syncLocked()
	b.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	// Member 0 (4 KiB physical blocks) gets one merged write starting
	// with the header; member 1 three 512-byte writes, the header first.
	ws := r.writes()
	if len(ws) != 4 {
		t.Fatalf("writes %s, want 4", fmtWrites(ws))
	}
	lastHdr, firstOther := -1, len(ws)
	for i, w := range ws {
		if w.off == 0 {
			lastHdr = i
		} else if i < firstOther {
			firstOther = i
		}
	}
	if lastHdr > firstOther {
		t.Fatalf("a block was written before the header reached every member: %s", fmtWrites(ws))
	}
}

// Concurrent writers that need bits set share a flush.
func TestGroupCommit(t *testing.T) {
	b, r, _ := setup{h: stdHeader, geoms: twoMembers(), sub: true}.build(t)
	gate := make(chan struct{})
	r.gate = gate
	done := make(chan error, 64)
	go func() { done <- b.StartWrite(b.chunkSector(0), 8) }()
	// Wait until the first flush is in progress.
	waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.flushing })
	const n = 20
	for i := 1; i <= n; i++ {
		c := uint64(i) * 3000 // spread over all three pages
		go func() { done <- b.StartWrite(b.chunkSector(c), 8) }()
	}
	waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.pendingSet) == n })
	close(gate)
	for i := 0; i <= n; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	st := b.Stats()
	if st.Flushes != 2 || st.SetFlushes != 2 {
		t.Fatalf("%d flushes (%d setting bits), want 2", st.Flushes, st.SetFlushes)
	}
	for i := 0; i <= n; i++ {
		c := uint64(i) * 3000
		if !r.diskBit(0, g12, c) || !r.diskBit(1, g12, c) {
			t.Fatalf("chunk %d not durable", c)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

var errInjected = errors.New("injected I/O error")

func TestWriteErrorRollsBack(t *testing.T) {
	geoms := twoMembers()
	b, r, _ := setup{h: stdHeader, geoms: geoms, sub: true}.build(t)
	r.fail = func(member int, off int64, n int) error {
		if member == 1 {
			return errInjected
		}
		return nil
	}
	s := b.chunkSector(chunkPage1)
	err := b.StartWrite(s, 8)
	var we *WriteError
	if !errors.As(err, &we) || we.Member != 1 || !errors.Is(err, errInjected) {
		t.Fatalf("StartWrite: %v, want a WriteError for member 1", err)
	}
	if w := b.ctr[chunkPage1].Load(); w&cntMask != 2 || w&persisted != 0 {
		t.Fatalf("counter after a failed StartWrite: %#x, want 2, not durable", w)
	}
	if st := b.Stats(); st.Errors != 1 || !errors.Is(st.LastErr, errInjected) {
		t.Fatalf("stats %+v", st)
	}
	// The engine fails member 1; the retry goes to member 0 only.
	r.fail = nil
	r.setMembers(geoms[0])
	r.resetLog()
	mustStart(t, b, s)
	for _, w := range r.writes() {
		if w.member != 0 {
			t.Fatalf("write to removed member %d", w.member)
		}
	}
	if !r.diskBit(0, geoms[0], chunkPage1) {
		t.Fatal("bit not durable after the retry")
	}
	// Member 1 comes back (re-added): it gets the whole bitmap.
	r.setMembers(geoms...)
	r.resetLog()
	mustStart(t, b, b.chunkSector(chunkLast))
	var whole uint64
	for _, w := range r.writes() {
		if w.member == 1 {
			whole += uint64(len(w.data))
		}
	}
	if whole < b.bytes {
		t.Fatalf("re-added member got %d bytes, want the whole bitmap (%d)", whole, b.bytes)
	}
	checkDiskMatchesImage(t, b, r, 1)
	st := b.Stats()
	if st.LastErr != nil {
		t.Fatalf("LastErr %v after a good flush", st.LastErr)
	}
}

func TestCounterMax(t *testing.T) {
	b, _, _ := setup{h: stdHeader, geoms: []MemberGeom{g12}, sub: true}.build(t)
	s := b.chunkSector(7)
	for i := 0; i < cntMax-2; i++ {
		mustStart(t, b, s)
	}
	if w := b.ctr[7].Load() & cntMask; w != cntMax {
		t.Fatalf("counter %d, want COUNTER_MAX", w)
	}
	ret := make(chan error, 1)
	go func() { ret <- b.StartWrite(s, 8) }()
	select {
	case err := <-ret:
		t.Fatalf("StartWrite returned at COUNTER_MAX: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	b.EndWrite(s, 8, true)
	if err := <-ret; err != nil {
		t.Fatal(err)
	}
	if w := b.ctr[7].Load() & cntMask; w != cntMax {
		t.Fatalf("counter %d after EndWrite+StartWrite, want COUNTER_MAX", w)
	}
}

func TestStaleBitmap(t *testing.T) {
	geoms := twoMembers()
	h := stdHeader
	h.State = bitmap.StateStale
	r := newRecTarget(t, geoms...)
	bits := make([]byte, 8160)
	r.install(h, bits)
	b, err := New(Config{Header: h, Bits: bits, SubPage: true, Events: 15}, r)
	if err != nil {
		t.Fatal(err)
	}
	if n := b.DirtyChunks(); n != b.Chunks() {
		t.Fatalf("%d of %d chunks dirty", n, b.Chunks())
	}
	for _, g := range geoms {
		dh := r.diskHeader(g.Index, g)
		if dh.State&bitmap.StateStale != 0 || dh.EventsCleared != 15 {
			t.Fatalf("member %d header state %#x events_cleared %d", g.Index, dh.State, dh.EventsCleared)
		}
		total, dirty := bitmap.ExamineCounts(dh, r.area(g.Index, b.bytes))
		if dirty != total {
			t.Fatalf("member %d: %d of %d bits on disk", g.Index, dirty, total)
		}
	}
	// The header comes after the bits.
	ws := r.writes()
	last := ws[len(ws)-1]
	if last.off != 0 {
		t.Fatalf("last write not the header: %s", fmtWrites(ws))
	}
	// All NEEDED: the daemon does not clear them, and the fast path works.
	r.resetLog()
	mustStart(t, b, 0)
	if len(r.writes()) != 0 {
		t.Fatal("StartWrite wrote after the stale rewrite")
	}
}

func TestFlushAtStop(t *testing.T) {
	b, r, _ := setup{h: stdHeader, geoms: []MemberGeom{g12}, sub: false}.build(t)
	for _, c := range []uint64{3, 5000, 40000, 65279} {
		mustStart(t, b, b.chunkSector(c))
		if c != 40000 {
			b.EndWrite(b.chunkSector(c), 8, true)
		}
	}
	if err := b.SetEvents(12, false); err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	total, dirty := bitmap.ExamineCounts(r.diskHeader(0, g12), r.area(0, b.bytes))
	if total != 65280 || dirty != 1 || !r.diskBit(0, g12, 40000) {
		t.Fatalf("after Flush: %d/%d dirty, want only the in-flight chunk", dirty, total)
	}
	// events_cleared did not advance: no write ended after events went up.
	if h := r.diskHeader(0, g12); h.Events != 12 || h.EventsCleared != 10 {
		t.Fatalf("header events %d/%d", h.Events, h.EventsCleared)
	}
}

func TestRangeAndAccessors(t *testing.T) {
	b, r, _ := setup{h: stdHeader, geoms: []MemberGeom{g12}, sub: true}.build(t)
	if b.ChunkSectors() != 8 || b.Chunks() != 65280 {
		t.Fatalf("ChunkSectors %d Chunks %d", b.ChunkSectors(), b.Chunks())
	}
	// A write spanning three chunks counts in each.
	mustStartN(t, b, 8*10+4, 17) // sectors 84..100: chunks 10, 11, 12
	for c := uint64(9); c <= 13; c++ {
		want := c >= 10 && c <= 12
		if b.Dirty(c*8) != want {
			t.Errorf("chunk %d dirty %v, want %v", c, !want, want)
		}
	}
	if b.DirtyChunks() != 3 {
		t.Fatalf("DirtyChunks %d", b.DirtyChunks())
	}
	// One flush for all three bits (same block).
	if ws := r.writes(); len(ws) != 1 {
		t.Fatalf("writes %s", fmtWrites(ws))
	}
	// Beyond the bitmap: ignored.
	if err := b.StartWrite(65280*8, 8); err != nil || b.Dirty(65280*8) {
		t.Fatal("write beyond the bitmap counted")
	}
	b.EndWrite(65280*8, 8, true)
	mustStartN(t, b, 65279*8, 1<<20) // clipped to the last chunk
	if !b.Dirty(65279 * 8) {
		t.Fatal("last chunk not dirty")
	}
	if err := b.StartWrite(0, 0); err != nil {
		t.Fatal(err)
	}
}

func mustStartN(t *testing.T, b *Bitmap, s, n uint64) {
	t.Helper()
	if err := b.StartWrite(s, n); err != nil {
		t.Fatalf("StartWrite(%d,%d): %v", s, n, err)
	}
}

// Run with the real clock and a 1 s daemon_sleep clears a bit within a
// few seconds.
func TestRun(t *testing.T) {
	h := stdHeader
	h.DaemonSleep = 1
	b, r, _ := setup{h: h, geoms: []MemberGeom{g12}, sub: true}.build(t)
	b.clock = time.Now
	b.mu.Lock()
	b.lastRun = time.Now()
	b.mu.Unlock()
	s := b.chunkSector(chunkPage1)
	mustStart(t, b, s)
	b.EndWrite(s, 8, true)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); b.Run(ctx) }()
	waitFor(t, func() bool { return !r.diskBit(0, g12, chunkPage1) })
	cancel()
	wg.Wait()
	if st := b.Stats(); st.TickErrors != 0 {
		t.Fatalf("tick errors: %+v", st)
	}
}

// A Target that fails a member on a write error (drops it from Members())
// gets the flush retried on the remaining members: StartWrite succeeds.
func TestFailedMemberDroppedAndRetried(t *testing.T) {
	geoms := twoMembers()
	b, r, _ := setup{h: stdHeader, geoms: geoms, sub: true}.build(t)
	r.fail = func(member int, off int64, n int) error {
		if member == 1 {
			r.geoms = r.geoms[:1] // r.mu is held: mark member 1 faulty
			return errInjected
		}
		return nil
	}
	mustStart(t, b, b.chunkSector(chunkPage1))
	if !r.diskBit(0, geoms[0], chunkPage1) {
		t.Fatal("bit not on the surviving member")
	}
	st := b.Stats()
	if st.Retries != 1 || st.Errors != 1 || st.LastErr != nil {
		t.Fatalf("stats %+v, want one retried failure and no error left", st)
	}
	if w := b.ctr[chunkPage1].Load(); w&persisted == 0 {
		t.Fatal("bit not marked durable after the retry")
	}
	// A member that keeps failing without being dropped: the error is
	// returned and nothing is retried.
	r.fail = func(member int, off int64, n int) error { return errInjected }
	if err := b.StartWrite(b.chunkSector(chunkLast), 8); !errors.Is(err, errInjected) {
		t.Fatalf("StartWrite: %v", err)
	}
	if st := b.Stats(); st.Retries != 1 {
		t.Fatalf("retried a failure on a listed member: %+v", st)
	}
}
