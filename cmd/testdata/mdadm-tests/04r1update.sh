# tests/04r1update: re-assemble with a forced resync.
mdadm -CR $md0 -l1 -n2 $dev0 $dev1
settle $md0
mdadm -S $md0

mdadm -A $md0 $dev0 $dev1
mdadm -S $md0

mdadm -A $md0 -U resync $dev0 $dev1
settle $md0
mdadm -S $md0
