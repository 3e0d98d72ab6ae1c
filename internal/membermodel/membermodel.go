// Package membermodel is an in-memory member device with a simple
// performance model, for benchmarks that compare I/O patterns rather than
// measure a real device.
//
// The device has a logical block size (the smallest addressable write, 512
// bytes by default) and an atomic unit (the size it really programs, 4 KiB
// by default, like the indirection unit of most NVMe SSDs). A write that
// does not cover whole, aligned atomic units is a read-modify-write: the
// device reads the partially covered units, merges, and writes whole units.
//
// Cost model (device busy time, summed per member):
//
//	read  = ReadLatency  + bytes(units touched)/Bandwidth
//	write = WriteLatency + bytes(units touched)/Bandwidth
//	        + for a read-modify-write: ReadLatency + bytes(partial units)/Bandwidth
//	sync  = FlushLatency
//
// Members are independent, so a workload spread over several members takes
// the largest member busy time, which is what IOPS figures are derived from.
package membermodel

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Config describes a modelled member.
type Config struct {
	Size         int64         // bytes
	LogicalBlock int64         // bytes; 0 means 512
	AtomicUnit   int64         // bytes; 0 means 4096
	ReadLatency  time.Duration // per device read operation
	WriteLatency time.Duration // per device write operation
	FlushLatency time.Duration // per Sync (0: power-loss-protected cache)
	Bandwidth    float64       // bytes per second; 0 means unlimited
	KeepData     bool          // store written data (sparse); else reads return zeros
}

// NVMe returns a datacenter-NVMe-like configuration: 512-byte logical
// blocks, a 4 KiB atomic unit, 80 µs reads, 15 µs writes, no flush cost
// (power-loss protection), 3 GB/s.
func NVMe(size int64) Config {
	return Config{Size: size, LogicalBlock: 512, AtomicUnit: 4096,
		ReadLatency: 80 * time.Microsecond, WriteLatency: 15 * time.Microsecond, Bandwidth: 3e9}
}

// Errors.
var (
	ErrAlignment = errors.New("membermodel: I/O not aligned to the logical block size")
	ErrRange     = errors.New("membermodel: I/O beyond the end of the device")
	ErrConfig    = errors.New("membermodel: bad configuration")
)

// Cost is the modelled cost of one request.
type Cost struct {
	Time          time.Duration
	RMW           bool  // the write needed a read-modify-write
	DevReads      int   // device read operations
	DevWrites     int   // device write operations
	DevReadBytes  int64 // bytes the device read
	DevWriteBytes int64 // bytes the device programmed
}

func (c Config) norm() Config {
	if c.LogicalBlock == 0 {
		c.LogicalBlock = 512
	}
	if c.AtomicUnit == 0 {
		c.AtomicUnit = 4096
	}
	return c
}

func (c Config) xfer(n int64) time.Duration {
	if c.Bandwidth <= 0 {
		return 0
	}
	return time.Duration(float64(n) / c.Bandwidth * float64(time.Second))
}

// span returns the atomic units covering [off, off+n).
func (c Config) span(off, n int64) (start, end int64) {
	u := c.AtomicUnit
	return off / u * u, (off + n + u - 1) / u * u
}

// WriteCost returns the cost of writing n bytes at off (no checks).
func (c Config) WriteCost(off, n int64) Cost {
	c = c.norm()
	s, e := c.span(off, n)
	cost := Cost{DevWrites: 1, DevWriteBytes: e - s}
	cost.Time = c.WriteLatency + c.xfer(e-s)
	if s != off || e != off+n {
		u := c.AtomicUnit
		partial := int64(0)
		if off%u != 0 {
			partial++
		}
		if (off+n)%u != 0 && (e-s > u || off%u == 0) {
			partial++ // the tail unit, unless it is the head unit
		}
		cost.RMW = true
		cost.DevReads = 1
		cost.DevReadBytes = partial * u
		cost.Time += c.ReadLatency + c.xfer(partial*u)
	}
	return cost
}

// ReadCost returns the cost of reading n bytes at off (no checks).
func (c Config) ReadCost(off, n int64) Cost {
	c = c.norm()
	s, e := c.span(off, n)
	return Cost{Time: c.ReadLatency + c.xfer(e-s), DevReads: 1, DevReadBytes: e - s}
}

