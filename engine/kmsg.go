package engine

import (
	"fmt"
	"path/filepath"

	"mdtool/engine/layout"
)

// The kernel-log lines of md's error handlers (Linux 6.1 raid1_error,
// raid10_error, raid5_error, raid0_error and linear_error), which the
// engine prints through Options.Logf when a member fails.

// mdPrefix is the personality prefix of the kernel's messages with the
// array name: "md/raid1:md0", "md/raid:md0" for raid4/5/6, "md/raid10:md0".
func mdPrefix(level layout.Level, md string) string {
	switch level {
	case layout.RAID4, layout.RAID5, layout.RAID6:
		return "md/raid:" + md
	case layout.RAID0:
		// raid0_error and linear_error print "md/raid0%s:" without the
		// colon between the personality and the name.
		return "md/raid0" + md
	case layout.Linear:
		return "md/linear" + md
	}
	return fmt.Sprintf("md/%v:%s", level, md)
}

// failureLines are the lines md_error prints when dev fails: degraded is
// mddev->degraded after the failure (before it, when refused), disks the
// raid_disks. refused says raid1/raid10 kept the device because it holds
// the last copy of some data: Linux 6.1 prints nothing then (later
// kernels print the last two forms below, which the engine uses so that
// the refusal shows in the log). broken says the array failed beyond its
// redundancy.
func failureLines(level layout.Level, md, dev string, degraded, disks int, refused, broken bool) []string {
	p := mdPrefix(level, md)
	switch level {
	case layout.RAID0, layout.Linear:
		return []string{fmt.Sprintf("%s: Disk failure on %s detected, failing array.", p, dev)}
	case layout.RAID4, layout.RAID5, layout.RAID6:
		l := fmt.Sprintf("%s: Disk failure on %s, disabling device.", p, dev)
		if broken {
			return []string{l, fmt.Sprintf("%s: Cannot continue operation (%d/%d failed).", p, degraded, disks)}
		}
		return []string{l, fmt.Sprintf("%s: Operation continuing on %d devices.", p, disks-degraded)}
	}
	if refused {
		return []string{fmt.Sprintf("%s: Disk failure on %s, this is the last device.", p, dev),
			fmt.Sprintf("%s: Cannot continue operation (%d/%d failed).", p, degraded+1, disks)}
	}
	return []string{fmt.Sprintf("%s: Disk failure on %s, disabling device.", p, dev),
		fmt.Sprintf("%s: Operation continuing on %d devices.", p, disks-degraded)}
}

// mdName is the array's name in kernel messages (mdname()).
func (a *Array) mdName() string {
	if a.opts.Name != "" {
		return a.opts.Name
	}
	return "md"
}

// devName is a member's name in kernel messages (%pg of its block
// device): the base name of the file or device it was opened from.
func (a *Array) devName(m *member) string {
	d := m.dev
	for {
		switch x := d.(type) {
		case interface{ Path() string }:
			p := x.Path()
			if fd, ok := d.(*FileDevice); ok && fd.block {
				// /dev/disk/by-id/... -> sdb, as the kernel names it
				if r, err := filepath.EvalSymlinks(p); err == nil {
					p = r
				}
			}
			return filepath.Base(p)
		case *FaultDevice:
			d = x.Device
			continue
		case *section:
			d = x.d
			continue
		case *CountingDevice:
			d = x.Device
			continue
		}
		return fmt.Sprintf("dev%d", m.index)
	}
}

// logLines prints lines through Options.Logf.
func (a *Array) logLines(lines []string) {
	for _, l := range lines {
		a.opts.Logf("%s", l)
	}
}
