package metrics

import (
	"bytes"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
)

// Registry holds the arrays whose metrics are served: a
// prometheus.Registry with one collector per array.
type Registry struct {
	prom *prometheus.Registry

	mu     sync.Mutex
	arrays map[string]*Array
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{prom: prometheus.NewRegistry(), arrays: make(map[string]*Array)}
}

// Gatherer returns the registry as a prometheus.Gatherer.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.prom }

// AppendText appends the text exposition (format 0.0.4) of every array to
// b, as the handler serves it by default.
func (r *Registry) AppendText(b []byte) []byte {
	buf := bytes.NewBuffer(b)
	mfs, _ := r.prom.Gather() // the collectors are consistent by construction
	enc := expfmt.NewEncoder(buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		enc.Encode(mf)
	}
	return buf.Bytes()
}

// Handler serves the metrics (GET and HEAD; promhttp negotiates the format
// and compression, the text format 0.0.4 by default). Mount it at /metrics:
// mux.Handle("/metrics", reg.Handler()).
func (r *Registry) Handler() http.Handler {
	h := promhttp.HandlerFor(r.prom, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		h.ServeHTTP(w, req)
	})
}

// add registers a's collector; an array of the same name already in the
// registry is returned instead (its metrics are shared, as a second
// NewArray of one name shared them before).
func (r *Registry) add(a *Array) *Array {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old := r.arrays[a.name]; old != nil {
		return old
	}
	r.prom.MustRegister(a)
	r.arrays[a.name] = a
	return a
}

// remove unregisters a.
func (r *Registry) remove(a *Array) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.arrays[a.name] == a {
		r.prom.Unregister(a)
		delete(r.arrays, a.name)
	}
}
