# tests/05r1-internalbitmap-v1a (metadata 1.0) without its "check" and
# "testdev" lines (the kernel's block device) and its timed dirty counts
# (-X read while the bitmap daemon clears bits: timing).
mdadm --create --run $md0 --metadata=1.0 --level=1 -n2 --delay=1 --bitmap internal --bitmap-chunk=4 $dev1 $dev2
settle $md0
mdadm -S $md0

mdadm --assemble $md0 $dev1 $dev2
mdadm $md0 -f $dev1
mdadm -S $md0

mdadm --zero-superblock $dev1
mdadm --assemble -R $md0 $dev2
mdadm $md0 --add $dev1
settle $md0
mdadm -S $md0
