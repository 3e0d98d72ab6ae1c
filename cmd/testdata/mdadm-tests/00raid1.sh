# tests/00raid1: the v1 part (0.90 and -B: 00raid1-090).
mdadm -CR $md0 -l 1 -n2 missing missing
mdadm -CR $md0 -l 1 -n2 $dev0 $dev1
settle $md0
mdadm -S $md0
