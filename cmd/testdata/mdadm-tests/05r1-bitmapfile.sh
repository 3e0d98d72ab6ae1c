# tests/05r1-bitmapfile without its "testdev" lines (writes through the
# kernel's block device) and its timed dirty counts (-X read while the
# bitmap daemon clears bits: timing); "check wait" is settle. The bitmap
# file is $bmf (the harness's: in the VM on an ext2 filesystem, as md
# needs bmap; on the host in the test's directory), not $targetdir/bitmap.
# The file's -X is logged after each stop (nothing runs then) and at the
# end (finish).
rm -f $bmf
mdadm --create --run $md0 --level=1 -n2 --delay=1 --bitmap $bmf $dev1 $dev2
settle $md0
mdadm -S $md0
mdadm -X $bmf

mdadm --assemble $md0 --bitmap=$bmf $dev1 $dev2
mdadm $md0 -f $dev1
mdadm -S $md0
mdadm -X $bmf

mdadm --assemble -R $md0 --bitmap=$bmf $dev2
mdadm --zero $dev1 # force --add, not --re-add
mdadm $md0 --add $dev1
settle $md0
mdadm -S $md0
