# tests/05r1-internalbitmap with v1.2 instead of -e0.90 and without
# --delay=1 (both h7's) and its timed dirty counts.
mdadm --create --run $md0 --level=1 -n2 --bitmap internal --bitmap-chunk=4 $dev1 $dev2
settle $md0
mdadm -S $md0

mdadm --assemble $md0 $dev1 $dev2
mdadm $md0 -f $dev1
mdadm -S $md0

mdadm --assemble -R $md0 $dev2
mdadm --zero-superblock $dev1
mdadm $md0 --add $dev1
settle $md0
mdadm -S $md0
