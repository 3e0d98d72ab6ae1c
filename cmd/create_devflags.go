package cmd

import (
	"fmt"

	"github.com/spf13/pflag"

	"mdtool/internal/mdadm/plan"
)

// mdadm's per-device modes in --create: --write-mostly (-W) and
// --failfast mark the devices after them on the command line, --nofailfast
// ends --failfast. pflag reads the command line in order, so a mark
// records how many positional arguments (the md device, then the devices)
// came before it.

type devMark struct {
	pos  int  // positional arguments before the flag
	kind byte // 'W' write-mostly, 'F' failfast
	on   bool
}

type devMarkFlag struct {
	fs    *pflag.FlagSet
	marks *[]devMark
	kind  byte
	on    bool
}

func (f *devMarkFlag) Set(string) error {
	*f.marks = append(*f.marks, devMark{pos: len(f.fs.Args()), kind: f.kind, on: f.on})
	return nil
}
func (f *devMarkFlag) String() string { return "false" }
func (f *devMarkFlag) Type() string   { return "bool" }

// addDevMarkFlags adds --write-mostly, --failfast and --nofailfast.
func addDevMarkFlags(fs *pflag.FlagSet, marks *[]devMark) {
	add := func(name, short string, kind byte, on bool, usage string) {
		fl := fs.VarPF(&devMarkFlag{fs: fs, marks: marks, kind: kind, on: on}, name, short, usage)
		fl.NoOptDefVal = "true"
	}
	add("write-mostly", "W", 'W', true, "the devices after this are write-mostly (raid1: read only when no other member can serve)")
	add("failfast", "", 'F', true, "the devices after this are failfast (raid1/raid10: a failed request fails the member at once)")
	add("nofailfast", "", 'F', false, "the devices after this are not failfast")
}

// applyDevMarks sets the flags of devs (positional arguments 1...) from
// the marks before them.
func applyDevMarks(devs []plan.Device, marks []devMark) {
	for i := range devs {
		for _, m := range marks {
			if m.pos > i+1 {
				break
			}
			switch m.kind {
			case 'W':
				devs[i].WriteMostly = m.on
			case 'F':
				devs[i].FailFast = m.on
			}
		}
	}
}

// writeBehindValue is mdadm.c's --write-behind: a number of outstanding
// writes, 0 to 16383 (mdadm 4.2 parses the missing value of a bare
// --write-behind too, and refuses it as "(null)").
func writeBehindValue(v string, given bool) (uint32, error) {
	if !given {
		return 0, nil
	}
	var n int
	if _, err := fmt.Sscanf(v, "%d", &n); err != nil || v == "" || fmt.Sprint(n) != v || n < 0 || n > 16383 {
		if v == "" {
			v = "(null)"
		}
		return 0, usagef("Invalid value for maximum outstanding write-behind writes: %s.\n\tMust be between 0 and 16383.", v)
	}
	return uint32(n), nil
}
