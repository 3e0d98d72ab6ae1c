# tests/05r5-bitmapfile with "testdev" lines (writes through the kernel's
# block device) and "check recovery" (/proc/mdstat) replaced: the one after
# the failure by 1 MiB written to the degraded array (writedata; its dirty
# bits stay set until the recovery), the others left out; without its timed
# dirty counts (-X read while the bitmap daemon clears bits: timing), but
# with the bitmap file's -X logged after each stop (nothing runs then) and
# at the end (finish); "check wait" is settle. The bitmap file is $bmf (the
# harness's: in the VM on an ext2 filesystem, as md needs bmap; on the host
# in the test's directory), not $targetdir/bitmap.
rm -f $bmf
mdadm --create --run $md0 --level=5 -n3 --delay=1 --bitmap $bmf $dev1 $dev2 $dev3
settle $md0
mdadm -S $md0
mdadm -X $bmf

mdadm --assemble $md0 --bitmap=$bmf $dev1 $dev2 $dev3
mdadm $md0 -f $dev1
writedata $md0
mdadm -S $md0
mdadm -X $bmf

mdadm --assemble -R $md0 --bitmap=$bmf $dev2 $dev3
mdadm --zero $dev1 # force add, not re-add
mdadm $md0 --add $dev1
settle $md0
mdadm -S $md0
