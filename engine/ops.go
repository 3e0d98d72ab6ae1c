package engine

import (
	"sync"
	"sync/atomic"
	"time"
)

// personality is the level-specific I/O path. Sectors are array sectors;
// p is the caller's buffer for exactly the piece.
type personality interface {
	read(p []byte, sector uint64) error
	write(p []byte, sector uint64, full, fua bool) error
	zero(sector, count uint64, full, discard bool) error
}

// memOp is one member I/O: bufs are consecutive on the device from off.
type memOp struct {
	m     *member
	write bool
	fua   bool
	off   int64 // device byte offset (data offset included)
	bufs  [][]byte
	one   [1][]byte // backing for single-buffer ops
	err   error
	// tag lets the caller find what the op was for.
	tag  int
	a    *Array
	done *sync.WaitGroup
}

func (op *memOp) bytes() int {
	n := 0
	for _, b := range op.bufs {
		n += len(b)
	}
	return n
}

// setBuf makes op a single-buffer op without allocating.
func (op *memOp) setBuf(b []byte) {
	op.one[0] = b
	op.bufs = op.one[:]
}

// opList is a pooled slice of ops.
type opList struct {
	ops []memOp
}

var opListPool = sync.Pool{New: func() any { return &opList{ops: make([]memOp, 0, 16)} }}

func getOps() *opList { l := opListPool.Get().(*opList); l.ops = l.ops[:0]; return l }

func putOps(l *opList) {
	for i := range l.ops {
		l.ops[i] = memOp{}
	}
	l.ops = l.ops[:0]
	opListPool.Put(l)
}

// add appends an op and returns it.
func (l *opList) add(m *member, write bool, off int64, b []byte, tag int) *memOp {
	l.ops = append(l.ops, memOp{m: m, write: write, off: off, tag: tag})
	op := &l.ops[len(l.ops)-1]
	op.setBuf(b)
	return op
}

// parallelThreshold: requests on memory devices smaller than this run on
// the calling goroutine; fanning out costs more than it saves.
const parallelThreshold = 256 << 10

// run executes ops, in parallel when it pays off, and records errors in
// the ops.
func (a *Array) run(ops []memOp) {
	switch len(ops) {
	case 0:
		return
	case 1:
		a.exec(&ops[0])
		return
	}
	if !a.parallel(ops) {
		for i := range ops {
			a.exec(&ops[i])
		}
		return
	}
	fo := fanoutPool.Get().(*fanout)
	fo.wg.Add(len(ops) - 1)
	for i := 1; i < len(ops); i++ {
		ops[i].a, ops[i].done = a, &fo.wg
		executors[uint64(ops[i].off>>16+int64(i))%execShards].submit(&ops[i])
	}
	a.exec(&ops[0])
	fo.wg.Wait()
	fanoutPool.Put(fo)
}

type fanout struct{ wg sync.WaitGroup }

// parallel says whether ops are worth fanning out to workers: there are
// several, and they are not all small requests on memory devices.
func (a *Array) parallel(ops []memOp) bool {
	if len(ops) < 2 {
		return false
	}
	total := 0
	for i := range ops {
		if !ops[i].m.memory {
			return true
		}
		total += ops[i].bytes()
	}
	return total >= parallelThreshold
}

// runWhile runs ops[:ready] on workers at once and fill on the calling
// goroutine meanwhile; when fill returns, it runs ops[ready:], whose
// buffers fill produced, and waits for all. Full-stripe writes send the
// caller's data to the members this way while they compute the parity.
func (a *Array) runWhile(ops []memOp, ready int, fill func()) {
	if ready == 0 || !a.parallel(ops) {
		fill()
		a.run(ops)
		return
	}
	fo := fanoutPool.Get().(*fanout)
	fo.wg.Add(len(ops) - 1)
	for i := 0; i < len(ops); i++ {
		if i == ready {
			fill()
		}
		if i == len(ops)-1 {
			break
		}
		ops[i].a, ops[i].done = a, &fo.wg
		executors[uint64(ops[i].off>>16+int64(i))%execShards].submit(&ops[i])
	}
	if ready == len(ops) {
		fill()
	}
	a.exec(&ops[len(ops)-1])
	fo.wg.Wait()
	fanoutPool.Put(fo)
}

var fanoutPool = sync.Pool{New: func() any { return new(fanout) }}

// execPool runs member ops on worker goroutines that outlive requests, so
// that fanning a request out to its members allocates nothing. A worker
// is started whenever none is idle (so there is never a queue and never a
// deadlock); idle workers exit after a while. There are several pools,
// picked by the op's offset, so that concurrent requests do not all go
// through one channel lock.
type execPool struct {
	ch chan *memOp
	_  [56]byte
}

