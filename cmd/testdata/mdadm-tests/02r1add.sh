# tests/02r1add: make a raid1 with a spare, grow it onto the spare, fail a
# member, shrink it back to two. mdadm 4.2's test runs these steps twice, the
# second time with -e1.2, which is the default: once here.
mdadm -CR $md0 -l1 -n2 -x1 $dev0 $dev1 $dev2
settle $md0
mdadm --grow $md0 -n 3
settle $md0
mdadm $md0 --fail $dev0
mdadm --grow $md0 -n 2
settle $md0
mdadm -S $md0
