package metrics

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// A small, strict parser of the text exposition format 0.0.4, used to check
// what the registry writes.

type sample struct {
	name   string
	labels map[string]string
	value  float64
}

type parsedFamily struct {
	name, help, typ string
	samples         []sample
}

var (
	reMetricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	reLabelName  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	reHelp       = regexp.MustCompile(`^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) ((?:[^\\\n]|\\\\|\\n)*)$`)
	reType       = regexp.MustCompile(`^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$`)
)

// parseExposition parses text strictly: every line is HELP, TYPE or a sample;
// HELP and TYPE come once per family, before its samples; a family's
// samples are contiguous; sample names match the family type; no sample is
// repeated; values parse as floats.
func parseExposition(text string) (map[string]*parsedFamily, []string, error) {
	if text != "" && !strings.HasSuffix(text, "\n") {
		return nil, nil, fmt.Errorf("output does not end in a newline")
	}
	fams := map[string]*parsedFamily{}
	var order []string
	var cur *parsedFamily
	closed := map[string]bool{}
	seen := map[string]bool{}
	get := func(name string) (*parsedFamily, error) {
		if cur != nil && cur.name == name {
			return cur, nil
		}
		if closed[name] {
			return nil, fmt.Errorf("family %s is not contiguous", name)
		}
		if cur != nil {
			closed[cur.name] = true
		}
		if fams[name] == nil {
			fams[name] = &parsedFamily{name: name}
			order = append(order, name)
		}
		cur = fams[name]
		return cur, nil
	}
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		errf := func(format string, a ...any) error {
			return fmt.Errorf("line %d %q: %s", i+1, line, fmt.Sprintf(format, a...))
		}
		switch {
		case strings.HasPrefix(line, "# HELP "):
			m := reHelp.FindStringSubmatch(line)
			if m == nil {
				return nil, nil, errf("bad HELP")
			}
			f, err := get(m[1])
			if err != nil {
				return nil, nil, errf("%v", err)
			}
			if f.help != "" || len(f.samples) > 0 {
				return nil, nil, errf("HELP repeated or after samples")
			}
			f.help = strings.NewReplacer(`\\`, `\`, `\n`, "\n").Replace(m[2])
		case strings.HasPrefix(line, "# TYPE "):
			m := reType.FindStringSubmatch(line)
			if m == nil {
				return nil, nil, errf("bad TYPE")
			}
			f, err := get(m[1])
			if err != nil {
				return nil, nil, errf("%v", err)
			}
			if f.typ != "" || len(f.samples) > 0 {
				return nil, nil, errf("TYPE repeated or after samples")
			}
			f.typ = m[2]
		case strings.HasPrefix(line, "#") || line == "":
			return nil, nil, errf("unexpected comment or empty line")
		default:
			s, err := parseSample(line)
			if err != nil {
				return nil, nil, errf("%v", err)
			}
			fam := s.name
			if cur != nil && cur.typ == "histogram" {
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					if s.name == cur.name+suf {
						fam = cur.name
					}
				}
			}
			f, err := get(fam)
			if err != nil {
				return nil, nil, errf("%v", err)
			}
			if f.typ == "" {
				return nil, nil, errf("sample before TYPE")
			}
			if f.typ == "histogram" && fam == s.name {
				return nil, nil, errf("histogram sample without _bucket/_sum/_count")
			}
			if f.typ == "histogram" && strings.HasSuffix(s.name, "_bucket") != (s.labels["le"] != "") {
				return nil, nil, errf("le label only and always on _bucket")
			}
			if f.typ == "counter" && (s.value < 0 || math.IsNaN(s.value)) {
				return nil, nil, errf("negative counter")
			}
			key := s.name + "{" + labelKey(s.labels, "") + "}"
			if seen[key] {
				return nil, nil, errf("duplicate sample")
			}
			seen[key] = true
			f.samples = append(f.samples, s)
		}
	}
	return fams, order, nil
}

func parseSample(line string) (sample, error) {
	s := sample{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, fmt.Errorf("no value")
	}
	s.name = line[:i]
	if !reMetricName.MatchString(s.name) {
		return s, fmt.Errorf("bad metric name")
	}
	rest := line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.Index(rest, `="`)
			if eq < 0 {
				return s, fmt.Errorf("bad label")
			}
			name := rest[:eq]
			if !reLabelName.MatchString(name) {
				return s, fmt.Errorf("bad label name %q", name)
			}
			if _, dup := s.labels[name]; dup {
				return s, fmt.Errorf("duplicate label %q", name)
			}
			rest = rest[eq+2:]
			var v strings.Builder
			for {
				if rest == "" {
					return s, fmt.Errorf("unterminated label value")
				}
				c := rest[0]
				rest = rest[1:]
				if c == '"' {
					break
				}
				if c == '\n' {
					return s, fmt.Errorf("raw newline in label value")
				}
				if c == '\\' {
					if rest == "" {
						return s, fmt.Errorf("bad escape")
					}
					switch rest[0] {
					case '\\':
						v.WriteByte('\\')
					case '"':
						v.WriteByte('"')
					case 'n':
						v.WriteByte('\n')
					default:
						return s, fmt.Errorf("bad escape \\%c", rest[0])
					}
					rest = rest[1:]
					continue
				}
				v.WriteByte(c)
			}
			s.labels[name] = v.String()
			if strings.HasPrefix(rest, ",") {
				rest = rest[1:]
			} else if !strings.HasPrefix(rest, "}") {
				return s, fmt.Errorf("expected , or }")
			}
		}
	}
	if !strings.HasPrefix(rest, " ") {
		return s, fmt.Errorf("no space before value")
	}
	fields := strings.Split(rest[1:], " ")
	if len(fields) > 2 || fields[0] == "" {
		return s, fmt.Errorf("bad value/timestamp")
	}
	v, err := parseValue(fields[0])
	if err != nil {
		return s, err
	}
	s.value = v
	if len(fields) == 2 {
		if _, err := strconv.ParseInt(fields[1], 10, 64); err != nil {
			return s, fmt.Errorf("bad timestamp")
		}
	}
	return s, nil
}

