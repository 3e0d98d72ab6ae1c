package engine

import (
	"fmt"
	"strings"
	"testing"
)

// TestTakeSparesInKernelOrder: md's remove_and_add_spares offers roles to
// the spare added last first; each takes its saved role when free, else
// the lowest free role.
func TestTakeSparesInKernelOrder(t *testing.T) {
	type sp struct{ index, saved int }
	cases := []struct {
		name   string
		spares []sp // in add order
		holes  []int
		want   string // index:role for each spare that got one, in take order
	}{
		{"two fresh spares", []sp{{4, -1}, {5, -1}}, []int{1, 2, 3}, "5:1 4:2"},
		{"one hole", []sp{{4, -1}, {5, -1}}, []int{3}, "5:3"},
		{"re-add keeps its role", []sp{{4, 2}, {5, -1}}, []int{1, 2}, "5:1 4:2(guided)"},
		{"newer fresh spare takes the lowest role first", []sp{{4, 1}, {5, -1}}, []int{1, 2}, "5:1 4:2"},
		{"no hole", []sp{{4, -1}}, nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var spares []*member
			for _, s := range tc.spares {
				spares = append(spares, &member{index: s.index, role: -1, savedRole: s.saved})
			}
			free := map[int]bool{}
			for _, r := range tc.holes {
				free[r] = true
			}
			var got []string
			takeSparesInKernelOrder(spares, tc.holes, free, func(r int, m *member, guided bool) {
				s := fmt.Sprintf("%d:%d", m.index, r)
				if guided {
					s += "(guided)"
				}
				got = append(got, s)
			})
			if g := fmt.Sprint(got); g != fmt.Sprint(strings.Fields(tc.want)) {
				t.Errorf("took %s, want %s", g, tc.want)
			}
		})
	}
}
