# tests/00linear: the v1 parts (members zeroed between the arrays).
mdadm -CR $md0 -l linear -n3 $dev0 $dev1 $dev2
mdadm -S $md0
quiet --zero-superblock $devlist
mdadm -CR $md0 -e1.0 --level=linear -n4 $dev0 $dev1 $dev2 $dev3
mdadm -S $md0
