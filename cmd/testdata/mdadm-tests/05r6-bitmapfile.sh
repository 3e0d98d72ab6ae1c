# tests/05r6-bitmapfile with "testdev" lines (writes through the kernel's
# block device) and "check recovery" (/proc/mdstat) replaced: the one after
# the failure by 1 MiB written to the degraded array (writedata; its dirty
# bits stay set until the recovery), the others left out; without its timed
# dirty counts (-X read while the bitmap daemon clears bits: timing), but
# with the bitmap file's -X logged after each stop (nothing runs then) and
# at the end (finish); "check wait" is settle. The bitmap file is $bmf (the
# harness's: in the VM on an ext2 filesystem, as md needs bmap; on the host
# in the test's directory), not $targetdir/bitmap.
rm -f $bmf
mdadm --create --run $md0 --level=6 -n4 --delay=1 --bitmap $bmf $dev1 $dev2 $dev3 $dev4
settle $md0
mdadm -S $md0
mdadm -X $bmf

mdadm --assemble $md0 --bitmap=$bmf $dev1 $dev2 $dev3 $dev4
mdadm $md0 -f $dev3
writedata $md0
mdadm -S $md0
mdadm -X $bmf

mdadm --assemble -R $md0 --bitmap=$bmf $dev1 $dev2 $dev4
mdadm --zero $dev3 # force --add, not --re-add
mdadm $md0 --add $dev3
settle $md0
mdadm -S $md0
