# tests/00raid4 (members zeroed between the arrays).
mdadm -CfR $md0 -l 4 -n3 $dev0 $dev1 $dev2
settle $md0
mdadm -S $md0
quiet --zero-superblock $devlist
mdadm -CR $md0 -e1 --level=raid4 -n4 $dev0 $dev1 $dev2 $dev3
settle $md0
mdadm -S $md0
