package metrics

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Counter is a monotonically increasing integer. The zero value is ready to
// use; updates are single atomic adds.
type Counter struct {
	v atomic.Uint64
}

// Inc adds one.
func (c *Counter) Inc() { c.v.Add(1) }

// Add adds n.
func (c *Counter) Add(n uint64) { c.v.Add(n) }

// Value returns the current count.
func (c *Counter) Value() uint64 { return c.v.Load() }

// Gauge is a float64 that can go up and down. The zero value is ready to use.
type Gauge struct {
	bits atomic.Uint64
}

// Set stores v.
func (g *Gauge) Set(v float64) { g.bits.Store(math.Float64bits(v)) }

// SetInt stores an integer value.
func (g *Gauge) SetInt(v int64) { g.Set(float64(v)) }

// Add adds d (which may be negative).
func (g *Gauge) Add(d float64) { addFloat(&g.bits, d) }

// Value returns the current value.
func (g *Gauge) Value() float64 { return math.Float64frombits(g.bits.Load()) }

func addFloat(bits *atomic.Uint64, d float64) {
	for {
		old := bits.Load()
		if bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

// Histogram counts observations into buckets with fixed upper bounds. An
// observation is a bucket search plus two atomic updates; it never allocates.
type Histogram struct {
	upper  []float64       // ascending, without +Inf
	counts []atomic.Uint64 // per bucket (not cumulative); the last one is +Inf
	sum    atomic.Uint64   // float64 bits
}

func newHistogram(upper []float64) *Histogram {
	return &Histogram{upper: upper, counts: make([]atomic.Uint64, len(upper)+1)}
}

// Observe records v.
func (h *Histogram) Observe(v float64) {
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
func (h *Histogram) ObserveDuration(d time.Duration) { h.Observe(d.Seconds()) }

// Snapshot returns the cumulative bucket counts (one per upper bound, then
// +Inf), the observation count (equal to the +Inf bucket) and the sum.
func (h *Histogram) Snapshot() (cumulative []uint64, count uint64, sum float64) {
	cumulative = make([]uint64, len(h.counts))
	for i := range h.counts {
		count += h.counts[i].Load()
		cumulative[i] = count
	}
	return cumulative, count, math.Float64frombits(h.sum.Load())
}

// UpperBounds returns the finite bucket bounds.
func (h *Histogram) UpperBounds() []float64 { return append([]float64(nil), h.upper...) }

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

// checkBuckets validates and copies histogram bounds.
func checkBuckets(b []float64) []float64 {
	if len(b) == 0 {
		panic("metrics: histogram without buckets")
	}
	out := make([]float64, 0, len(b))
	for i, v := range b {
		if math.IsNaN(v) || (i > 0 && v <= b[i-1]) {
			panic("metrics: histogram bounds must be strictly ascending")
		}
		if math.IsInf(v, 1) {
			if i != len(b)-1 {
				panic("metrics: +Inf must be the last histogram bound")
			}
			break // implicit
		}
		out = append(out, v)
	}
	return out
}

// StateSet is an enumeration exposed as one gauge per state, 1 for the
// current state and 0 for the others. Set is one atomic store, so a scrape
// always sees exactly one state (or none before the first Set).
type StateSet struct {
	states []string
	cur    atomic.Int32 // index+1; 0 = none
}

// Set selects the state; it reports false (and selects none) if s is not one
// of the states the set was created with.
func (s *StateSet) Set(state string) bool {
	for i, v := range s.states {
		if v == state {
			s.cur.Store(int32(i + 1))
			return true
		}
	}
	s.cur.Store(0)
	return false
}

// setIndex selects the i-th state without a string comparison.
func (s *StateSet) setIndex(i int) { s.cur.Store(int32(i + 1)) }

// Get returns the current state, "" if none.
func (s *StateSet) Get() string {
	if i := s.cur.Load(); i > 0 {
		return s.states[i-1]
	}
	return ""
}

// vec is a family of children keyed by label values.
type vec[T any] struct {
	labels []string
	newT   func() *T
	mu     sync.RWMutex
	m      map[string]*vecEntry[T]
}

type vecEntry[T any] struct {
	values []string
	v      *T
}

func newVec[T any](labels []string, newT func() *T) vec[T] {
	return vec[T]{labels: labels, newT: newT, m: make(map[string]*vecEntry[T])}
}

const keySep = "\xff"

func (v *vec[T]) with(values []string) *T {
	if len(values) != len(v.labels) {
		panic("metrics: got " + strconv.Itoa(len(values)) + " label values, want " + strconv.Itoa(len(v.labels)))
	}
	key := strings.Join(values, keySep)
	v.mu.RLock()
	e := v.m[key]
	v.mu.RUnlock()
	if e != nil {
		return e.v
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if e = v.m[key]; e == nil {
		e = &vecEntry[T]{values: append([]string(nil), values...), v: v.newT()}
		v.m[key] = e
	}
	return e.v
}

func (v *vec[T]) delete(values []string) bool {
	key := strings.Join(values, keySep)
	v.mu.Lock()
	defer v.mu.Unlock()
	_, ok := v.m[key]
	delete(v.m, key)
	return ok
}

// deleteMatching removes every child whose label `label` has value `value`.
func (v *vec[T]) deleteMatching(label, value string) int {
	idx := -1
	for i, l := range v.labels {
		if l == label {
			idx = i
		}
	}
	if idx < 0 {
		return 0
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for k, e := range v.m {
		if e.values[idx] == value {
			delete(v.m, k)
			n++
		}
	}
	return n
}

// sorted returns the children ordered by label values.
func (v *vec[T]) sorted() []*vecEntry[T] {
	v.mu.RLock()
	out := make([]*vecEntry[T], 0, len(v.m))
	for _, e := range v.m {
		out = append(out, e)
	}
	v.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].values, out[j].values
		for k := range a {
			if a[k] != b[k] {
				return a[k] < b[k]
			}
		}
		return false
	})
	return out
}

// CounterVec is a counter family with labels.
type CounterVec struct{ vec[Counter] }

// With returns the child for the label values (in the order the labels were
// declared), creating it at zero. Cache the result on hot paths.
func (v *CounterVec) With(values ...string) *Counter { return v.with(values) }

// Delete removes a child.
func (v *CounterVec) Delete(values ...string) bool { return v.delete(values) }

// GaugeVec is a gauge family with labels.
type GaugeVec struct{ vec[Gauge] }

// With returns the child for the label values, creating it at zero.
func (v *GaugeVec) With(values ...string) *Gauge { return v.with(values) }

// Delete removes a child.
func (v *GaugeVec) Delete(values ...string) bool { return v.delete(values) }

// HistogramVec is a histogram family with labels.
type HistogramVec struct {
	vec[Histogram]
	upper []float64
}

// With returns the child for the label values, creating it empty.
func (v *HistogramVec) With(values ...string) *Histogram { return v.with(values) }

// Delete removes a child.
func (v *HistogramVec) Delete(values ...string) bool { return v.delete(values) }

// StateSetVec is a state-set family with labels (besides the state label).
type StateSetVec struct {
	vec[StateSet]
	stateLabel string
	states     []string
}

// With returns the child for the label values, creating it with no state.
func (v *StateSetVec) With(values ...string) *StateSet { return v.with(values) }

// Delete removes a child.
func (v *StateSetVec) Delete(values ...string) bool { return v.delete(values) }
