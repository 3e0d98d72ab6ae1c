package metrics

import (
	"bytes"
	"flag"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

func mustParse(t *testing.T, r *Registry) map[string]*parsedFamily {
	t.Helper()
	text := string(r.AppendText(nil))
	fams, _, err := parseExposition(text)
	if err != nil {
		t.Fatalf("exposition does not parse: %v\n%s", err, text)
	}
	if err := checkHistograms(fams); err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	return fams
}

func TestExpositionParses(t *testing.T) {
	r := NewRegistry()
	c := r.NewCounterVec("t_requests_total", "Requests.\nSecond line with \\ backslash.", "path", "code")
	c.With(`/a"b`, "200").Add(3)
	c.With("back\\slash\nnewline", "500").Inc()
	g := r.NewGauge("t_temperature", "A gauge.")
	g.Set(-1.5)
	r.NewGauge("t_inf", "Infinite.").Set(math.Inf(1))
	r.NewGauge("t_nan", "Not a number.").Set(math.NaN())
	r.NewGaugeFunc("t_func", "Computed.", func() float64 { return 42 })
	h := r.NewHistogramVec("t_latency_seconds", "Latency.", []float64{0.1, 1, 10}, "op")
	h.With("read").Observe(0.05)
	h.With("read").Observe(5)
	h.With("write").Observe(100)
	s := r.NewStateSetVec("t_state", "State.", "state", []string{"a", "b", "c"}, "dev")
	s.With("x").Set("b")
	s.With("y") // no state: all zero
	r.NewCounterVec("t_empty_total", "No children.", "x")

	fams := mustParse(t, r)
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"t_requests_total", map[string]string{"path": `/a"b`, "code": "200"}, 3},
		{"t_requests_total", map[string]string{"path": "back\\slash\nnewline", "code": "500"}, 1},
		{"t_temperature", nil, -1.5},
		{"t_inf", nil, math.Inf(1)},
		{"t_func", nil, 42},
		{"t_latency_seconds_bucket", map[string]string{"op": "read", "le": "0.1"}, 1},
		{"t_latency_seconds_bucket", map[string]string{"op": "read", "le": "1"}, 1},
		{"t_latency_seconds_bucket", map[string]string{"op": "read", "le": "10"}, 2},
		{"t_latency_seconds_bucket", map[string]string{"op": "read", "le": "+Inf"}, 2},
		{"t_latency_seconds_sum", map[string]string{"op": "read"}, 5.05},
		{"t_latency_seconds_count", map[string]string{"op": "write"}, 1},
		{"t_latency_seconds_bucket", map[string]string{"op": "write", "le": "10"}, 0},
		{"t_state", map[string]string{"dev": "x", "state": "a"}, 0},
		{"t_state", map[string]string{"dev": "x", "state": "b"}, 1},
		{"t_state", map[string]string{"dev": "y", "state": "b"}, 0},
	}
	for _, tc := range tests {
		got, ok := value(fams, tc.name, tc.labels)
		if !ok || got != tc.want {
			t.Errorf("%s%v = %v (found %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	if v, ok := value(fams, "t_nan", nil); !ok || !math.IsNaN(v) {
		t.Errorf("t_nan = %v, %v", v, ok)
	}
	if f := fams["t_requests_total"]; f == nil || f.help != "Requests.\nSecond line with \\ backslash." || f.typ != "counter" {
		t.Errorf("t_requests_total family = %+v", f)
	}
	if fams["t_latency_seconds"].typ != "histogram" || fams["t_state"].typ != "gauge" {
		t.Errorf("types: %q %q", fams["t_latency_seconds"].typ, fams["t_state"].typ)
	}
	if _, ok := fams["t_empty_total"]; ok {
		t.Errorf("family without samples was written")
	}
}

// The parser must reject what the format forbids, or the test above proves
// nothing.
func TestParserRejects(t *testing.T) {
	bad := []string{
		"x 1\n",                 // no TYPE
		"# TYPE x counter\nx 1", // no final newline
		"# TYPE x counter\nx{a=\"b\"} 1\nx{a=\"b\"} 2\n",           // duplicate
		"# TYPE x counter\nx{a=\"b\n\"} 1\n",                       // raw newline
		"# TYPE x counter\nx{a=\"\\t\"} 1\n",                       // bad escape
		"# TYPE x counter\nx -1\n",                                 // negative counter
		"# TYPE x gauge\nx Inf\n",                                  // Go spelling of infinity
		"# TYPE x gauge\nx 1\n# TYPE y gauge\ny 1\nx{a=\"1\"} 2\n", // not contiguous
		"# TYPE x histogram\nx 1\n",                                // bare histogram sample
		"# TYPE x histogram\nx_bucket 1\n",                         // bucket without le
		"# TYPE 1x gauge\n",                                        // bad name
		"# TYPE x gauge\nx{1a=\"\"} 1\n",                           // bad label name
	}
	for _, text := range bad {
		if _, _, err := parseExposition(text); err == nil {
			t.Errorf("parser accepted %q", text)
		}
	}
	badHist := "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n"
	fams, _, err := parseExposition(badHist)
	if err != nil {
		t.Fatal(err)
	}
	if checkHistograms(fams) == nil {
		t.Errorf("non-cumulative histogram accepted")
	}
}

func TestHistogramBuckets(t *testing.T) {
	bounds := []float64{1, 2, 4}
	tests := []struct {
		obs  []float64
		want []uint64 // cumulative: le=1, 2, 4, +Inf
	}{
		{nil, []uint64{0, 0, 0, 0}},
		{[]float64{1}, []uint64{1, 1, 1, 1}}, // a value equal to a bound is in that bucket
		{[]float64{1.0000001}, []uint64{0, 1, 1, 1}},
		{[]float64{0, -5, 2, 3, 4, 4.5, 1e9}, []uint64{2, 3, 5, 7}},
		{[]float64{math.Inf(1), math.NaN()}, []uint64{0, 0, 0, 2}},
		{[]float64{math.Inf(-1)}, []uint64{1, 1, 1, 1}},
	}
	for _, tc := range tests {
		h := newHistogram(checkBuckets(bounds))
		for _, v := range tc.obs {
			h.Observe(v)
		}
		cum, count, _ := h.Snapshot()
		if len(cum) != len(tc.want) {
			t.Fatalf("%v: %d buckets", tc.obs, len(cum))
		}
		for i := range cum {
			if cum[i] != tc.want[i] {
				t.Errorf("%v: cumulative %v, want %v", tc.obs, cum, tc.want)
				break
			}
		}
		if count != uint64(len(tc.obs)) {
			t.Errorf("%v: count %d", tc.obs, count)
		}
	}
	h := newHistogram(checkBuckets([]float64{1, math.Inf(1)}))
	if len(h.upper) != 1 {
		t.Errorf("explicit +Inf bound kept: %v", h.upper)
	}
	h.ObserveDuration(1500 * time.Millisecond)
	if _, _, sum := h.Snapshot(); sum != 1.5 {
		t.Errorf("ObserveDuration sum %v, want 1.5", sum)
	}
}

func TestBucketValidation(t *testing.T) {
	for _, b := range [][]float64{nil, {2, 1}, {1, 1}, {math.NaN()}, {math.Inf(1), 5}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("buckets %v accepted", b)
				}
			}()
			checkBuckets(b)
		}()
	}
	if got := ExponentialBuckets(512, 2, 3); len(got) != 3 || got[0] != 512 || got[2] != 2048 {
		t.Errorf("ExponentialBuckets = %v", got)
	}
}

