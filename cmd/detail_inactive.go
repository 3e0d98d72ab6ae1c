package cmd

import (
	"fmt"
	"io"
	"sort"

	"golang.org/x/sys/unix"

	"mdtool/engine"
	"mdtool/internal/daemon"
)

// An array that "mdadm -I" has started to collect is an inactive md array
// in the kernel, and mdadm --detail shows it so: level, device counts,
// "State : inactive", the identity from a member's superblock and the
// members without roles, in sysfs order. mdtool keeps such a set in the
// run directory's map (incremental.go).

// waitingSet returns the members waiting for the array dev ("" paths:
// none).
func waitingSet(runDir, dev string) []string {
	name, err := daemon.ArrayName(dev)
	if err != nil {
		return nil
	}
	if e := findMapEntryNamed(runDir, name); e != nil {
		return readMemberList(runDir, e.name)
	}
	return nil
}

// writeInactive prints Detail's text for an inactive array of the given
// members.
func writeInactive(w io.Writer, dev string, paths []string, homehost string) bool {
	var devs []*asmDev
	for _, p := range paths {
		if d, _ := probeCandidate(p); d != nil {
			devs = append(devs, d)
		}
	}
	if len(devs) == 0 {
		return false
	}
	sb := devs[0].sb
	fmt.Fprintf(w, "%s:\n", dev)
	version := fmt.Sprintf("1.%d", devs[0].minor)
	if devs[0].minor == engine.Minor090 {
		version = "0.90"
	}
	fmt.Fprintf(w, "           Version : %s\n", version)
	fmt.Fprintf(w, "        Raid Level : %s\n", levelName(int(sb.Level)))
	fmt.Fprintf(w, "     Total Devices : %d\n", len(devs))
	fmt.Fprintf(w, "       Persistence : Superblock is persistent\n\n")
	fmt.Fprintf(w, "             State : inactive\n")
	fmt.Fprintf(w, "   Working Devices : %d\n\n", len(devs))
	v := &detailView{sb: sb, homehost: homehost}
	fmt.Fprintf(w, "              Name : %s", escName(v.setName32()))
	if v.local() {
		fmt.Fprintf(w, "  (local to host %s)", escName(homehost))
	}
	fmt.Fprintf(w, "\n              UUID : %s", uuidText(sb.SetUUID, ':'))
	fmt.Fprintf(w, "\n            Events : %d\n\n", sb.Events)
	fmt.Fprintf(w, "    Number   Major   Minor   RaidDevice\n\n")
	// sysfs lists md/dev-* in kernfs order (by name hash)
	sort.SliceStable(devs, func(i, j int) bool {
		return kernfsLess(memberSysName(devs[i].path), memberSysName(devs[j].path))
	})
	for _, d := range devs {
		var maj, min uint32
		var st unix.Stat_t
		if unix.Stat(d.path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFBLK {
			maj, min = unix.Major(st.Rdev), unix.Minor(st.Rdev)
		}
		fmt.Fprintf(w, "       -   %5d    %5d        -        %s\n", maj, min, d.path)
	}
	return true
}
