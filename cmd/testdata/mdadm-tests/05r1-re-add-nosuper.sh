# tests/05r1-re-add-nosuper: a raid1 built without superblocks (-B) with a
# bitmap file, a member failed and re-added three times. "testdev" and
# the "dd if=/dev/zero" through the kernel's block device are writedata
# (1 MiB: the second and third while the member is out, so that its
# recovery has dirty chunks to copy); "check wait" is settle; "check
# resync/nosync/recovery" (/proc/mdstat: timing) are left out. The
# test's "sleep 4" stays: the bitmap daemon (-d1) clears the resync's
# bits before the first failure (a degraded array keeps them), so that
# the -X logged while the member is out the third time counts the chunks
# of the writes alone. "-r" removes nothing in mdadm 4.2 (its getopt
# gives -r a value), so each --re-add finds the member faulty and writes
# "re-add" to its state file. The test's cmp of the two members is a
# logged step (cmpdevs: its exit status, after BLKFLSBUF as the test's
# comment asks, for the loop devices), over the whole devices: a built
# raid1 has nothing but data on them. The members have no superblock,
# so the kernel's check builds mdtool's final members (with mdtool's
# bitmap file) instead of assembling them. The bitmap file is $bmf (the
# harness's: in the VM on an ext2 filesystem, as md needs bmap), not
# $targetdir/bitmap2.
cmpdevs() {
	for d in "$1" "$2"; do blockdev --flushbufs "$d" >/dev/null 2>&1; done # loop devices: drop cached pages
	cmp "$1" "$2" >/dev/null 2>&1
	rc=$?
	printf '### cmp %s %s\n--- rc=%s\n' "$1" "$2" "$rc" >>"$LOG"
}
rm -f $bmf
mdadm -B $md0 -l1 -n2 -b$bmf -d1 $dev1 $dev2
settle $md0
writedata $md0
sleep 4

mdadm $md0 -f $dev2
sleep 1
mdadm $md0 -r $dev2
mdadm $md0 --re-add $dev2
settle $md0

mdadm $md0 -f $dev2
sleep 1
mdadm $md0 -r $dev2
writedata $md0
mdadm $md0 --re-add $dev2
settle $md0
cmpdevs $dev1 $dev2

mdadm $md0 -f $dev2; sleep 1
mdadm $md0 -r $dev2
writedata $md0
mdadm -X $bmf
mdadm $md0 --re-add $dev2
settle $md0
cmpdevs $dev1 $dev2
mdadm -S $md0
