package cmd

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// mdadm selects a mode with an option (--create, -E, ...). mdtool has
// subcommands. translateMdadmArgs rewrites the first form into the second,
// so scripts written for mdadm run unchanged:
//
//	mdtool --create /dev/md0 -l10 -n4 ...   ->  create /dev/md0 -l10 -n4 ...
//	mdtool -Es                              ->  examine -s
//	mdtool /dev/md/data --fail /dev/loop1   ->  manage /dev/md/data --fail /dev/loop1
//	mdtool --action=check /dev/md0          ->  action --action=check /dev/md0

// longModes maps mdadm's mode-selecting long options to subcommands.
var longModes = map[string]string{
	"--create":            "create",
	"--build":             "build",
	"--assemble":          "assemble",
	"--examine":           "examine",
	"--examine-bitmap":    "examine-bitmap",
	"--examine-badblocks": "examine-badblocks",
	"--detail":            "detail",
	"--query":             "query",
	"--zero-superblock":   "zero-superblock",
	"--grow":              "grow",
	"--incremental":       "incremental",
	"--monitor":           "monitor",
	"--follow":            "monitor",
	"--stop":              "stop",
	"--wait":              "wait",
	"--manage":            "manage",
}

// shortModes maps mdadm's mode letters to subcommands.
var shortModes = map[byte]string{
	'C': "create",
	'B': "build",
	'A': "assemble",
	'E': "examine",
	'X': "examine-bitmap",
	'D': "detail",
	'Q': "query",
	'G': "grow",
	'I': "incremental",
	'F': "monitor",
	'S': "stop",
}

// argTable says which options take a value, as the cobra tree defines them
// (a flag without NoOptDefVal needs one): per subcommand, and for the
// options seen before a mode is known, the union over all commands. A name
// that takes a value in one command and none in another (-a is --auto for
// create but --add for manage, -b --bitmap or --brief, -r --remove or
// --increment) takes none until the mode says otherwise, as in mdadm's
// mode-less short_opts.
type argTable struct {
	byMode map[string]flagArgs
	any    flagArgs
}

// flagArgs maps long names and shorthands to whether they take a value.
type flagArgs struct {
	long  map[string]bool
	short map[byte]bool
}

func newFlagArgs() flagArgs {
	return flagArgs{long: map[string]bool{}, short: map[byte]bool{}}
}

func newArgTable(root *cobra.Command) *argTable {
	t := &argTable{byMode: map[string]flagArgs{}, any: newFlagArgs()}
	conflict := flagArgs{long: map[string]bool{}, short: map[byte]bool{}}
	add := func(fa flagArgs, f *pflag.Flag) {
		takes := f.NoOptDefVal == ""
		fa.long[f.Name] = takes
		if len(f.Shorthand) == 1 {
			fa.short[f.Shorthand[0]] = takes
		}
		if old, ok := t.any.long[f.Name]; ok && old != takes {
			conflict.long[f.Name] = true
		}
		t.any.long[f.Name] = takes
		if len(f.Shorthand) == 1 {
			c := f.Shorthand[0]
			if old, ok := t.any.short[c]; ok && old != takes {
				conflict.short[c] = true
			}
			t.any.short[c] = takes
		}
	}
	root.InitDefaultHelpFlag()
	root.LocalFlags().VisitAll(func(f *pflag.Flag) { add(t.any, f) })
	for _, c := range root.Commands() {
		c.InitDefaultHelpFlag()
		fa := newFlagArgs()
		c.LocalFlags().VisitAll(func(f *pflag.Flag) { add(fa, f) })
		c.InheritedFlags().VisitAll(func(f *pflag.Flag) { add(fa, f) })
		t.byMode[c.Name()] = fa
	}
	for n := range conflict.long {
		t.any.long[n] = false
	}
	for c := range conflict.short {
		t.any.short[c] = false
	}
	return t
}

// table returns the options of mode, or the mode-less union.
func (t *argTable) table(mode string) flagArgs {
	if fa, ok := t.byMode[mode]; ok {
		return fa
	}
	return t.any
}

// longTakesArg reports whether --name takes a value in mode ("" before a
// mode is known). A name the mode does not know is looked up in the union.
func (t *argTable) longTakesArg(mode, name string) bool {
	if v, ok := t.table(mode).long[name]; ok {
		return v
	}
	return t.any.long[name]
}

// shortTakesArg is longTakesArg for a shorthand letter.
func (t *argTable) shortTakesArg(mode string, c byte) bool {
	if v, ok := t.table(mode).short[c]; ok {
		return v
	}
	return t.any.short[c]
}

// manageOpts are options that make "DEVICE --opt ..." a manage command.
var manageOpts = map[string]bool{
	"--add": true, "--re-add": true, "--add-spare": true, "--add-journal": true,
	"--remove": true, "--fail": true, "--set-faulty": true, "--replace": true,
	"--with": true, "-a": true, "-r": true, "-f": true,
}

func isSubcommand(s string) bool {
	switch s {
	case "help", "completion", "__complete", "__completeNoDesc":
		return true
	}
	for _, v := range longModes {
		if v == s {
			return true
		}
	}
	return s == "gendocs" || s == "misc" || s == "action" || s == "readonly" || s == "readwrite" || s == "run"
}

