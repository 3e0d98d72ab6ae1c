package crashload

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"sync"
	"time"
)

// BlockSize is the unit of versioning: every BlockSize block of the device
// carries its own header.
const BlockSize = 4096

// Block layout: magic, block number, sequence number, CRC-32C of the
// whole block (with this field zero), then a pattern derived from the
// block number and the sequence number.
const (
	blockMagic = 0x314853415243444d // "MDCRASH1" little-endian
	crcOff     = 24
	hdrLen     = 32
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// fillBlock writes version seq of block b into p (BlockSize bytes).
func fillBlock(p []byte, b, seq uint64) {
	binary.LittleEndian.PutUint64(p[0:], blockMagic)
	binary.LittleEndian.PutUint64(p[8:], b)
	binary.LittleEndian.PutUint64(p[16:], seq)
	binary.LittleEndian.PutUint64(p[crcOff:], 0)
	x := b*0x9e3779b97f4a7c15 ^ seq*0xbf58476d1ce4e5b9 | 1
	for i := hdrLen; i < BlockSize; i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(p[i:], x)
	}
	binary.LittleEndian.PutUint32(p[crcOff:], crc32.Checksum(p[:BlockSize], castagnoli))
}

// Block kinds found by parseBlock.
const (
	kindZero    = iota // never written (all zeroes)
	kindVersion        // an intact version
	kindBad            // anything else: torn, foreign or corrupt
)

// parseBlock says what block b holds: its version, zeroes, or garbage.
func parseBlock(p []byte, b uint64) (kind int, seq uint64, why string) {
	if binary.LittleEndian.Uint64(p[0:]) != blockMagic {
		for _, c := range p[:BlockSize] {
			if c != 0 {
				return kindBad, 0, "no block header (neither zeroes nor a version)"
			}
		}
		return kindZero, 0, ""
	}
	seq = binary.LittleEndian.Uint64(p[16:])
	if got := binary.LittleEndian.Uint64(p[8:]); got != b {
		return kindBad, seq, fmt.Sprintf("holds block %d", got)
	}
	want := binary.LittleEndian.Uint32(p[crcOff:])
	var crc [4]byte
	copy(crc[:], p[crcOff:crcOff+4])
	binary.LittleEndian.PutUint32(p[crcOff:], 0)
	got := crc32.Checksum(p[:BlockSize], castagnoli)
	copy(p[crcOff:], crc[:])
	if got != want {
		return kindBad, seq, fmt.Sprintf("torn or corrupt version %d (crc %08x, recorded %08x)", seq, got, want)
	}
	return kindVersion, seq, ""
}

// Config tunes Run.
type Config struct {
	// Workers issue writes (and reads) concurrently; default 8.
	Workers int
	// MaxBlocks is the largest write in blocks (1..MaxBlocks, random);
	// default 8.
	MaxBlocks int
	// FlushEvery is the time between flushes; default 20ms.
	FlushEvery time.Duration
	// ReadPercent of the requests are reads checked against what was
	// acknowledged; default 0.
	ReadPercent int
	// Seed seeds the random choices.
	Seed uint64
	// First and Last limit the writes and reads to blocks [First, Last)
	// (Last 0: to the end).
	First, Last uint64
}

// State is what the workload knows about every block of the device. One
// State follows a device across any number of runs and crashes.
type State struct {
	mu      sync.Mutex
	n       uint64   // blocks
	seq     uint64   // last sequence number used
	issued  []uint64 // highest version sent per block (acknowledged or not)
	acked   []uint64 // highest version acknowledged per block
	durable []uint64 // highest version acknowledged before a completed flush
	busy    []bool   // a request on the block is in flight

	// Totals over every run.
	Writes, Acked, Flushes, Reads uint64
	// readErrs: problems seen by the checked reads of Run.
	readErrs []string
}

