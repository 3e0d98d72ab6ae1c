package cmd

import (
	"strings"

	"mdtool/internal/daemon"
)

// namedKernelAlias is the array a kernel device name of mdadm's
// "CREATE names=yes" stands for: there, /dev/md/NAME is the kernel's
// md_NAME, and "mdadm -S md_NAME" (or /dev/md_NAME) names the array
// /dev/md/NAME. mdtool serves an array under its /dev/md/ name, so
// md_NAME finds the running array NAME when no array is called md_NAME.
func namedKernelAlias(runDir, dev string) (string, bool) {
	n := strings.TrimPrefix(dev, "/dev/")
	rest, ok := strings.CutPrefix(n, "md_")
	if !ok || rest == "" || strings.Contains(rest, "/") {
		return "", false
	}
	name, err := daemon.ArrayName("/dev/md/" + rest)
	if err != nil || !daemon.Held(daemon.PathsFor(runDir, name)) {
		return "", false
	}
	return name, true
}
