package metrics

import (
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
)

// ContentType is the media type of the text exposition format 0.0.4.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

type kind int

const (
	kindCounter kind = iota
	kindGauge
	kindGaugeFunc
	kindHistogram
	kindStateSet
)

func (k kind) typeName() string {
	switch k {
	case kindCounter:
		return "counter"
	case kindHistogram:
		return "histogram"
	default:
		return "gauge"
	}
}

type family struct {
	name, help string
	kind       kind
	labels     []string
	buckets    []float64 // histograms
	stateLabel string    // state sets
	states     []string  // state sets

	counters *CounterVec
	gauges   *GaugeVec
	fn       func() float64
	hists    *HistogramVec
	sets     *StateSetVec
}

func (f *family) sameShape(g *family) bool {
	return f.kind == g.kind && f.help == g.help && slices.Equal(f.labels, g.labels) &&
		slices.Equal(f.buckets, g.buckets) && f.stateLabel == g.stateLabel &&
		slices.Equal(f.states, g.states)
}

// Registry holds metric families and renders them in the Prometheus text
// format. Registering a family that already exists with the same name,
// type, help, labels (and buckets or states) returns the existing one, so
// several arrays can share a registry; a conflicting registration panics.
type Registry struct {
	mu       sync.Mutex
	families []*family
	byName   map[string]*family
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{byName: make(map[string]*family)}
}

func (r *Registry) register(f *family) *family {
	if !validMetricName(f.name) {
		panic("metrics: invalid metric name " + strconv.Quote(f.name))
	}
	seen := map[string]bool{}
	for _, l := range append(slices.Clone(f.labels), f.stateLabel) {
		if l == "" && f.kind != kindStateSet {
			continue
		}
		if !validLabelName(l) || seen[l] || (l == "le" && f.kind == kindHistogram) {
			panic("metrics: invalid or duplicate label name " + strconv.Quote(l) + " in " + f.name)
		}
		seen[l] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range familyNames(f) {
		if g := r.byName[n]; g != nil {
			if g.name == f.name && g.sameShape(f) && f.kind != kindGaugeFunc {
				return g
			}
			panic("metrics: conflicting registration of " + f.name)
		}
	}
	switch f.kind {
	case kindCounter:
		f.counters = &CounterVec{newVec(f.labels, func() *Counter { return new(Counter) })}
	case kindGauge:
		f.gauges = &GaugeVec{newVec(f.labels, func() *Gauge { return new(Gauge) })}
	case kindHistogram:
		b := f.buckets
		f.hists = &HistogramVec{newVec(f.labels, func() *Histogram { return newHistogram(b) }), b}
	case kindStateSet:
		st := f.states
		f.sets = &StateSetVec{newVec(f.labels, func() *StateSet { return &StateSet{states: st} }), f.stateLabel, st}
	}
	for _, n := range familyNames(f) {
		r.byName[n] = f
	}
	r.families = append(r.families, f)
	return f
}

// familyNames are the sample names a family uses, to catch clashes such as a
// counter "x_count" next to a histogram "x".
func familyNames(f *family) []string {
	if f.kind == kindHistogram {
		return []string{f.name, f.name + "_bucket", f.name + "_sum", f.name + "_count"}
	}
	return []string{f.name}
}

// Unregister removes a family by name; it reports whether one was removed.
func (r *Registry) Unregister(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.byName[name]
	if f == nil || f.name != name {
		return false
	}
	for _, n := range familyNames(f) {
		delete(r.byName, n)
	}
	r.families = slices.DeleteFunc(r.families, func(g *family) bool { return g == f })
	return true
}

// NewCounterVec registers (or returns) a counter family with labels.
func (r *Registry) NewCounterVec(name, help string, labels ...string) *CounterVec {
	return r.register(&family{name: name, help: help, kind: kindCounter, labels: labels}).counters
}

// NewCounter registers (or returns) a counter without labels.
func (r *Registry) NewCounter(name, help string) *Counter {
	return r.NewCounterVec(name, help).With()
}

// NewGaugeVec registers (or returns) a gauge family with labels.
func (r *Registry) NewGaugeVec(name, help string, labels ...string) *GaugeVec {
	return r.register(&family{name: name, help: help, kind: kindGauge, labels: labels}).gauges
}

// NewGauge registers (or returns) a gauge without labels.
func (r *Registry) NewGauge(name, help string) *Gauge {
	return r.NewGaugeVec(name, help).With()
}

// NewGaugeFunc registers a gauge whose value fn computes at every scrape.
// fn must be safe for concurrent use. A second registration panics.
func (r *Registry) NewGaugeFunc(name, help string, fn func() float64) {
	r.register(&family{name: name, help: help, kind: kindGaugeFunc, fn: fn})
}

// NewHistogramVec registers (or returns) a histogram family with labels.
// buckets are the ascending upper bounds; +Inf is implicit.
func (r *Registry) NewHistogramVec(name, help string, buckets []float64, labels ...string) *HistogramVec {
	return r.register(&family{name: name, help: help, kind: kindHistogram, labels: labels,
		buckets: checkBuckets(buckets)}).hists
}

// NewHistogram registers (or returns) a histogram without labels.
func (r *Registry) NewHistogram(name, help string, buckets []float64) *Histogram {
	return r.NewHistogramVec(name, help, buckets).With()
}

// NewStateSetVec registers (or returns) an enumeration family: a gauge with
// one sample per state, the state in label stateLabel.
func (r *Registry) NewStateSetVec(name, help, stateLabel string, states []string, labels ...string) *StateSetVec {
	if len(states) == 0 {
		panic("metrics: state set without states")
	}
	for i, s := range states {
		if slices.Contains(states[:i], s) {
			panic("metrics: duplicate state " + strconv.Quote(s))
		}
	}
	return r.register(&family{name: name, help: help, kind: kindStateSet, labels: labels,
		stateLabel: stateLabel, states: slices.Clone(states)}).sets
}

// AppendText appends the exposition of every family to b, in registration
// order, children sorted by label values. Families without samples are left
// out.
func (r *Registry) AppendText(b []byte) []byte {
	r.mu.Lock()
	fams := slices.Clone(r.families)
	r.mu.Unlock()
	for _, f := range fams {
		b = f.appendText(b)
	}
	return b
}

// WriteTo writes the exposition to w.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(r.AppendText(nil))
	return int64(n), err
}

