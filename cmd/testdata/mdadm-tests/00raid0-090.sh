# tests/00raid0: the 0.90 and no-superblock (-B) parts.
mdadm -CR $md0 -e0.90 -l0 -n4 $dev0 $dev1 $dev2 $dev3
mdadm -S $md0
quiet --zero-superblock $devlist
mdadm -B $md0 -l0 -n5 $dev0 $dev1 $dev2 $dev3 $dev4
mdadm -S $md0