// NewState starts the record of a device of size bytes that reads as
// zeroes.
func NewState(size int64) *State {
	n := uint64(size / BlockSize)
	return &State{n: n, issued: make([]uint64, n), acked: make([]uint64, n), durable: make([]uint64, n), busy: make([]bool, n)}
}

// AckedWrites is Acked read under the lock: for a caller that watches a
// Run from another goroutine.
func (s *State) AckedWrites() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Acked
}

// Blocks is the number of blocks tracked.
func (s *State) Blocks() uint64 { return s.n }

// Clone copies the state (for checking a copy of the device later).
func (s *State) Clone() *State {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &State{n: s.n, seq: s.seq, Writes: s.Writes, Acked: s.Acked, Flushes: s.Flushes, Reads: s.Reads}
	c.issued = append([]uint64(nil), s.issued...)
	c.acked = append([]uint64(nil), s.acked...)
	c.durable = append([]uint64(nil), s.durable...)
	c.busy = make([]bool, s.n)
	return c
}

// DurableBlocks counts the blocks with a version covered by a flush.
func (s *State) DurableBlocks() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, d := range s.durable {
		if d != 0 {
			n++
		}
	}
	return n
}

// claim marks [b, b+k) busy if none of it is.
func (s *State) claim(b, k uint64) bool {
	for i := b; i < b+k; i++ {
		if s.busy[i] {
			return false
		}
	}
	for i := b; i < b+k; i++ {
		s.busy[i] = true
	}
	return true
}

// Run runs the workload on c until ctx ends or the connection fails
// (the server was killed: that is the expected end). It returns an error
// only for what the workload itself finds wrong: a server error reply, or
// a checked read that returned an older version than acknowledged. All
// in-flight requests have ended when it returns.
func (s *State) Run(ctx context.Context, c *Client, cfg Config) error {
	cfg = cfg.withDefaults()
	lo, hi, err := s.blockRange(c, cfg)
	if err != nil {
		return err
	}
	// Whatever the previous run left acknowledged but not flushed may
	// have been lost (a crash): only the durable versions are known.
	s.mu.Lock()
	copy(s.acked, s.durable)
	s.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &loadRun{s: s, c: c, cfg: cfg, lo: lo, hi: hi, cancel: cancel}
	var wg sync.WaitGroup
	for w := 0; w < cfg.Workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r.worker(ctx, w)
		}(w)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.flusher(ctx)
	}()
	wg.Wait()
	return r.err
}

// withDefaults fills in the defaults of the fields left zero.
func (cfg Config) withDefaults() Config {
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.MaxBlocks <= 0 {
		cfg.MaxBlocks = 8
	}
	if cfg.FlushEvery <= 0 {
		cfg.FlushEvery = 20 * time.Millisecond
	}
	return cfg
}

// blockRange is the range [lo, hi) of blocks a run uses, checked against
// the device's size.
func (s *State) blockRange(c *Client, cfg Config) (lo, hi uint64, err error) {
	if uint64(c.Size()/BlockSize) < s.n {
		return 0, 0, fmt.Errorf("crashload: device has %d blocks, state %d", c.Size()/BlockSize, s.n)
	}
	lo, hi = cfg.First, cfg.Last
	if hi == 0 || hi > s.n {
		hi = s.n
	}
	if lo >= hi {
		return 0, 0, fmt.Errorf("crashload: empty block range [%d, %d)", cfg.First, cfg.Last)
	}
	return lo, hi, nil
}

// loadRun is one Run: its workers and flusher share it.
type loadRun struct {
	s      *State
	c      *Client
	cfg    Config
	lo, hi uint64 // the blocks used
	cancel context.CancelFunc

	errMu sync.Mutex
	err   error // the first failure
}

// fail records the run's first failure and ends the run.
func (r *loadRun) fail(err error) {
	r.errMu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.errMu.Unlock()
	r.cancel()
}

// end says whether err ends the run: a closed connection ends it
// quietly, a server error reply is a failure.
func (r *loadRun) end(err error) bool {
	if err == nil {
		return false
	}
	var re *ReplyError
	if errors.As(err, &re) {
		r.fail(err)
	} else {
		r.cancel()
	}
	return true
}

