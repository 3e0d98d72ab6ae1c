# tests/01r5fail
mdadm -CR $md0 -l5 -n4 $dev0 $dev1 $dev2 $dev3
mdadm $md0 --fail $dev3
mdadm $md0 --add $dev4 $dev5
settle $md0
mdadm $md0 --fail $dev0
mdadm $md0 --remove $dev3 $dev0
settle $md0
mdadm $md0 -a $dev3
settle $md0
mdadm -S $md0
