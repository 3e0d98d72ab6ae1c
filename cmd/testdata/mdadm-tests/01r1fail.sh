# tests/01r1fail: fail two members of a raid1 in its initial sync, add two,
# remove the failed ones, add one back.
mdadm -CR $md0 -l1 -n4 $dev0 $dev1 $dev2 missing
mdadm $md0 --fail $dev2
mdadm $md0 --fail $dev1
mdadm $md0 --add $dev4 $dev3
settle $md0
settle $md0
mdadm $md0 --remove $dev2 $dev1
mdadm --zero-superblock $dev2
mdadm $md0 -a $dev2
settle $md0
mdadm -S $md0
