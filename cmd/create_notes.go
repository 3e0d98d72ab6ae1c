package cmd

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"mdtool/internal/mdadm/plan"
	"mdtool/superblock"
)

// verbosityOf is mdadm's c->verbose: -1 with --quiet, 1 with --verbose,
// 0 otherwise.
func verbosityOf(c *cobra.Command) int {
	if q, _ := c.Flags().GetBool("quiet"); q {
		return -1
	}
	if v, _ := c.Flags().GetBool("verbose"); v {
		return 1
	}
	return 0
}

// printGeometryNotes prints what mdadm 4.2's Create prints with --verbose
// about the defaults it chose, before it looks at the members: the
// layout (twice when no -e was given: once before a metadata type is
// chosen, once for the chosen type), then the chunk size.
func printGeometryNotes(w io.Writer, o *createOptions, res *plan.Result) {
	if o.verbosity <= 0 {
		return
	}
	if o.layout == "" {
		name := ""
		switch res.Level {
		case superblock.LevelRAID10:
			name = "n2"
		case superblock.LevelRAID5, superblock.LevelRAID6:
			name = res.LayoutName
		}
		if name != "" {
			times := 1
			if res.DefaultedMetadata {
				times = 2
			}
			for i := 0; i < times; i++ {
				fmt.Fprintf(w, "mdtool: layout defaults to %s\n", name)
			}
		}
	}
	if o.chunk == "" && res.ChunkKiB != 0 {
		switch res.Level {
		case superblock.LevelRAID0, superblock.LevelRAID4, superblock.LevelRAID5, superblock.LevelRAID6, superblock.LevelRAID10:
			fmt.Fprintf(w, "mdtool: chunk size defaults to %dK\n", res.ChunkKiB)
		}
	}
}

// printSizeNotes prints mdadm 4.2's --verbose notes after the members
// were checked: the component size it chose (levels with redundancy,
// no --size), the bitmap it added by itself, and, when it warned about
// the members (warned) under --run, that it goes on anyway.
func printSizeNotes(w io.Writer, o *createOptions, res *plan.Result, warned bool) {
	if o.verbosity <= 0 {
		return
	}
	if o.size == "" && res.Level > superblock.LevelRAID0 {
		fmt.Fprintf(w, "mdtool: size set to %dK\n", res.ComponentSectors/2)
	}
	if res.AutoBitmap {
		fmt.Fprintln(w, "mdtool: automatically enabling write-intent bitmap on large array")
	}
	if warned && o.run {
		fmt.Fprintln(w, "mdtool: creation continuing despite oddities due to --run")
	}
}

// showCreateWarnings says whether mdadm would print its notes about the
// members: it skips those checks with --run --quiet.
func showCreateWarnings(o *createOptions) bool {
	return !o.run || o.verbosity >= 0
}

// createdName is the device mdadm 4.2's create_mddev chooses for the md
// device named on the command line: a name that is not a path ("data")
// is /dev/md/data; mdadm prints it ("array /dev/md/data started.") and
// records it, so that --detail --export shows MD_DEVNAME=data.
func createdName(mddev string) string {
	if mddev == "" || strings.HasPrefix(mddev, "/") {
		return mddev
	}
	return "/dev/md/" + mddev
}

// quietEnv is env with its stderr discarded under --quiet, for commands
// whose every message mdadm gates on verbose >= 0.
func quietEnv(c *cobra.Command, env *Env) *Env {
	if verbosityOf(c) >= 0 {
		return env
	}
	e := *env
	e.Stderr = io.Discard
	return &e
}

// quietOrVerbose says whether a is -q, -v (or a cluster of them) or their
// long forms: switches mdadm takes before the md device of a manage
// command.
func quietOrVerbose(a string) bool {
	switch a {
	case "--quiet", "--verbose":
		return true
	}
	return len(a) > 1 && a[0] == '-' && strings.Trim(a[1:], "qv") == ""
}
