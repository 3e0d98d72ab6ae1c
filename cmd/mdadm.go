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

// shortWithArg lists mdadm's short options that take a value
// (short_opts in mdadm's ReadMe.c).
const shortWithArg = "Zcilpmnxudz UNek"

// longWithArg lists mdadm's long options that take a value.
var longWithArg = map[string]bool{
	"chunk": true, "rounding": true, "level": true, "parity": true, "layout": true,
	"raid-disks": true, "raid-devices": true, "spare-disks": true, "spare-devices": true,
	"size": true, "auto": true, "metadata": true, "bitmap": true, "bitmap-chunk": true,
	"homehost": true, "symlinks": true, "data-offset": true, "nodes": true,
	"home-cluster": true, "write-journal": true, "consistency-policy": true, "uuid": true,
	"super-minor": true, "name": true, "config": true, "update": true, "action": true,
	"prefer": true, "mail": true, "program": true, "alert": true, "increment": true,
	"delay": true, "pid-file": true, "backup-file": true, "array-size": true, "path": true,
	"kill-subarray": true, "update-subarray": true, "dump": true, "restore": true,
	"run-dir": true, "nbd-socket": true, "nbd-listen": true, "fuse": true, "metrics": true,
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
	return s == "gendocs" || s == "misc" || s == "action"
}

func translateMdadmArgs(args []string) []string {
	if len(args) == 0 || isSubcommand(args[0]) {
		return args
	}
	mode := ""
	out := make([]string, 0, len(args)+1)
	skipValue := false
	misc := false
	for i, a := range args {
		if skipValue {
			skipValue = false
			out = append(out, a)
			continue
		}
		if a == "--" {
			out = append(out, args[i:]...)
			break
		}
		if strings.HasPrefix(a, "--") {
			name, _, hasVal := strings.Cut(a[2:], "=")
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
			if !hasVal && longWithArg[name] {
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
					if strings.IndexByte(shortWithArg, rest[len(rest)-1]) >= 0 {
						skipValue = true
					}
				}
				continue
			}
			if a == "-V" {
				out = append(out, "--version")
				continue
			}
			if len(a) == 2 && strings.IndexByte(shortWithArg, a[1]) >= 0 {
				skipValue = true
			}
			out = append(out, a)
			continue
		}
		out = append(out, a)
	}
	if mode == "" {
		// "mdtool /dev/mdX --fail /dev/sdb" is manage mode in mdadm.
		if !misc && len(args) > 1 && !strings.HasPrefix(args[0], "-") {
			for _, a := range args[1:] {
				name, _, _ := strings.Cut(a, "=")
				if manageOpts[name] {
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
