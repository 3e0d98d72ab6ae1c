# tests/05r5-internalbitmap without --delay=1 (h7's) and without its
# timed dirty counts.
mdadm --create --run $md0 --level=5 -n3 --bitmap internal --bitmap-chunk=4 $dev1 $dev2 $dev3
settle $md0
mdadm -S $md0

mdadm --assemble $md0 $dev1 $dev2 $dev3
mdadm $md0 -f $dev1
mdadm -S $md0

mdadm --assemble -R $md0 $dev2 $dev3
mdadm --zero $dev1
mdadm $md0 --add $dev1
settle $md0
mdadm -S $md0
