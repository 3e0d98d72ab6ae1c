# tests/00raid0 as written: -CR over the members of the previous array.
mdadm -CR $md0 -l raid0 -n3 $dev0 $dev1 $dev2
mdadm -S $md0
mdadm -CR $md0 -e1.0 -l0 -c 4 -n4 $dev0 $dev1 $dev2 $dev3
mdadm -S $md0