func TestRegistration(t *testing.T) {
	r := NewRegistry()
	a := r.NewCounterVec("x_total", "X.", "a")
	if b := r.NewCounterVec("x_total", "X.", "a"); b != a {
		t.Errorf("identical registration returned a new family")
	}
	if r.NewCounter("y_total", "Y.") != r.NewCounter("y_total", "Y.") {
		t.Errorf("NewCounter twice gave two counters")
	}
	r.NewHistogram("h", "H.", []float64{1})
	panics := []struct {
		name string
		fn   func()
	}{
		{"other labels", func() { r.NewCounterVec("x_total", "X.", "b") }},
		{"other type", func() { r.NewGauge("x_total", "X.") }},
		{"other help", func() { r.NewCounterVec("x_total", "Other.", "a") }},
		{"histogram suffix clash", func() { r.NewCounter("h_count", "C.") }},
		{"histogram over existing _sum", func() { r.NewCounter("z_sum", "Z."); r.NewHistogram("z", "Z.", []float64{1}) }},
		{"bad name", func() { r.NewGauge("1abc", "") }},
		{"bad label", func() { r.NewGaugeVec("g", "", "a-b") }},
		{"reserved label", func() { r.NewGaugeVec("g2", "", "__x") }},
		{"duplicate label", func() { r.NewGaugeVec("g3", "", "a", "a") }},
		{"le on histogram", func() { r.NewHistogramVec("h2", "", []float64{1}, "le") }},
		{"state label clash", func() { r.NewStateSetVec("s", "", "a", []string{"x"}, "a") }},
		{"duplicate state", func() { r.NewStateSetVec("s2", "", "st", []string{"x", "x"}) }},
		{"gauge func twice", func() { r.NewGaugeFunc("f", "", nil); r.NewGaugeFunc("f", "", nil) }},
		{"label count", func() { a.With("1", "2") }},
	}
	for _, p := range panics {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", p.name)
				}
			}()
			p.fn()
		}()
	}
	if !r.Unregister("x_total") || r.Unregister("x_total") {
		t.Errorf("Unregister")
	}
	r.NewGauge("x_total", "Now a gauge.") // allowed after Unregister
	if a.Delete("missing") {
		t.Errorf("Delete of a missing child reported success")
	}
	a.With("v").Inc()
	if !a.Delete("v") {
		t.Errorf("Delete of an existing child failed")
	}
}