// worker issues random writes and checked reads until the run ends.
func (r *loadRun) worker(ctx context.Context, w int) {
	rng := rand.New(rand.NewPCG(r.cfg.Seed, uint64(w)+1))
	buf := make([]byte, r.cfg.MaxBlocks*BlockSize)
	for ctx.Err() == nil {
		if !r.request(rng, buf) {
			return
		}
	}
}

// request issues one write of a new version, or one read checked against
// what was acknowledged, on random blocks (none if they are busy); false
// ends the worker.
func (r *loadRun) request(rng *rand.Rand, buf []byte) bool {
	s := r.s
	k := uint64(1 + rng.IntN(r.cfg.MaxBlocks))
	if k > r.hi-r.lo {
		k = r.hi - r.lo
	}
	b := r.lo + rng.Uint64N(r.hi-r.lo-k+1)
	read := rng.IntN(100) < r.cfg.ReadPercent
	seq, oldest, newest, ok := s.begin(b, k, read)
	if !ok {
		return true
	}
	p := buf[:k*BlockSize]
	var err error
	if read {
		err = r.c.ReadAt(p, int64(b*BlockSize))
	} else {
		for i := uint64(0); i < k; i++ {
			fillBlock(p[i*BlockSize:], b+i, seq)
		}
		err = r.c.WriteAt(p, int64(b*BlockSize))
	}
	s.complete(b, k, read, seq, err)
	if r.end(err) {
		return false
	}
	if read {
		for i := uint64(0); i < k; i++ {
			if msg := check(p[i*BlockSize:], b+i, oldest[i], newest[i], "acknowledged"); msg != "" {
				r.fail(fmt.Errorf("crashload: read during the run: block %d: %s", b+i, msg))
				return false
			}
		}
	}
	return true
}

// begin claims blocks [b, b+k) for a request (ok false: one is busy).
// A read gets the versions each block may hold (oldest: acknowledged,
// newest: issued); a write gets a new sequence number, recorded as
// issued.
func (s *State) begin(b, k uint64, read bool) (seq uint64, oldest, newest []uint64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.claim(b, k) {
		return 0, nil, nil, false
	}
	if read {
		oldest = append(oldest, s.acked[b:b+k]...)
		newest = append(newest, s.issued[b:b+k]...)
		return 0, oldest, newest, true
	}
	s.seq++
	seq = s.seq
	for i := b; i < b+k; i++ {
		s.issued[i] = seq
	}
	s.Writes++
	return seq, nil, nil, true
}

// complete releases blocks [b, b+k) after a request and records its
// success: a write's version is acknowledged.
func (s *State) complete(b, k uint64, read bool, seq uint64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := b; i < b+k; i++ {
		s.busy[i] = false
		if err == nil && !read {
			s.acked[i] = seq
		}
	}
	if err == nil && !read {
		s.Acked++
	}
	if err == nil && read {
		s.Reads++
	}
}

// flusher flushes every FlushEvery until the run ends; after a flush the
// versions acknowledged before it are durable.
func (r *loadRun) flusher(ctx context.Context) {
	s := r.s
	t := time.NewTicker(r.cfg.FlushEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		snap := append([]uint64(nil), s.acked...)
		s.mu.Unlock()
		if r.end(r.c.Flush()) {
			return
		}
		s.mu.Lock()
		for i, v := range snap {
			s.durable[i] = max(s.durable[i], v)
		}
		s.Flushes++
		s.mu.Unlock()
	}
}

