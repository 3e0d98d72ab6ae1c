package cmd

import (
	"strings"
)

// mdadm 4.2's short option strings declare "r:" (its commit "fix coredump
// of mdadm --monitor -r" gave -r a value in every mode; mdadm 4.3 undid it
// outside --monitor). So in 4.2 the short -r of manage mode takes the next
// argument, or the rest of its cluster, as a value and drops it:
//
//	mdadm /dev/md0 -r /dev/sdb    removes nothing, prints nothing, exits 0
//	mdadm -ro /dev/md0            is -r with the value "o": nothing either
//	mdadm -r /dev/md0 /dev/sdb    takes /dev/sdb for the md device
//
// while --remove works. mdtool follows 4.2 in mdadm's forms; the manage
// subcommand itself ("mdtool manage MD -r DEV") keeps -r as --remove.

// shortRemove42 reports whether a is mdadm's short -r (alone or with its
// value attached: -rVALUE).
func shortRemove42(a string) bool {
	return strings.HasPrefix(a, "-r") && !strings.HasPrefix(a, "--")
}

// translateRemove42 rewrites args[i], a short -r of an mdadm form in
// manage mode (or before the mode is known), as 4.2's getopt reads it:
// --remove without its value. drop says that the next argument is the
// value (and is dropped too). A -r without a value stays -r, which manage
// refuses as getopt does.
func translateRemove42(args []string, i int) (out string, drop bool) {
	if args[i] != "-r" {
		return "--remove", false // -rVALUE
	}
	if i+1 < len(args) {
		return "--remove", true
	}
	return "-r", false
}

// manageWithoutDevices is manage mode with an operation but no device
// after the md device (mdadm MD --fail, or MD -r DEV as 4.2 reads it):
// mdadm opens the md device and, as no device follows it, does nothing
// and exits 0. A -r at the very end lacks its value (getopt's refusal).
func manageWithoutDevices(args []string, disp byte, mddev, runDir string) error {
	if len(args) > 0 && args[len(args)-1] == "-r" {
		return usagef("option requires an argument -- 'r'")
	}
	if disp == 0 {
		return usagef("no devices given for %s", mddev)
	}
	return manageNothing(runDir, mddev)
}
