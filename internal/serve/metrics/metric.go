package metrics

import (
	"math"
	"sync/atomic"
	"time"
)

// counter is a monotonically increasing integer; updates are single atomic
// adds.
type counter struct {
	v atomic.Uint64
}

func (c *counter) Inc()          { c.v.Add(1) }
func (c *counter) Add(n uint64)  { c.v.Add(n) }
func (c *counter) Value() uint64 { return c.v.Load() }

// gauge is a float64 that can go up and down.
type gauge struct {
	bits atomic.Uint64
}

func (g *gauge) Set(v float64)  { g.bits.Store(math.Float64bits(v)) }
func (g *gauge) SetInt(v int64) { g.Set(float64(v)) }
func (g *gauge) Value() float64 { return math.Float64frombits(g.bits.Load()) }
func addFloat(bits *atomic.Uint64, d float64) {
	for {
		old := bits.Load()
		if bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

// histogram counts observations into buckets with fixed upper bounds. An
// observation is a bucket search plus two atomic updates; it never
// allocates.
type histogram struct {
	upper  []float64       // ascending, without +Inf
	counts []atomic.Uint64 // per bucket (not cumulative); the last one is +Inf
	sum    atomic.Uint64   // float64 bits
}

func newHistogram(upper []float64) *histogram {
	return &histogram{upper: upper, counts: make([]atomic.Uint64, len(upper)+1)}
}

// Observe records v.
func (h *histogram) Observe(v float64) {
	// First bound >= v (Prometheus buckets are "le"). NaN lands in +Inf.
	lo, hi := 0, len(h.upper)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if h.upper[m] < v {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if v != v {
		lo = len(h.upper)
	}
	h.counts[lo].Add(1)
	addFloat(&h.sum, v)
}

// ObserveDuration records d in seconds.
func (h *histogram) ObserveDuration(d time.Duration) { h.Observe(d.Seconds()) }

// Snapshot returns the cumulative bucket counts (one per upper bound, then
// +Inf), the observation count (equal to the +Inf bucket) and the sum.
func (h *histogram) Snapshot() (cumulative []uint64, count uint64, sum float64) {
	cumulative = make([]uint64, len(h.counts))
	for i := range h.counts {
		count += h.counts[i].Load()
		cumulative[i] = count
	}
	return cumulative, count, math.Float64frombits(h.sum.Load())
}

// ExponentialBuckets returns n bounds start, start*factor, start*factor², ….
func ExponentialBuckets(start, factor float64, n int) []float64 {
	if n < 1 || start <= 0 || factor <= 1 {
		panic("metrics: ExponentialBuckets needs n >= 1, start > 0, factor > 1")
	}
	b := make([]float64, n)
	for i := range b {
		b[i] = start
		start *= factor
	}
	return b
}

// stateSet is an enumeration exposed as one gauge per state, 1 for the
// current state and 0 for the others. Set is one atomic store, so a scrape
// always sees exactly one state (or none).
type stateSet struct {
	states []string
	cur    atomic.Int32 // index+1; 0 = none
}

// Set selects the state; it reports false (and selects none) if state is
// not one of the set's states.
func (s *stateSet) Set(state string) bool {
	for i, v := range s.states {
		if v == state {
			s.cur.Store(int32(i + 1))
			return true
		}
	}
	s.cur.Store(0)
	return false
}

// Get returns the current state, "" if none.
func (s *stateSet) Get() string {
	if i := s.cur.Load(); i > 0 {
		return s.states[i-1]
	}
	return ""
}
