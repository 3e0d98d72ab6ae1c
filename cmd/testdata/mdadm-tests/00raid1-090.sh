# tests/00raid1: 0.90 with spares, then -B.
mdadm -CR $md0 -e0.90 --level=raid1 -n3 -x2 $dev0 missing missing $dev1 $dev2
settle $md0
mdadm -S $md0
quiet --zero-superblock $devlist
mdadm -B $md0 -l 1 --assume-clean -n2 $dev0 $dev1
mdadm -S $md0
