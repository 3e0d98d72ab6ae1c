# tests/05r6-bitmapfile without its "testdev" and "check recovery" lines
# (the kernel's block device, /proc/mdstat) and its timed dirty counts (-X
# read while the bitmap daemon clears bits: timing); "check wait" is
# settle. The bitmap file is $bmf (the harness's: in the VM on an ext2
# filesystem, as md needs bmap; on the host in the test's directory), not
# $targetdir/bitmap. The file's -X is logged after each stop (nothing runs
# then) and at the end (finish).
rm -f $bmf
mdadm --create --run $md0 --level=6 -n4 --delay=1 --bitmap $bmf $dev1 $dev2 $dev3 $dev4
settle $md0
mdadm -S $md0
mdadm -X $bmf

mdadm --assemble $md0 --bitmap=$bmf $dev1 $dev2 $dev3 $dev4
mdadm $md0 -f $dev3
mdadm -S $md0
mdadm -X $bmf

mdadm --assemble -R $md0 --bitmap=$bmf $dev1 $dev2 $dev4
mdadm --zero $dev3 # force --add, not --re-add
mdadm $md0 --add $dev3
settle $md0
mdadm -S $md0
