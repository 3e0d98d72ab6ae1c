package cmd

import (
	"strings"
	"testing"
)

// TestMdadmSplitByCost: every entry of the table lands in exactly one
// part, in the table's order, and the parts' guest costs differ by no
// more than the costliest entry.
func TestMdadmSplitByCost(t *testing.T) {
	parts := splitByCost(mdadmTests)
	cost := func(name string) int {
		if n, ok := mdadmGuestCost[name]; ok {
			return n
		}
		return 20
	}
	pos := map[string]int{}
	maxCost := 0
	for i, c := range mdadmTests {
		pos[c.name] = i
		maxCost = max(maxCost, cost(c.name))
	}
	seen := map[string]bool{}
	var sum [2]int
	for p, part := range parts {
		last := -1
		for _, c := range part {
			if seen[c.name] {
				t.Errorf("%s in both parts", c.name)
			}
			seen[c.name] = true
			if pos[c.name] < last {
				t.Errorf("part%d: %s out of the table's order", p+1, c.name)
			}
			last = pos[c.name]
			sum[p] += cost(c.name)
		}
	}
	if len(seen) != len(mdadmTests) {
		t.Errorf("%d of %d entries placed", len(seen), len(mdadmTests))
	}
	if d := sum[0] - sum[1]; d > maxCost || -d > maxCost {
		t.Errorf("parts cost %d and %d s (costliest entry %d s)", sum[0], sum[1], maxCost)
	}
	t.Logf("parts: %d entries, %d s; %d entries, %d s", len(parts[0]), sum[0], len(parts[1]), sum[1])
	for name := range mdadmGuestCost {
		if _, ok := pos[name]; !ok {
			t.Errorf("mdadmGuestCost names %s, which is not in the table", name)
		}
	}
}

// TestMdadmRaid6IntegLayouts: the entries running 01raid6integ's
// translation take every one of mdadm's 13 raid6 layouts, each once.
func TestMdadmRaid6IntegLayouts(t *testing.T) {
	want := strings.Fields("ls rs la ra parity-first ddf-zero-restart ddf-N-restart ddf-N-continue " +
		"left-asymmetric-6 right-asymmetric-6 left-symmetric-6 right-symmetric-6 parity-first-6")
	seen := map[string]int{}
	for _, c := range mdadmTests {
		if c.scriptName() != "01raid6integ" {
			continue
		}
		for _, v := range c.vars {
			if l, ok := strings.CutPrefix(v, "layouts="); ok {
				for _, f := range strings.Fields(l) {
					seen[f]++
				}
			}
		}
	}
	for _, l := range want {
		if seen[l] != 1 {
			t.Errorf("layout %s is run %d times, want once", l, seen[l])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("layouts run: %v, want %v", seen, want)
	}
}
