# tests/05r1-grow-external without its "testdev" and "check bitmap/
# nobitmap" lines (the kernel's block device, /proc/mdstat) and its timed
# dirty counts (-X read while the bitmap daemon clears bits: timing);
# "check wait" is settle, and one more settle waits for the resync that the
# new bitmap's set bits start. The bitmap file is $bmf (the harness's: in
# the VM on an ext2 filesystem, as md needs bmap; on the host in the test's
# directory), not $targetdir/bm. Its final -X is logged by finish (so a
# failed --grow does not end the test with "-X; exit 1", which would skip
# finish).
mdadm --create --run $md0 -l 1 -n 2 $dev1 $dev2
settle $md0

rm -f $bmf
mdadm --grow $md0 --bitmap=$bmf --delay=1
settle $md0

# now to remove the bitmap
mdadm --grow $md0 --bitmap=none
mdadm -S $md0
