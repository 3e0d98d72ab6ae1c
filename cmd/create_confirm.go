package cmd

import (
	"fmt"
	"io"

	"mdtool/internal/mdadm/member"
	"mdtool/internal/mdadm/plan"
	sigprobe "mdtool/internal/mdadm/probe"
)

// warnOldContents is mdadm 4.2's Create check of every member (in the
// order given): check_ext2, check_reiser, check_raid and, for metadata
// 1.1/1.2, check_partitions, each printed in mdadm's words. afterFirst
// runs after the first device's checks (where mdadm prints its boot
// note). It reports whether any check found something (mdadm's warn).
// With --run and --quiet mdadm runs none of them.
func warnOldContents(w io.Writer, o *createOptions, res *plan.Result, members []*member.Member, afterFirst func()) (bool, error) {
	warn, first := false, true
	for _, m := range members {
		if m == nil {
			continue
		}
		if !o.run || !o.quiet {
			fs, err := sigprobe.CreateChecks(m, int64(m.Geom.Size), res.Minor)
			if err != nil {
				return false, exitf(ExitFailure, "cannot read %s: %v", m.Path, err)
			}
			for _, f := range fs {
				fmt.Fprint(w, createFindingText(m.Path, f))
				warn = true
			}
		}
		if first {
			afterFirst()
			first = false
		}
	}
	return warn, nil
}

// createFindingText words one finding as mdadm 4.2's util.c does
// (continuation lines indented by cont_err's seven spaces; ctime's
// trailing newline included).
func createFindingText(dev string, f sigprobe.CreateFinding) string {
	switch f.Kind {
	case sigprobe.FoundExt2:
		return fmt.Sprintf("mdtool: %s appears to contain an ext2fs file system\n       size=%dK  mtime=%s\n", dev, f.SizeKiB, ctime24(f.Time))
	case sigprobe.FoundReiser:
		return fmt.Sprintf("mdtool: %s appears to contain a reiserfs file system\n       size = %dK\n", dev, f.SizeKiB)
	case sigprobe.FoundRAID:
		level, ok := plan.MapNum(plan.PersTable, int(f.Level))
		if !ok {
			level = "-unknown-"
		}
		return fmt.Sprintf("mdtool: %s appears to be part of a raid array:\n       level=%s devices=%d ctime=%s\n", dev, level, f.RaidDisks, ctime24(f.Time))
	case sigprobe.FoundPartitionTable:
		return fmt.Sprintf("mdtool: partition table exists on %s\n", dev)
	case sigprobe.FoundPartitionsLost:
		return fmt.Sprintf("mdtool: partition table exists on %s but will be lost or\n       meaningless after creating array\n", dev)
	}
	return fmt.Sprintf("mdtool: %s: finding %d\n", dev, f.Kind)
}

// confirmCreateMdadm is mdadm 4.2's Create between the device checks and
// the writes: the old-contents warnings (device by device; the boot note
// after the first device's), the plan's other warnings, then "Continue
// creating array?" unless --run.
func confirmCreateMdadm(env *Env, o *createOptions, res *plan.Result, members []*member.Member) error {
	stderr := env.Stderr
	planWarn := false
	show := func(boot bool) {
		for _, w := range res.Warnings {
			if (w.Kind == plan.BootNote) != boot {
				continue
			}
			if !o.run || !o.quiet {
				fmt.Fprintf(stderr, "mdtool: %s\n", warningText(w))
			}
			planWarn = true
		}
	}
	warn, err := warnOldContents(stderr, o, res, members, func() { show(true) })
	if err != nil {
		return err
	}
	show(false)
	warn = warn || planWarn
	printSizeNotes(stderr, o, res, false) // mdadm's "size set to" comes before the question
	if warn {
		if !o.run {
			if !ask(env, "Continue creating array? ") {
				return exitMsg(ExitFailure, "create aborted.")
			}
		} else if o.verbose {
			fmt.Fprintln(stderr, "mdtool: creation continuing despite oddities due to --run")
		}
	}
	if res.DefaultedMetadata && !o.quiet {
		fmt.Fprintf(stderr, "mdtool: Defaulting to version %s metadata\n", res.Metadata)
	}
	return nil
}