func TestStateSet(t *testing.T) {
	s := &StateSet{states: []string{"a", "b"}}
	if s.Get() != "" {
		t.Errorf("initial state %q", s.Get())
	}
	if !s.Set("b") || s.Get() != "b" {
		t.Errorf("Set(b): %q", s.Get())
	}
	if s.Set("zzz") || s.Get() != "" {
		t.Errorf("Set(unknown) kept %q", s.Get())
	}
}

// fillArray makes deterministic updates of every Array method.
func fillArray(a *Array) {
	a.ObserveIO(OpRead, 4096, 30*time.Microsecond)
	a.ObserveIO(OpRead, 1<<20, 2*time.Millisecond)
	a.ObserveIO(OpWrite, 65536, 700*time.Microsecond)
	a.ObserveIO(OpFlush, 0, 5*time.Millisecond)
	a.ObserveIO(OpDiscard, 1<<30, 20*time.Microsecond)
	a.ObserveIO(OpWriteZeroes, 8192, 40*time.Microsecond)
	a.IOError(OpWrite)
	a.BitmapFlush(4096)
	a.BitmapFlush(12288)
	a.SetBitmapDirty(17)
	a.SetState(StateActive)
	a.SetMembers(4, 1)
	a.SetMismatches(128)
}

func TestArrayGolden(t *testing.T) {
	r := NewRegistry()
	a := NewArray(r, "md0")
	clock := time.Unix(1700000000, 0)
	a.now = func() time.Time { return clock }
	fillArray(a)
	a.SetSync(SyncRecover, 0, 2000000)
	clock = clock.Add(4 * time.Second)
	a.SetSync(SyncRecover, 80000, 2000000) // 80000 sectors in 4 s = 10 MiB/s
	got := r.AppendText(nil)
	mustParse(t, r)

	golden := filepath.Join("testdata", "array.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("exposition differs from %s (run with -update after checking):\n%s", golden, got)
	}
}

