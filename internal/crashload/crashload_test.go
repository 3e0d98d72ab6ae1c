package crashload

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"mdtool/internal/serve/export"
	"mdtool/internal/serve/nbd"
)

// cached is a device with a volatile write cache: writes land in the
// cache, Flush moves them to the durable Mem, and a crash (what remains
// in Mem) loses the cache. With lying set, Flush claims success but keeps
// the cache (a device that ignores flushes).
type cached struct {
	*export.Mem
	mu    sync.Mutex
	dirty map[int64][]byte // by 4 KiB page
	lying bool
	dead  bool // crashed: every request fails
}

var errDead = errors.New("crashed")

func (c *cached) ReadAt(p []byte, off int64) (int, error) {
	c.mu.Lock()
	n, err := c.Mem.ReadAt(p, off)
	if c.dead {
		c.mu.Unlock()
		return 0, errDead
	}
	for i := int64(0); i < int64(len(p)); i += BlockSize {
		if d, ok := c.dirty[off+i]; ok {
			copy(p[i:], d)
		}
	}
	c.mu.Unlock()
	return n, err
}

func (c *cached) WriteAt(p []byte, off int64) (int, error) {
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		return 0, errDead
	}
	for i := int64(0); i < int64(len(p)); i += BlockSize {
		c.dirty[off+i] = append([]byte(nil), p[i:i+BlockSize]...)
	}
	c.mu.Unlock()
	return len(p), nil
}

func (c *cached) WriteAtFUA(p []byte, off int64) (int, error) {
	n, err := c.WriteAt(p, off)
	if err == nil {
		err = c.Flush()
	}
	return n, err
}

func (c *cached) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return errDead
	}
	if c.lying {
		return nil
	}
	for off, d := range c.dirty {
		c.Mem.WriteAt(d, off)
	}
	c.dirty = map[int64][]byte{}
	return nil
}

// serve serves be on a unix socket; stop closes the server (the crash).
func serve(t *testing.T, be export.Backend) (sock string, stop func()) {
	t.Helper()
	s, err := nbd.NewServer(nbd.Config{Exports: []nbd.Export{{Backend: be}}})
	if err != nil {
		t.Fatal(err)
	}
	sock = filepath.Join(t.TempDir(), "nbd.sock")
	if _, err := s.ListenUnix(sock); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() { once.Do(func() { s.Close() }) }
	t.Cleanup(stop)
	return sock, stop
}

const size = 8 << 20

// crashRound runs the workload on a cached device for d, "crashes" it
// (drops the connection and the cache) and verifies what is durable.
func crashRound(t *testing.T, lying bool, st *State, mem *export.Mem, seed uint64) *Report {
	t.Helper()
	be := &cached{Mem: mem, dirty: map[int64][]byte{}, lying: lying}
	sock, stop := serve(t, be)
	c, err := Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	if c.Size() != size {
		t.Fatalf("size %d", c.Size())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- st.Run(ctx, c, Config{Seed: seed, ReadPercent: 20, FlushEvery: 10 * time.Millisecond}) }()
	time.Sleep(150 * time.Millisecond)
	// The crash: the cache is lost, nothing more reaches mem, and
	// requests in flight fail (error replies are expected here).
	be.mu.Lock()
	be.dirty = map[int64][]byte{}
	be.dead = true
	be.mu.Unlock()
	stop()
	var re *ReplyError
	if err := <-done; err != nil && !errors.As(err, &re) {
		t.Fatalf("run: %v", err)
	}
	c.Close()
	r, err := st.VerifyImage(mem)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestCrashHonestDevice: a device that honours flushes passes, over
// several crashes, and the workload did flush and write.
func TestCrashHonestDevice(t *testing.T) {
	mem, _ := export.NewMem(size, 512, 4096, 1<<20)
	st := NewState(size)
	for round := 0; round < 3; round++ {
		r := crashRound(t, false, st, mem, uint64(round))
		if !r.OK() {
			t.Fatalf("round %d: %s", round, r)
		}
		if r.Durable == 0 || st.Flushes == 0 || st.Acked == 0 || st.Reads == 0 {
			t.Fatalf("round %d: nothing was made durable: %s; %d flushes, %d writes acked, %d reads", round, r, st.Flushes, st.Acked, st.Reads)
		}
		t.Logf("round %d: %s; %d writes, %d flushes", round, r, st.Acked, st.Flushes)
	}
}

// TestCrashLyingDevice is the control: a device that ignores flushes
// loses acknowledged, flushed writes, and Verify says so.
func TestCrashLyingDevice(t *testing.T) {
	mem, _ := export.NewMem(size, 512, 4096, 1<<20)
	st := NewState(size)
	r := crashRound(t, true, st, mem, 1)
	if r.OK() || !strings.Contains(r.String(), "reads as zeroes, but version") {
		t.Fatalf("a device that drops flushed writes passed: %s", r)
	}
}

// TestVerifyFindsOldTornAndForeign checks the block rules directly.
func TestVerifyFindsOldTornAndForeign(t *testing.T) {
	mem, _ := export.NewMem(16*BlockSize, 512, 4096, 1<<20)
	st := NewState(16 * BlockSize)
	p := make([]byte, BlockSize)
	put := func(b, seq uint64) {
		fillBlock(p, b, seq)
		mem.WriteAt(p, int64(b*BlockSize))
	}
	// Blocks 0-3 were written twice (versions 1 and 2) and flushed.
	for b := uint64(0); b < 4; b++ {
		st.issued[b], st.acked[b], st.durable[b] = 2, 2, 2
		put(b, 2)
	}
	st.issued[4] = 3 // written, never acknowledged: anything goes
	st.issued[5], st.acked[5], st.durable[5] = 3, 3, 2
	put(5, 3) // newer than durable: fine
	put(0, 1) // older than durable
	put(1, 2)
	mem.WriteAt([]byte{0xff}, 1*BlockSize+100) // torn
	put(2, 2)
	fillBlock(p, 9, 2) // another block's content
	mem.WriteAt(p, 2*BlockSize)
	put(3, 7) // a version never written
	r, err := st.VerifyImage(mem)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"block 0: holds version 1, older than version 2",
		"block 1: torn or corrupt version 2",
		"block 2: holds block 9",
		"block 3: holds version 7, never written to it (last written 2)",
	}
	if r.Bad != 4 || len(r.Errors) != 4 || r.Newer != 1 || r.Durable != 5 {
		t.Fatalf("report: %s", r)
	}
	for i, w := range want {
		if !strings.HasPrefix(r.Errors[i], w) {
			t.Errorf("error %d: %q, want %q", i, r.Errors[i], w)
		}
	}
}

// TestRunRange: with First/Last the workload touches only those blocks.
func TestRunRange(t *testing.T) {
	mem, _ := export.NewMem(size, 512, 4096, 1<<20)
	sock, _ := serve(t, mem)
	c, err := Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st := NewState(size)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := st.Run(ctx, c, Config{First: 100, Last: 200, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	r, err := st.Verify(c)
	if err != nil || !r.OK() {
		t.Fatalf("%v %v", err, r)
	}
	inside := 0
	for b := uint64(0); b < st.Blocks(); b++ {
		in := b >= 100 && b < 200
		if st.issued[b] != 0 && !in {
			t.Fatalf("block %d outside [100, 200) written (version %d)", b, st.issued[b])
		}
		if st.issued[b] != 0 && in {
			inside++
		}
	}
	if inside == 0 {
		t.Fatal("nothing written in [100, 200)")
	}
	if err := st.Run(ctx, c, Config{First: 5, Last: 5}); err == nil {
		t.Errorf("an empty range was accepted")
	}
}
