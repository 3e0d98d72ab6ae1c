package cmd

import "github.com/spf13/pflag"

// --write-journal DEV: mdadm puts the journal into the device list where
// the option stands (its dev_number follows from that place), so the flag
// records how many positional arguments (the md device, then devices)
// came before it.
type journalMark struct {
	path string
	pos  int
	n    int // times given
}

type journalFlag struct {
	fs *pflag.FlagSet
	m  *journalMark
}

func (f *journalFlag) Set(v string) error {
	f.m.n++
	if f.m.n > 1 {
		// mdadm.c: "Please specify only one journal device for the
		// array." and "Ignoring --write-journal DEV...": the first one
		// stays.
		return nil
	}
	f.m.path, f.m.pos = v, len(f.fs.Args())
	return nil
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
