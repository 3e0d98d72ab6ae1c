package engine

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// FaultOp names the operations a FaultDevice can fail.
type FaultOp uint8

// Operations, usable as a bit set in FaultRule.Ops.
const (
	OpRead FaultOp = 1 << iota
	OpWrite
	OpFlush
	OpDiscard
	OpAll = OpRead | OpWrite | OpFlush | OpDiscard
)

// FaultRule is one scripted failure. An operation matches when its kind is
// in Ops and its byte range overlaps [Off, Off+Len) (Len 0: any range).
// The first Skip matching operations pass; then each match fails with
// probability Rate (0 means always) until Count failures were injected
// (Count 0: no limit).
type FaultRule struct {
	Ops   FaultOp
	Off   int64
	Len   int64
	Skip  int64
	Count int64
	Rate  float64
	// Err is the error returned; nil means ErrInjected.
	Err error
	// HealOnWrite removes the rule once a write touches its range, like a
	// bad block remapped by the drive on write (dm-dust).
	HealOnWrite bool
	// DropWrite makes a failing write silently succeed without writing
	// (a lost write), instead of returning Err.
	DropWrite bool

	seen, fired int64
}

// FaultDevice wraps a device and injects errors: per-operation error
// rates, scripted rules, or a dead device. Counters of operations are kept
// for tests.
type FaultDevice struct {
	Device
	mu    sync.Mutex
	rules []*FaultRule
	rng   *rand.Rand
	dead  atomic.Bool

	Reads, Writes, Flushes, Discards atomic.Int64
	Injected                         atomic.Int64
}

// NewFaultDevice wraps d. seed makes the random rates reproducible.
func NewFaultDevice(d Device, seed uint64) *FaultDevice {
	return &FaultDevice{Device: d, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// AddRule adds a scripted failure.
func (f *FaultDevice) AddRule(r FaultRule) {
	f.mu.Lock()
	rr := r
	f.rules = append(f.rules, &rr)
	f.mu.Unlock()
}

// ClearRules removes every rule.
func (f *FaultDevice) ClearRules() {
	f.mu.Lock()
	f.rules = nil
	f.mu.Unlock()
}

// Kill makes every further operation fail (a pulled drive); Revive undoes it.
func (f *FaultDevice) Kill()   { f.dead.Store(true) }
func (f *FaultDevice) Revive() { f.dead.Store(false) }

// check decides whether op on [off, off+n) fails. drop reports a write to
// be dropped silently.
func (f *FaultDevice) check(op FaultOp, off, n int64) (err error, drop bool) {
	if f.dead.Load() {
		f.Injected.Add(1)
		return ErrInjected, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := 0; i < len(f.rules); i++ {
		r := f.rules[i]
		if r.Len != 0 && (off+n <= r.Off || off >= r.Off+r.Len) {
			continue
		}
		if op == OpWrite && r.HealOnWrite {
			f.rules = append(f.rules[:i], f.rules[i+1:]...)
			i--
			continue
		}
		if r.Ops&op == 0 {
			continue
		}
		r.seen++
		if r.seen <= r.Skip {
			continue
		}
		if r.Count != 0 && r.fired >= r.Count {
			continue
		}
		if r.Rate != 0 && f.rng.Float64() >= r.Rate {
			continue
		}
		r.fired++
		f.Injected.Add(1)
		if op == OpWrite && r.DropWrite {
			return nil, true
		}
		if r.Err != nil {
			return r.Err, false
		}
		return ErrInjected, false
	}
	return nil, false
}

// ReadAt reads unless a rule fails it.
func (f *FaultDevice) ReadAt(p []byte, off int64) (int, error) {
	f.Reads.Add(1)
	if err, _ := f.check(OpRead, off, int64(len(p))); err != nil {
		return 0, err
	}
	return f.Device.ReadAt(p, off)
}

// WriteAt writes unless a rule fails or drops it.
func (f *FaultDevice) WriteAt(p []byte, off int64) (int, error) {
	f.Writes.Add(1)
	err, drop := f.check(OpWrite, off, int64(len(p)))
	if err != nil {
		return 0, err
	}
	if drop {
		return len(p), nil
	}
	return f.Device.WriteAt(p, off)
}

// WriteAtFUA is WriteAt followed by Flush, with the same fault rules.
func (f *FaultDevice) WriteAtFUA(p []byte, off int64) (int, error) {
	n, err := f.WriteAt(p, off)
	if err != nil {
		return n, err
	}
	return n, f.Flush()
}

// WriteZeroes zeroes unless a write rule fails it.
func (f *FaultDevice) WriteZeroes(off, n int64) error {
	f.Writes.Add(1)
	err, drop := f.check(OpWrite, off, n)
	if err != nil || drop {
		return err
	}
	return writeZeroes(f.Device, off, n)
}

// Flush flushes unless a rule fails it.
func (f *FaultDevice) Flush() error {
	f.Flushes.Add(1)
	if err, _ := f.check(OpFlush, 0, 0); err != nil {
		return err
	}
	return f.Device.Flush()
}

// Discard discards unless a rule fails it.
func (f *FaultDevice) Discard(off, n int64) error {
	f.Discards.Add(1)
	if err, _ := f.check(OpDiscard, off, n); err != nil {
		return err
	}
	return f.Device.Discard(off, n)
}

// CountingDevice counts the operations and bytes that reach a device.
type CountingDevice struct {
	Device
	Reads, Writes, ReadBytes, WriteBytes, Flushes atomic.Int64
}

// ReadAt counts and reads.
func (c *CountingDevice) ReadAt(p []byte, off int64) (int, error) {
	c.Reads.Add(1)
	c.ReadBytes.Add(int64(len(p)))
	return c.Device.ReadAt(p, off)
}

// WriteAt counts and writes.
func (c *CountingDevice) WriteAt(p []byte, off int64) (int, error) {
	c.Writes.Add(1)
	c.WriteBytes.Add(int64(len(p)))
	return c.Device.WriteAt(p, off)
}

// Flush counts and flushes.
func (c *CountingDevice) Flush() error {
	c.Flushes.Add(1)
	return c.Device.Flush()
}

// Reset zeroes the counters.
func (c *CountingDevice) Reset() {
	c.Reads.Store(0)
	c.Writes.Store(0)
	c.ReadBytes.Store(0)
	c.WriteBytes.Store(0)
	c.Flushes.Store(0)
}