const execShards = 16

var executors = func() (e [execShards]execPool) {
	for i := range e {
		e[i].ch = make(chan *memOp)
	}
	return e
}()

const workerIdle = 10 * time.Second

func (p *execPool) submit(op *memOp) {
	select {
	case p.ch <- op:
	default:
		go p.worker(op)
	}
}

func (p *execPool) worker(op *memOp) {
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		op.a.exec(op)
		op.done.Done()
		t.Reset(workerIdle)
		select {
		case op = <-p.ch:
		case <-t.C:
			return
		}
	}
}

func (a *Array) exec(op *memOp) {
	d := op.m.dev
	if op.write && op.fua && len(op.bufs) == 1 {
		if f, ok := d.(FUAWriter); ok {
			_, op.err = f.WriteAtFUA(op.bufs[0], op.off)
			a.stats.memberWrites.add(uint64(op.off>>16), 1)
			return
		}
	}
	off := op.off
	for _, b := range op.bufs {
		var err error
		if op.write {
			_, err = d.WriteAt(b, off)
			a.stats.memberWrites.add(uint64(off>>16), 1)
		} else {
			_, err = d.ReadAt(b, off)
			a.stats.memberReads.add(uint64(off>>16), 1)
		}
		if err != nil {
			op.err = err
			if !op.write {
				// A read past the member's end fails the member before
				// the caller handles the error (write errors fail it
				// there anyway).
				a.ioFailed(op.m, err)
			}
			return
		}
		off += int64(len(b))
	}
	if op.write && op.fua {
		op.err = d.Flush()
	}
}

// engineStats are counters kept without a shared cache line per request:
// each counter is sharded.
type engineStats struct {
	memberReads    shardedCounter
	memberWrites   shardedCounter
	fullStripe     shardedCounter
	rmw            shardedCounter
	rcw            shardedCounter
	reconstructW   shardedCounter
	degradedReads  shardedCounter
	correctedReads shardedCounter
	readErrors     shardedCounter
	writeErrors    shardedCounter
	readsForWrite  shardedCounter // member reads issued by the write path
}

// Stats are engine counters since Open.
type Stats struct {
	MemberReads, MemberWrites uint64
	// FullStripeWrites counts stripes written without reading (parity
	// from the new data alone).
	FullStripeWrites uint64
	// RMW and RCW count partial-stripe writes by strategy;
	// ReconstructWrites those that had to rebuild a missing block first.
	RMW, RCW, ReconstructWrites uint64
	// ReadsForWrite counts member reads issued by writes.
	ReadsForWrite  uint64
	DegradedReads  uint64
	CorrectedReads uint64
	ReadErrors     uint64
	WriteErrors    uint64
}

// Stats returns the engine counters.
func (a *Array) Stats() Stats {
	s := &a.stats
	return Stats{
		MemberReads: s.memberReads.load(), MemberWrites: s.memberWrites.load(),
		FullStripeWrites: s.fullStripe.load(), RMW: s.rmw.load(), RCW: s.rcw.load(),
		ReconstructWrites: s.reconstructW.load(), ReadsForWrite: s.readsForWrite.load(),
		DegradedReads: s.degradedReads.load(), CorrectedReads: s.correctedReads.load(),
		ReadErrors: s.readErrors.load(), WriteErrors: s.writeErrors.load(),
	}
}

const counterShards = 16

type paddedCounter struct {
	v atomic.Uint64
	_ [56]byte
}

// shardedCounter spreads increments over cache lines.
type shardedCounter struct {
	c [counterShards]paddedCounter
}

// add counts n under a key (a sector or stripe number): requests on
// different stripes use different shards.
func (c *shardedCounter) add(key, n uint64) {
	c.c[(key*0x9e3779b97f4a7c15)>>60%counterShards].v.Add(n)
}

func (c *shardedCounter) load() uint64 {
	var s uint64
	for i := range c.c {
		s += c.c[i].v.Load()
	}
	return s
}

// retryPages re-reads a failed member read 4 KiB at a time, as md handles
// read errors per page, and calls fix for every page that still fails.
// The op must map a contiguous array range starting at sector.
func retryPages(op *memOp, sector uint64, fix func(b []byte, s uint64, err error) error) error {
	b := op.bufs[0]
	for pos := 0; pos < len(b); {
		// pages aligned to 4 KiB on the device
		e := min(pos+4096-int((op.off+int64(pos))%4096), len(b))
		if _, err := op.m.dev.ReadAt(b[pos:e], op.off+int64(pos)); err != nil {
			if ferr := fix(b[pos:e], sector+uint64(pos>>9), err); ferr != nil {
				return ferr
			}
		}
		pos = e
	}
	return nil
}
