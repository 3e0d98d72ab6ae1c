package plan

import (
	"errors"
	"strings"
	"testing"
)

// TestResolveHomehostSources checks mdadm 4.2's order: --homehost, then
// mdadm.conf's HOMEHOST (skipped by --homehost=<ignore>), then the host
// name; "" and <none> mean none.
func TestResolveHomehostSources(t *testing.T) {
	word := func(s string) *string { return &s }
	sys := func() (string, error) { return "sysname", nil }
	for _, c := range []struct {
		name  string
		flag  string
		given bool
		conf  *string
		host  func() (string, error)
		want  string
	}{
		{"default", "", false, nil, sys, "sysname"},
		{"flag wins", "h", true, word("c"), sys, "h"},
		{"flag none", "<None>", true, word("c"), sys, ""},
		{"flag empty", "", true, word("c"), sys, ""},
		{"flag system", "<SYSTEM>", true, word("c"), sys, "sysname"},
		{"flag ignore skips conf", "<ignore>", true, word("c"), sys, "sysname"},
		{"conf", "", false, word("c"), sys, "c"},
		{"conf none", "", false, word(""), sys, ""},
		{"conf system", "", false, word("<system>"), sys, "sysname"},
		{"flag any", "any", true, nil, sys, "any"},
		{"no hostname", "", false, nil, func() (string, error) { return "", errors.New("x") }, ""},
		{"long hostname", "", false, nil, func() (string, error) { return strings.Repeat("h", 300), nil }, strings.Repeat("h", 255)},
	} {
		if got := ResolveHomehost(c.flag, c.given, c.conf, c.host); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}
