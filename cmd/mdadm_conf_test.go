package cmd

import (
	"strings"
	"testing"
)

func parseConf(t *testing.T, text string) *MdadmConf {
	t.Helper()
	c := &MdadmConf{}
	c.Parse("test.conf", strings.NewReader(text))
	return c
}

func TestResolveHomeHost(t *testing.T) {
	sys := func() (string, error) { return "sysname", nil }
	conf := func(text string) *MdadmConf { return parseConf(t, text) }
	for _, c := range []struct {
		name  string
		flag  string
		given bool
		conf  *MdadmConf
		want  string
	}{
		{"default", "", false, nil, "sysname"},
		{"flag", "h", true, conf("HOMEHOST c\n"), "h"},
		{"flag none", "<none>", true, nil, ""},
		{"flag empty", "", true, conf("HOMEHOST c\n"), ""},
		{"flag system", "<SYSTEM>", true, nil, "sysname"},
		{"flag ignore skips conf", "<ignore>", true, conf("HOMEHOST c\n"), "sysname"},
		{"conf", "", false, conf("HOMEHOST c\n"), "c"},
		{"conf none", "", false, conf("HOMEHOST <none>\n"), ""},
		{"conf system", "", false, conf("HOMEHOST <system>\n"), "sysname"},
		{"conf ignore and name", "", false, conf("HOMEHOST <ignore> c\n"), "c"},
		{"conf ignore only", "", false, conf("HOMEHOST <ignore>\n"), "sysname"},
	} {
		if got := ResolveHomeHost(c.flag, c.given, c.conf, sys); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}