func TestArrayValues(t *testing.T) {
	r := NewRegistry()
	a := NewArray(r, "md0")
	b := NewArray(r, "md1") // shares the families
	fams := mustParse(t, r)
	for _, name := range []string{"md0", "md1"} {
		if v, _ := value(fams, ArrayStateName, map[string]string{"array": name, "state": "inactive"}); v != 1 {
			t.Errorf("%s: initial state not inactive", name)
		}
		if v, _ := value(fams, SyncActionName, map[string]string{"array": name, "action": "idle"}); v != 1 {
			t.Errorf("%s: initial action not idle", name)
		}
	}
	fillArray(a)
	b.SetState(StateClean)
	fams = mustParse(t, r)
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{IOOps, map[string]string{"array": "md0", "op": "read"}, 2},
		{IOBytes, map[string]string{"array": "md0", "op": "read"}, 4096 + 1<<20},
		{IOBytes, map[string]string{"array": "md0", "op": "discard"}, 1 << 30},
		{IOOps, map[string]string{"array": "md0", "op": "flush"}, 1},
		{IOOps, map[string]string{"array": "md1", "op": "read"}, 0},
		{IOErrors, map[string]string{"array": "md0", "op": "write"}, 1},
		{IOLatency + "_bucket", map[string]string{"array": "md0", "op": "read", "le": "5e-05"}, 1},
		{IOLatency + "_bucket", map[string]string{"array": "md0", "op": "read", "le": "0.0025"}, 2},
		{IOLatency + "_count", map[string]string{"array": "md0", "op": "write_zeroes"}, 1},
		{BitmapFlushes, map[string]string{"array": "md0"}, 2},
		{BitmapFlushBytes + "_bucket", map[string]string{"array": "md0", "le": "4096"}, 1},
		{BitmapFlushBytes + "_bucket", map[string]string{"array": "md0", "le": "16384"}, 2},
		{BitmapFlushBytes + "_sum", map[string]string{"array": "md0"}, 16384},
		{BitmapDirtyChunks, map[string]string{"array": "md0"}, 17},
		{ArrayStateName, map[string]string{"array": "md0", "state": "active"}, 1},
		{ArrayStateName, map[string]string{"array": "md0", "state": "inactive"}, 0},
		{ArrayStateName, map[string]string{"array": "md1", "state": "clean"}, 1},
		{RaidDisks, map[string]string{"array": "md0"}, 4},
		{DegradedMembers, map[string]string{"array": "md0"}, 1},
		{SyncMismatches, map[string]string{"array": "md0"}, 128},
	}
	for _, c := range checks {
		if got, ok := value(fams, c.name, c.labels); !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	// Exactly one state per array.
	for _, name := range []string{"md0", "md1"} {
		ones := 0
		for _, s := range fams[ArrayStateName].samples {
			if s.labels["array"] == name {
				ones += int(s.value)
			}
		}
		if ones != 1 {
			t.Errorf("%s: %d states set", name, ones)
		}
	}
	a.SetState("no-such-state")
	if a.State() != "" {
		t.Errorf("unknown state kept as %q", a.State())
	}
	a.Close()
	text := string(r.AppendText(nil))
	if strings.Contains(text, `array="md0"`) {
		t.Errorf("md0 children left after Close:\n%s", text)
	}
	if !strings.Contains(text, `array="md1"`) {
		t.Errorf("md1 children gone after md0 Close")
	}
}

func TestSyncSpeed(t *testing.T) {
	r := NewRegistry()
	a := NewArray(r, "md0")
	clock := time.Unix(0, 0)
	a.now = func() time.Time { return clock }
	speed := func() float64 { return a.syncSpeed.Value() }

	a.SetSync(SyncResync, 0, 1<<20)
	if speed() != 0 {
		t.Errorf("speed after first mark %v", speed())
	}
	// 2048 sectors (1 MiB) per second for 60 s: the window is bounded.
	for i := 1; i <= 60; i++ {
		clock = clock.Add(time.Second)
		a.SetSync(SyncResync, uint64(i)*2048, 1<<20)
		if got := speed(); math.Abs(got-1<<20) > 1 {
			t.Fatalf("t=%ds: speed %v, want %v", i, got, 1<<20)
		}
	}
	if len(a.marks) > syncMarks {
		t.Errorf("%d marks kept", len(a.marks))
	}
	if span := clock.Sub(a.marks[0].t); span > SyncSpeedWindow {
		t.Errorf("window %v > %v", span, SyncSpeedWindow)
	}
	// Slow down to 512 KiB/s: after a full window the old rate is gone.
	base := uint64(60 * 2048)
	for i := 1; i <= 40; i++ {
		clock = clock.Add(time.Second)
		a.SetSync(SyncResync, base+uint64(i)*1024, 1<<20)
	}
	if got := speed(); math.Abs(got-512*1024) > 1 {
		t.Errorf("speed after slowdown %v, want %v", got, 512*1024)
	}
	if v := a.syncDone.Value(); v != float64(base+40*1024) {
		t.Errorf("done %v", v)
	}
	// New action: measurement restarts.
	a.SetSync(SyncCheck, 10, 1<<20)
	if speed() != 0 || a.syncAction.Get() != "check" {
		t.Errorf("after action change: speed %v action %q", speed(), a.syncAction.Get())
	}
	// Progress going backwards restarts too.
	clock = clock.Add(time.Second)
	a.SetSync(SyncCheck, 5, 1<<20)
	if speed() != 0 {
		t.Errorf("speed after going backwards %v", speed())
	}
	a.SetSync(SyncIdle, 0, 0)
	if a.syncDone.Value() != 0 || a.syncTotal.Value() != 0 || speed() != 0 || a.syncAction.Get() != "idle" {
		t.Errorf("idle did not clear progress")
	}
}