// Stats are a member's counters.
type Stats struct {
	Reads, Writes, Syncs    uint64 // host requests
	BytesRead, BytesWritten uint64 // host bytes
	RMW                     uint64 // writes that needed a read-modify-write
	DevReads, DevWrites     uint64 // device operations
	DevBytesRead            uint64
	DevBytesWritten         uint64
	Busy                    time.Duration // modelled busy time
}

// Member is a modelled device. It is safe for concurrent use.
type Member struct {
	cfg  Config
	mu   sync.Mutex
	st   Stats
	data map[int64][]byte // atomic unit index -> contents (KeepData)
}

// New returns an empty member.
func New(cfg Config) (*Member, error) {
	cfg = cfg.norm()
	p2 := func(x int64) bool { return x > 0 && x&(x-1) == 0 }
	if !p2(cfg.LogicalBlock) || !p2(cfg.AtomicUnit) || cfg.AtomicUnit < cfg.LogicalBlock || cfg.Size <= 0 ||
		cfg.Size%cfg.LogicalBlock != 0 {
		return nil, fmt.Errorf("%w: %+v", ErrConfig, cfg)
	}
	m := &Member{cfg: cfg}
	if cfg.KeepData {
		m.data = make(map[int64][]byte)
	}
	return m, nil
}

// Config returns the member's configuration (defaults filled in).
func (m *Member) Config() Config { return m.cfg }

// Size returns the device size in bytes.
func (m *Member) Size() int64 { return m.cfg.Size }

func (m *Member) check(off int64, n int) error {
	lbs := m.cfg.LogicalBlock
	if off < 0 || off%lbs != 0 || int64(n)%lbs != 0 {
		return fmt.Errorf("%w: %d bytes at %d (logical block %d)", ErrAlignment, n, off, lbs)
	}
	if off+int64(n) > m.cfg.Size {
		return fmt.Errorf("%w: %d bytes at %d, size %d", ErrRange, n, off, m.cfg.Size)
	}
	return nil
}

// WriteAt writes p at off (both multiples of the logical block size) and
// charges its modelled cost.
func (m *Member) WriteAt(p []byte, off int64) (int, error) {
	if err := m.check(off, len(p)); err != nil {
		return 0, err
	}
	c := m.cfg.WriteCost(off, int64(len(p)))
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st.Writes++
	m.st.BytesWritten += uint64(len(p))
	m.charge(c)
	if m.data != nil {
		u := m.cfg.AtomicUnit
		for done := 0; done < len(p); {
			pos := off + int64(done)
			idx, in := pos/u, pos%u
			blk := m.data[idx]
			if blk == nil {
				blk = make([]byte, u)
				m.data[idx] = blk
			}
			done += copy(blk[in:], p[done:])
		}
	}
	return len(p), nil
}

// ReadAt reads len(p) bytes at off and charges the modelled cost.
func (m *Member) ReadAt(p []byte, off int64) (int, error) {
	if err := m.check(off, len(p)); err != nil {
		return 0, err
	}
	c := m.cfg.ReadCost(off, int64(len(p)))
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st.Reads++
	m.st.BytesRead += uint64(len(p))
	m.charge(c)
	u := m.cfg.AtomicUnit
	for done := 0; done < len(p); {
		pos := off + int64(done)
		idx, in := pos/u, pos%u
		var n int
		if blk := m.data[idx]; blk != nil {
			n = copy(p[done:], blk[in:])
		} else {
			n = min(len(p)-done, int(u-in))
			clear(p[done : done+n])
		}
		done += n
	}
	return len(p), nil
}

// Sync models a cache flush.
func (m *Member) Sync() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st.Syncs++
	m.st.Busy += m.cfg.FlushLatency
	return nil
}

func (m *Member) charge(c Cost) {
	if c.RMW {
		m.st.RMW++
	}
	m.st.DevReads += uint64(c.DevReads)
	m.st.DevWrites += uint64(c.DevWrites)
	m.st.DevBytesRead += uint64(c.DevReadBytes)
	m.st.DevBytesWritten += uint64(c.DevWriteBytes)
	m.st.Busy += c.Time
}

// Stats returns the counters.
func (m *Member) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st
}

// ResetStats zeroes the counters (the data stays).
func (m *Member) ResetStats() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st = Stats{}
}