func parseValue(v string) (float64, error) {
	switch v {
	case "+Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	case "NaN":
		return math.NaN(), nil
	}
	if strings.ContainsAny(v, "_xXpP") || strings.EqualFold(v, "inf") || strings.EqualFold(v, "infinity") {
		return 0, fmt.Errorf("non-Prometheus float %q", v)
	}
	return strconv.ParseFloat(v, 64)
}

// labelKey renders labels (without `skip`) sorted, for grouping.
func labelKey(l map[string]string, skip string) string {
	var keys []string
	for k := range l {
		if k != skip {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", k, l[k])
	}
	return b.String()
}

// checkHistograms verifies every histogram child: le ascending and ending in
// +Inf, counts cumulative, +Inf equal to _count, _sum present.
func checkHistograms(fams map[string]*parsedFamily) error {
	for _, f := range fams {
		if f.typ != "histogram" {
			continue
		}
		type child struct {
			les, counts   []float64
			count         float64
			hasSum, hasCt bool
		}
		children := map[string]*child{}
		var order []string
		for _, s := range f.samples {
			k := labelKey(s.labels, "le")
			c := children[k]
			if c == nil {
				c = &child{}
				children[k] = c
				order = append(order, k)
			}
			switch s.name {
			case f.name + "_bucket":
				le, err := parseValue(s.labels["le"])
				if err != nil {
					return fmt.Errorf("%s{%s}: le %q: %v", f.name, k, s.labels["le"], err)
				}
				c.les = append(c.les, le)
				c.counts = append(c.counts, s.value)
			case f.name + "_sum":
				c.hasSum = true
			case f.name + "_count":
				c.hasCt = true
				c.count = s.value
			}
		}
		for _, k := range order {
			c := children[k]
			if len(c.les) == 0 || !math.IsInf(c.les[len(c.les)-1], 1) {
				return fmt.Errorf("%s{%s}: no +Inf bucket", f.name, k)
			}
			for i := 1; i < len(c.les); i++ {
				if !(c.les[i] > c.les[i-1]) {
					return fmt.Errorf("%s{%s}: le not ascending", f.name, k)
				}
				if c.counts[i] < c.counts[i-1] {
					return fmt.Errorf("%s{%s}: buckets not cumulative at le=%v", f.name, k, c.les[i])
				}
			}
			if !c.hasSum || !c.hasCt {
				return fmt.Errorf("%s{%s}: missing _sum or _count", f.name, k)
			}
			if c.counts[len(c.counts)-1] != c.count {
				return fmt.Errorf("%s{%s}: +Inf bucket %v != _count %v", f.name, k, c.counts[len(c.counts)-1], c.count)
			}
		}
	}
	return nil
}

// value finds the sample with the given name and labels.
func value(fams map[string]*parsedFamily, name string, labels map[string]string) (float64, bool) {
	want := labelKey(labels, "")
	for _, f := range fams {
		for _, s := range f.samples {
			if s.name == name && labelKey(s.labels, "") == want {
				return s.value, true
			}
		}
	}
	return 0, false
}
