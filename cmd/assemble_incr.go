package cmd

// An -A of an array that "mdadm -I" has started to collect: mdadm 4.2
// keeps the members that arrived in an inactive md array, whose O_EXCL
// hold makes select_devices skip them ("is busy - skipping"); once it has
// chosen the array, it finds the inactive one in its map by UUID, takes
// its members over and says "Merging with already-assembled NAME" (unless
// that is the name it was given), and the array starts under that name.
// mdtool's waiting members are listed in the run directory (incremental.go).

// incrementalWaiting reports whether path waits in an incremental set.
func (as *assembler) incrementalWaiting(path string) bool {
	for _, e := range readMap(as.o.srv.runDir) {
		for _, p := range readMemberList(as.o.srv.runDir, e.name) {
			if p == path {
				return true
			}
		}
	}
	return false
}

// mergeIncremental adds the waiting members of the array of devs (the
// chosen devices) in front of them, as mdadm's Assemble does with the
// devices of a pre-existing inactive array. It returns the devices, the
// md device the array starts as, and the waiting set's run-directory
// name ("" when there was none to merge).
func (as *assembler) mergeIncremental(j assembleJob, mddev string, devs []*asmDev) ([]*asmDev, string, string) {
	if as.o.update == "uuid" {
		return devs, mddev, ""
	}
	e := findMapEntry(as.o.srv.runDir, devs[0].sb.SetUUID)
	if e == nil {
		return devs, mddev, ""
	}
	var merged []*asmDev
	for _, p := range readMemberList(as.o.srv.runDir, e.name) {
		if d, _ := probeCandidate(p); d != nil && !as.used[p] {
			as.used[p] = true
			merged = append(merged, d)
		}
	}
	if as.verbose > 0 || j.mddev == "" || j.mddev != e.path {
		as.errf("Merging with already-assembled %s\n", e.path)
	}
	return append(merged, devs...), e.path, e.name
}
