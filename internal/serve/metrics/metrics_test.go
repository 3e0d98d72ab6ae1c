package metrics

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

var update = flag.Bool("update", false, "rewrite golden files")

// gather returns r's families by name, checking every histogram: cumulative
// bucket counts that never decrease and a count equal to the +Inf bucket.
func gather(t *testing.T, r *Registry) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := r.Gatherer().Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	if err := checkHistograms(mfs); err != nil {
		t.Fatal(err)
	}
	fams := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		fams[mf.GetName()] = mf
	}
	return fams
}

func checkHistograms(mfs []*dto.MetricFamily) error {
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			h := m.GetHistogram()
			if h == nil {
				continue
			}
			var last uint64
			for _, b := range h.GetBucket() {
				if b.GetCumulativeCount() < last {
					return fmt.Errorf("%s: bucket counts decrease", mf.GetName())
				}
				last = b.GetCumulativeCount()
			}
			if h.GetSampleCount() < last {
				return fmt.Errorf("%s: count %d below the last bucket %d", mf.GetName(), h.GetSampleCount(), last)
			}
		}
	}
	return nil
}

// value returns the sample name{labels} as the text format would show it:
// histogram samples are name_bucket (with le), name_sum and name_count.
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	base, suffix := name, ""
	for _, s := range []string{"_bucket", "_sum", "_count"} {
		if f := fams[strings.TrimSuffix(name, s)]; strings.HasSuffix(name, s) && f != nil && f.GetType() == dto.MetricType_HISTOGRAM {
			base, suffix = strings.TrimSuffix(name, s), s
		}
	}
	f := fams[base]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		n := 0
		for _, lp := range m.GetLabel() {
			if v, ok := labels[lp.GetName()]; !ok || v != lp.GetValue() {
				continue next
			}
			n++
		}
		le, wantLE := labels["le"]
		if n+btoi(wantLE) != len(labels) {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue(), true
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue(), true
		case dto.MetricType_HISTOGRAM:
			h := m.GetHistogram()
			switch suffix {
			case "_sum":
				return h.GetSampleSum(), true
			case "_count":
				return float64(h.GetSampleCount()), true
			case "_bucket":
				if le == "+Inf" {
					return float64(h.GetSampleCount()), true
				}
				for _, b := range h.GetBucket() {
					if strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64) == le {
						return float64(b.GetCumulativeCount()), true
					}
				}
			}
		}
	}
	return 0, false
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
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
		h := newHistogram(bounds)
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
	h := newHistogram([]float64{1})
	h.ObserveDuration(1500 * time.Millisecond)
	if _, _, sum := h.Snapshot(); sum != 1.5 {
		t.Errorf("ObserveDuration sum %v, want 1.5", sum)
	}
}

func TestExponentialBuckets(t *testing.T) {
	if got := ExponentialBuckets(512, 2, 3); len(got) != 3 || got[0] != 512 || got[2] != 2048 {
		t.Errorf("ExponentialBuckets = %v", got)
	}
}

// A second NewArray of one name shares the first one's metrics (as it did
// with the hand-made registry); after Close the name can be used again.
func TestRegistration(t *testing.T) {
	r := NewRegistry()
	a := NewArray(r, "md0")
	if b := NewArray(r, "md0"); b != a {
		t.Errorf("second NewArray(md0) did not share the first")
	}
	a.ObserveIO(OpRead, 512, time.Millisecond)
	a.Close()
	if fams := gather(t, r); len(fams) != 0 {
		t.Errorf("families left after Close: %d", len(fams))
	}
	c := NewArray(r, "md0")
	if c == a {
		t.Fatalf("NewArray after Close returned the closed array")
	}
	if v, ok := value(gather(t, r), IOOps, map[string]string{"array": "md0", "op": "read"}); !ok || v != 0 {
		t.Errorf("new md0 read count %v (found %v), want 0", v, ok)
	}
}

func TestStateSet(t *testing.T) {
	s := &stateSet{states: []string{"a", "b"}}
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

func TestArrayValues(t *testing.T) {
	r := NewRegistry()
	a := NewArray(r, "md0")
	b := NewArray(r, "md1") // shares the families
	fams := gather(t, r)
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
	fams = gather(t, r)
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
		for _, m := range fams[ArrayStateName].GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "array" && lp.GetValue() == name {
					ones += int(m.GetGauge().GetValue())
				}
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
	text := scrapeHTTP(t, r)
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
			mfs, err := r.Gatherer().Gather()
			if err == nil {
				err = checkHistograms(mfs)
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
	ct := resp.Header.Get("Content-Type")
	if mt, params, err := mime.ParseMediaType(ct); err != nil || mt != "text/plain" || params["version"] != "0.0.4" {
		t.Errorf("Content-Type %q", ct)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q", cc)
	}
	want := `mdtool_io_requests_total{array="md0",op="read"} 1` + "\n"
	if !strings.Contains(string(body), want) {
		t.Errorf("served body lacks %q:\n%s", want, body)
	}
	if text := r.AppendText(nil); !bytes.Equal(text, body) {
		t.Errorf("AppendText differs from the served body:\n%s", text)
	}

	req, _ := http.NewRequest(http.MethodHead, srv.URL+"/metrics", nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != ct {
		t.Errorf("HEAD: status %d Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	resp, err = http.Post(srv.URL+"/metrics", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: status %d Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
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

// BenchmarkScrape is one text exposition of a filled array, as the HTTP
// handler renders it (gather and encode, without the HTTP round trip).
func BenchmarkScrape(b *testing.B) {
	r := NewRegistry()
	fillArray(NewArray(r, "md0"))
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = r.AppendText(buf[:0])
	}
}

// Members on NBD servers get a connected gauge and a latency gauge each,
// labelled with their URI; arrays without them get no such series.
func TestRemoteMemberSeries(t *testing.T) {
	r := NewRegistry()
	a := NewArray(r, "md0")
	NewArray(r, "md1")
	a.SetRemote([]RemoteMember{
		{URI: "nbd://node1/d0", Connected: true, Latency: 1500 * time.Microsecond},
		{URI: "nbd://node2/d1", Connected: false},
	})
	fams := gather(t, r)
	for _, c := range []struct {
		name, member string
		want         float64
	}{
		{RemoteConnected, "nbd://node1/d0", 1},
		{RemoteConnected, "nbd://node2/d1", 0},
		{RemoteLatency, "nbd://node1/d0", 0.0015},
	} {
		if got, ok := value(fams, c.name, map[string]string{"array": "md0", "member": c.member}); !ok || got != c.want {
			t.Errorf("%s{member=%s} = %v (found %v), want %v", c.name, c.member, got, ok, c.want)
		}
	}
	if n := len(fams[RemoteConnected].GetMetric()); n != 2 {
		t.Errorf("%d %s series, want 2 (md1 has no remote members)", n, RemoteConnected)
	}
	a.SetRemote(nil)
	if _, ok := gather(t, r)[RemoteConnected]; ok {
		t.Error("series left after the remote members went away")
	}
}
