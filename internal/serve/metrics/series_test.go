package metrics

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scrapeHTTP serves r's handler and returns the body of GET /metrics (no
// Accept header, as curl sends it).
func scrapeHTTP(t *testing.T, r *Registry) string {
	t.Helper()
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: status %d, %v", resp.StatusCode, err)
	}
	return string(body)
}

// normaliseExposition rewrites a text exposition into a canonical form that
// keeps what a scraper sees — every family's HELP and TYPE, every series
// (name and label set) and its value — and drops what the format leaves
// free: the order of families, of samples and of labels within a sample,
// and the spelling of numbers (1e+06 and 1000000 are the same value).
// Samples stay under the family whose HELP/TYPE precedes them.
func normaliseExposition(text string) (string, error) {
	type fam struct {
		head    []string
		samples []string
	}
	fams := map[string]*fam{}
	var cur *fam
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if line == "" {
			return "", fmt.Errorf("empty line")
		}
		if rest, ok := strings.CutPrefix(line, "# "); ok {
			f := strings.SplitN(rest, " ", 3)
			if len(f) < 3 || (f[0] != "HELP" && f[0] != "TYPE") {
				return "", fmt.Errorf("bad comment %q", line)
			}
			if fams[f[1]] == nil {
				fams[f[1]] = &fam{}
			}
			cur = fams[f[1]]
			cur.head = append(cur.head, line)
			continue
		}
		if cur == nil {
			return "", fmt.Errorf("sample before any TYPE: %q", line)
		}
		s, err := canonicalSample(line)
		if err != nil {
			return "", err
		}
		cur.samples = append(cur.samples, s)
	}
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		f := fams[n]
		slices.Sort(f.head) // HELP before TYPE
		slices.Sort(f.samples)
		for _, l := range append(f.head, f.samples...) {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String(), nil
}

// canonicalSample returns `name{l1="v1",l2="v2"} value` with the labels
// sorted by name and the value in Go's shortest 'g' form.
func canonicalSample(line string) (string, error) {
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return "", fmt.Errorf("bad sample %q", line)
	}
	name, rest := line[:i], line[i:]
	var labels []string
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			if rest == "" {
				return "", fmt.Errorf("unterminated labels in %q", line)
			}
			if rest[0] == '}' {
				rest = rest[1:]
				break
			}
			if rest[0] == ',' {
				rest = rest[1:]
				continue
			}
			eq := strings.Index(rest, `="`)
			if eq < 0 {
				return "", fmt.Errorf("bad label in %q", line)
			}
			j := eq + 2
			for j < len(rest) && rest[j] != '"' {
				if rest[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(rest) {
				return "", fmt.Errorf("unterminated label value in %q", line)
			}
			labels = append(labels, rest[:j+1])
			rest = rest[j+1:]
		}
	}
	val := strings.TrimPrefix(rest, " ")
	if strings.Contains(val, " ") {
		return "", fmt.Errorf("timestamp or junk after the value in %q", line)
	}
	v, err := strconv.ParseFloat(val, 64)
	if err != nil {
		return "", fmt.Errorf("bad value in %q: %v", line, err)
	}
	slices.Sort(labels)
	var b strings.Builder
	b.WriteString(name)
	if len(labels) > 0 {
		b.WriteString("{" + strings.Join(labels, ",") + "}")
	}
	b.WriteString(" " + strconv.FormatFloat(v, 'g', -1, 64))
	return b.String(), nil
}

// TestSeriesGolden pins the /metrics output of two arrays (one filled, one
// fresh), normalised, against testdata/series.golden: the same families
// with the same help texts and types, the same series and values. It was
// written against the hand-made exposition and must hold unchanged for any
// implementation behind Registry.
func TestSeriesGolden(t *testing.T) {
	r := NewRegistry()
	a := NewArray(r, "md0")
	clock := time.Unix(1700000000, 0)
	a.now = func() time.Time { return clock }
	fillArray(a)
	a.SetSync(SyncRecover, 0, 2000000)
	clock = clock.Add(4 * time.Second)
	a.SetSync(SyncRecover, 80000, 2000000)
	NewArray(r, "md1").SetState(StateClean)
	gone := NewArray(r, "md2")
	gone.SetState(StateActive)
	gone.Close()

	got, err := normaliseExposition(scrapeHTTP(t, r))
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "series.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < max(len(gl), len(wl)); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("series differ from %s at line %d:\n got: %s\nwant: %s", golden, i+1, g, w)
			}
		}
	}
}

// The normaliser must not hide differences in series, values, help or type.
func TestNormaliseExposition(t *testing.T) {
	base := "# HELP x X.\n# TYPE x gauge\nx{b=\"2\",a=\"1\"} 1e+06\n"
	n0, err := normaliseExposition(base)
	if err != nil {
		t.Fatal(err)
	}
	same := "# TYPE x gauge\n# HELP x X.\nx{a=\"1\",b=\"2\"} 1000000\n"
	if n, err := normaliseExposition(same); err != nil || n != n0 {
		t.Errorf("equivalent exposition normalised differently: %q vs %q (%v)", n, n0, err)
	}
	for _, diff := range []string{
		"# HELP x Y.\n# TYPE x gauge\nx{a=\"1\",b=\"2\"} 1000000\n",
		"# HELP x X.\n# TYPE x counter\nx{a=\"1\",b=\"2\"} 1000000\n",
		"# HELP x X.\n# TYPE x gauge\nx{a=\"1\",b=\"3\"} 1000000\n",
		"# HELP x X.\n# TYPE x gauge\nx{a=\"1\",b=\"2\"} 1000001\n",
		"# HELP x X.\n# TYPE x gauge\nx{a=\"1\"} 1000000\n",
	} {
		if n, err := normaliseExposition(diff); err == nil && n == n0 {
			t.Errorf("different exposition normalised the same: %q", diff)
		}
	}
}
