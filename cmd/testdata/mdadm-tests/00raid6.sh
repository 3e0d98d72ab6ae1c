# tests/00raid6: the v1 part.
mdadm -CR $md0 -e1 --level=raid6 -n5 $dev0 $dev1 $dev2 $dev3 $dev4
settle $md0
mdadm -S $md0