// check says what is wrong with block b holding p, given that it must hold
// a version in [lo, hi] (0: zeroes allowed); what says what made lo the
// oldest allowed version.
func check(p []byte, b, lo, hi uint64, what string) string {
	kind, seq, why := parseBlock(p, b)
	switch {
	case kind == kindBad:
		return why
	case kind == kindZero && lo != 0:
		return fmt.Sprintf("reads as zeroes, but version %d was %s", lo, what)
	case kind == kindVersion && seq < lo:
		return fmt.Sprintf("holds version %d, older than version %d %s", seq, lo, what)
	case kind == kindVersion && seq > hi:
		return fmt.Sprintf("holds version %d, never written to it (last written %d)", seq, hi)
	}
	return ""
}

// Report is the result of Verify.
type Report struct {
	Blocks  uint64   // blocks read
	Durable uint64   // blocks with a durable version
	Newer   uint64   // blocks holding a version newer than the durable one
	Zero    uint64   // blocks reading as zeroes
	Errors  []string // one line per bad block (at most 20, then a count)
	Bad     uint64   // bad blocks in all
	seen    []uint64 // version found per block
}

// OK reports whether no block was bad.
func (r *Report) OK() bool { return r.Bad == 0 }

func (r *Report) String() string {
	s := fmt.Sprintf("%d blocks, %d durable, %d newer than durable, %d zero, %d bad", r.Blocks, r.Durable, r.Newer, r.Zero, r.Bad)
	for _, e := range r.Errors {
		s += "\n  " + e
	}
	return s
}

// Verify reads every block through c and checks it against the record: a
// block holds zeroes only if no version of it was flushed, never a
// version older than the newest one acknowledged before a completed
// flush, never one that was not written, never a torn one. No workload
// may run meanwhile.
func (s *State) Verify(c *Client) (*Report, error) {
	return s.verify(func(p []byte, off int64) error { return c.ReadAt(p, off) })
}

// VerifyImage is Verify on a copy of the device (e.g. what the kernel
// read from the array), read through r.
func (s *State) VerifyImage(r io.ReaderAt) (*Report, error) {
	return s.verify(func(p []byte, off int64) error {
		_, err := r.ReadAt(p, off)
		return err
	})
}

func (s *State) verify(read func(p []byte, off int64) error) (*Report, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &Report{seen: make([]uint64, s.n)}
	const chunk = 64
	buf := make([]byte, chunk*BlockSize)
	for b := uint64(0); b < s.n; b += chunk {
		k := min(chunk, s.n-b)
		p := buf[:k*BlockSize]
		if err := read(p, int64(b*BlockSize)); err != nil {
			return nil, fmt.Errorf("crashload: verify: read of blocks %d..%d: %w", b, b+k-1, err)
		}
		for i := uint64(0); i < k; i++ {
			blk := b + i
			q := p[i*BlockSize : (i+1)*BlockSize]
			r.Blocks++
			if s.durable[blk] != 0 {
				r.Durable++
			}
			if msg := check(q, blk, s.durable[blk], s.issued[blk], "acknowledged before a completed flush"); msg != "" {
				r.Bad++
				if len(r.Errors) < 20 {
					r.Errors = append(r.Errors, fmt.Sprintf("block %d: %s", blk, msg))
				}
				continue
			}
			kind, seq, _ := parseBlock(q, blk)
			switch kind {
			case kindZero:
				r.Zero++
			case kindVersion:
				r.seen[blk] = seq
				if s.durable[blk] != 0 && seq > s.durable[blk] {
					r.Newer++
				}
			}
		}
	}
	if r.Bad > uint64(len(r.Errors)) {
		r.Errors = append(r.Errors, fmt.Sprintf("... %d bad blocks in all", r.Bad))
	}
	return r, nil
}

// Settle takes what a successful Verify read as the device's content:
// after a completed flush through c, those versions are durable, and
// acknowledged (a later checked read must not find older ones).
func (s *State) Settle(c *Client, r *Report) error {
	if !r.OK() {
		return errors.New("crashload: settle after a failed verify")
	}
	if err := c.Flush(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, v := range r.seen {
		s.durable[i] = max(s.durable[i], v)
		s.acked[i] = v
		s.issued[i] = max(s.issued[i], v)
	}
	return nil
}