func TestConcurrentUpdates(t *testing.T) {
	r := NewRegistry()
	a := NewArray(r, "md0")
	const workers, per = 8, 2000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	scrapes := make(chan error, 1)
	go func() {
		// Scrape while updating: every exposition must parse and be
		// internally consistent.
		for {
			select {
			case <-stop:
				scrapes <- nil
				return
			default:
			}
			fams, _, err := parseExposition(string(r.AppendText(nil)))
			if err == nil {
				err = checkHistograms(fams)
			}
			if err != nil {
				scrapes <- err
				return
			}
		}
	}()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < per; i++ {
				op := Op((w + i) % int(numOps))
				a.ObserveIO(op, 512, time.Duration(i)*time.Microsecond)
				a.BitmapFlush(4096)
				if i%100 == 0 {
					a.SetState(ArrayStates[i%len(ArrayStates)])
					a.SetSync(SyncResync, uint64(i), per)
					a.SetDegraded(w)
				}
			}
		}(w)
	}
	wg.Wait()
	close(stop)
	if err := <-scrapes; err != nil {
		t.Fatal(err)
	}
	var ops, bytesTotal uint64
	for o := Op(0); o < numOps; o++ {
		ops += a.ops[o].Value()
		bytesTotal += a.bytes[o].Value()
		if _, c, _ := a.lat[o].Snapshot(); c != a.ops[o].Value() {
			t.Errorf("%v: latency count %d != ops %d", o, c, a.ops[o].Value())
		}
	}
	if ops != workers*per || bytesTotal != workers*per*512 {
		t.Errorf("ops %d bytes %d, want %d %d", ops, bytesTotal, workers*per, workers*per*512)
	}
	_, c, sum := a.bmBytes.Snapshot()
	if c != workers*per || a.bmFlushes.Value() != workers*per || sum != float64(workers*per*4096) {
		t.Errorf("bitmap flushes %d/%d sum %v", c, a.bmFlushes.Value(), sum)
	}
	// Latency sum: every worker observed 0..per-1 µs.
	var latSum float64
	for o := Op(0); o < numOps; o++ {
		_, _, s := a.lat[o].Snapshot()
		latSum += s
	}
	want := float64(workers) * float64(per*(per-1)/2) * 1e-6
	if math.Abs(latSum-want) > 1e-6 {
		t.Errorf("latency sum %v, want %v", latSum, want)
	}
}

func TestNoAllocations(t *testing.T) {
	a := NewArray(NewRegistry(), "md0")
	for name, fn := range map[string]func(){
		"ObserveIO":   func() { a.ObserveIO(OpWrite, 4096, time.Millisecond) },
		"IOError":     func() { a.IOError(OpRead) },
		"BitmapFlush": func() { a.BitmapFlush(4096) },
		"SetState":    func() { a.SetState(StateClean) },
		"SetDegraded": func() { a.SetDegraded(1) },
	} {
		if n := testing.AllocsPerRun(100, fn); n != 0 {
			t.Errorf("%s allocates %v times", name, n)
		}
	}
}

func TestHandler(t *testing.T) {
	r := NewRegistry()
	a := NewArray(r, "md0")
	a.ObserveIO(OpRead, 4096, time.Millisecond)
	mux := http.NewServeMux()
	mux.Handle("/metrics", r.Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	fams, _, err := parseExposition(string(body))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := value(fams, IOOps, map[string]string{"array": "md0", "op": "read"}); v != 1 {
		t.Errorf("served read count %v", v)
	}

	req, _ := http.NewRequest(http.MethodHead, srv.URL+"/metrics", nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ContentLength != int64(len(body)) {
		t.Errorf("HEAD: status %d length %d, want 200 %d", resp.StatusCode, resp.ContentLength, len(body))
	}
	resp, err = http.Post(srv.URL+"/metrics", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: status %d", resp.StatusCode)
	}

	var buf bytes.Buffer
	if _, err := r.WriteTo(&buf); err != nil || !bytes.Equal(buf.Bytes(), body) {
		t.Errorf("WriteTo differs from the served body (err %v)", err)
	}
}

func BenchmarkObserveIO(b *testing.B) {
	a := NewArray(NewRegistry(), "md0")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			a.ObserveIO(OpWrite, 4096, 100*time.Microsecond)
		}
	})
}

func BenchmarkScrape(b *testing.B) {
	r := NewRegistry()
	fillArray(NewArray(r, "md0"))
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = r.AppendText(buf[:0])
	}
}
