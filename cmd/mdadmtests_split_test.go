package cmd

import "testing"

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