// Handler serves the exposition (GET and HEAD) with ContentType. Mount it at
// /metrics: mux.Handle("/metrics", reg.Handler()).
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		body := r.AppendText(nil)
		h := w.Header()
		h.Set("Content-Type", ContentType)
		h.Set("Content-Length", strconv.Itoa(len(body)))
		h.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		if req.Method == http.MethodGet {
			w.Write(body)
		}
	})
}

func (f *family) appendText(b []byte) []byte {
	start := len(b)
	b = append(b, "# HELP "...)
	b = append(b, f.name...)
	b = append(b, ' ')
	b = appendEscaped(b, f.help, false)
	b = append(b, "\n# TYPE "...)
	b = append(b, f.name...)
	b = append(b, ' ')
	b = append(b, f.kind.typeName()...)
	b = append(b, '\n')
	header := len(b)

	switch f.kind {
	case kindCounter:
		for _, e := range f.counters.sorted() {
			b = appendSample(b, f.name, "", f.labels, e.values, "", "")
			b = strconv.AppendUint(b, e.v.Value(), 10)
			b = append(b, '\n')
		}
	case kindGauge:
		for _, e := range f.gauges.sorted() {
			b = appendSample(b, f.name, "", f.labels, e.values, "", "")
			b = appendFloat(b, e.v.Value())
			b = append(b, '\n')
		}
	case kindGaugeFunc:
		b = append(b, f.name...)
		b = append(b, ' ')
		b = appendFloat(b, f.fn())
		b = append(b, '\n')
	case kindHistogram:
		var le []byte
		for _, e := range f.hists.sorted() {
			cum, count, sum := e.v.Snapshot()
			for i, c := range cum {
				le = le[:0]
				if i < len(f.buckets) {
					le = appendFloat(le, f.buckets[i])
				} else {
					le = append(le, "+Inf"...)
				}
				b = appendSample(b, f.name, "_bucket", f.labels, e.values, "le", string(le))
				b = strconv.AppendUint(b, c, 10)
				b = append(b, '\n')
			}
			b = appendSample(b, f.name, "_sum", f.labels, e.values, "", "")
			b = appendFloat(b, sum)
			b = append(b, '\n')
			b = appendSample(b, f.name, "_count", f.labels, e.values, "", "")
			b = strconv.AppendUint(b, count, 10)
			b = append(b, '\n')
		}
	case kindStateSet:
		for _, e := range f.sets.sorted() {
			cur := e.v.Get()
			for _, s := range f.states {
				b = appendSample(b, f.name, "", f.labels, e.values, f.stateLabel, s)
				if s == cur {
					b = append(b, '1')
				} else {
					b = append(b, '0')
				}
				b = append(b, '\n')
			}
		}
	}
	if len(b) == header {
		return b[:start]
	}
	return b
}

// appendSample writes `name suffix{labels,extra="v"} ` (with the trailing space).
func appendSample(b []byte, name, suffix string, labels, values []string, extra, extraValue string) []byte {
	b = append(b, name...)
	b = append(b, suffix...)
	if len(labels) == 0 && extra == "" {
		return append(b, ' ')
	}
	b = append(b, '{')
	for i, l := range labels {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, l...)
		b = append(b, `="`...)
		b = appendEscaped(b, values[i], true)
		b = append(b, '"')
	}
	if extra != "" {
		if len(labels) > 0 {
			b = append(b, ',')
		}
		b = append(b, extra...)
		b = append(b, `="`...)
		b = appendEscaped(b, extraValue, true)
		b = append(b, '"')
	}
	return append(b, "} "...)
}

// appendEscaped escapes backslash and newline, and for label values also the
// double quote, as the text format requires.
func appendEscaped(b []byte, s string, quote bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

func appendFloat(b []byte, v float64) []byte {
	switch {
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

func validMetricName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func validLabelName(s string) bool {
	if s == "" || len(s) >= 2 && s[:2] == "__" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