// translateMdadmArgs rewrites args; root's flags say which options take a
// value (that value is never a mode option).
func translateMdadmArgs(root *cobra.Command, args []string) []string {
	if len(args) == 0 || isSubcommand(args[0]) {
		return args
	}
	withArg := newArgTable(root)
	mode := ""
	out := make([]string, 0, len(args)+1)
	skipValue := false
	dropValue := false // the value of mdadm 4.2's -r (mdadm_remove42.go)
	misc := false
	for i, a := range args {
		if skipValue {
			skipValue = false
			out = append(out, a)
			continue
		}
		if dropValue {
			dropValue = false
			continue
		}
		if a == "--" {
			out = append(out, args[i:]...)
			break
		}
		if m, ok := roModes[a]; ok && mode == "" && i == 0 {
			mode = m // mdadm -o MD, -w MD (misc mode)
			continue
		}
		if (a == "-R" || a == "--run") && mode == "" && i == 0 && len(args) > 1 && !strings.HasPrefix(args[1], "-") {
			mode = "run" // mdadm -R MD: Manage_run
			continue
		}
		if (mode == "" || mode == "manage") && shortRemove42(a) {
			if mode == "" && i == 0 {
				mode = "manage"
			}
			var r string
			r, dropValue = translateRemove42(args, i)
			out = append(out, r)
			continue
		}
		if mode == "" && i == 0 && manageOpts[a] {
			// mdadm -r /dev/md0 /dev/sdb: a manage operation as the
			// first option sets manage mode; the md device follows.
			mode = "manage"
			out = append(out, a)
			continue
		}
		if strings.HasPrefix(a, "--") {
			name, _, hasVal := strings.Cut(a[2:], "=")
			if mode == "" && !hasVal {
				name = withArg.longModePrefix(name)
			}
			if m, ok := longModes["--"+name]; ok && mode == "" && !hasVal {
				mode = m
				continue
			}
			if name == "misc" {
				misc = true
				continue
			}
			if name == "action" && mode == "" {
				// --action=check is a misc-mode option that is the
				// mode: mdtool action --action=check MD.
				mode = "action"
			}
			if name == "version" {
				out = append(out, a)
				continue
			}
			if !hasVal && withArg.longTakesArg(mode, name) {
				skipValue = true
			}
			out = append(out, a)
			continue
		}
		if a == "-W" && mode == "" && i == 0 {
			// -W is --wait in misc mode, but --write-mostly after a
			// manage operation.
			mode = "wait"
			continue
		}
		if len(a) >= 2 && a[0] == '-' {
			// A cluster of short options, e.g. -Es, -l10, -n4.
			if m, ok := shortModes[a[1]]; ok && mode == "" {
				mode = m
				rest := a[2:]
				if rest != "" {
					out = append(out, "-"+rest)
					if withArg.shortTakesArg(mode, rest[len(rest)-1]) {
						skipValue = true
					}
				}
				continue
			}
			if a == "-V" {
				out = append(out, "--version")
				continue
			}
			if len(a) == 2 && withArg.shortTakesArg(mode, a[1]) {
				skipValue = true
			}
			out = append(out, a)
			continue
		}
		out = append(out, a)
	}
	if mode == "" {
		// "mdtool /dev/mdX --fail /dev/sdb" is manage mode in mdadm.
		// Switches without a value may come first: mdadm -q /dev/md0 --fail X.
		first := 0
		for first < len(args)-1 && quietOrVerbose(args[first]) {
			first++
		}
		if !misc && len(args) > first+1 && !strings.HasPrefix(args[first], "-") {
			for _, a := range args[first+1:] {
				name, _, _ := strings.Cut(a, "=")
				if manageOpts[name] || shortRemove42(a) {
					mode = "manage"
					break
				}
			}
		}
	}
	if mode == "" {
		return out
	}
	return append([]string{mode}, out...)
}

// expandLongPrefixes lets unambiguous prefixes of long options stand for
// the option, as getopt_long (and so mdadm) allows: --raid-dev=4.
func expandLongPrefixes(root *cobra.Command, args []string) []string {
	sub, _, err := root.Find(args)
	if err != nil || sub == nil {
		return args
	}
	names := map[string]bool{}
	collect := func(fs *pflag.FlagSet) {
		fs.VisitAll(func(f *pflag.Flag) { names[f.Name] = true })
	}
	collect(sub.Flags())
	collect(sub.InheritedFlags())
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if a == "--" {
			copy(out[i:], args[i:])
			break
		}
		if !strings.HasPrefix(a, "--") || len(a) < 4 {
			continue
		}
		name, val, hasVal := strings.Cut(a[2:], "=")
		if names[name] {
			continue
		}
		match := ""
		n := 0
		for cand := range names {
			if strings.HasPrefix(cand, name) {
				match = cand
				n++
			}
		}
		if n == 1 {
			out[i] = "--" + match
			if hasVal {
				out[i] += "=" + val
			}
		}
	}
	return out
}
