package cmd

import (
	"fmt"

	"github.com/spf13/pflag"
)

// --write-journal DEV: mdadm puts the journal into the device list where
// the option stands (its dev_number follows from that place), so the flag
// records how many positional arguments (the md device, then devices)
// came before it.
type journalMark struct {
	path   string
	pos    int
	extras []string // later --write-journal values (mdadm ignores them)
}

type journalFlag struct {
	fs *pflag.FlagSet
	m  *journalMark
}

func (f *journalFlag) Set(v string) error {
	if f.m.path != "" {
		f.m.extras = append(f.m.extras, v) // the first one stays
		return nil
	}
	f.m.path, f.m.pos = v, len(f.fs.Args())
	return nil
}

// warnExtras prints mdadm.c's words for each --write-journal after the
// first.
func (m *journalMark) warnExtras(env *Env) {
	for _, x := range m.extras {
		fmt.Fprintf(env.Stderr, "mdtool: Please specify only one journal device for the array.\nmdtool: Ignoring --write-journal %s...\n", x)
	}
}
func (f *journalFlag) String() string { return f.m.path }
func (f *journalFlag) Type() string   { return "string" }

// insert returns devs with the journal in its place, and that index (-1:
// no journal).
func (m *journalMark) insert(devs []string) ([]string, int) {
	if m.path == "" {
		return devs, -1
	}
	at := m.pos - 1 // the md device came first
	if at < 0 {
		at = 0
	}
	if at > len(devs) {
		at = len(devs)
	}
	out := append(append(append([]string(nil), devs[:at]...), m.path), devs[at:]...)
	return out, at
}
