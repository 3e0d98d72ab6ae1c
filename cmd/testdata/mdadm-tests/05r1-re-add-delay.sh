# tests/05r1-re-add's create, with --delay (-d1).
mdadm -CR $md0 -l1 -n2 -binternal --bitmap-chunk=4 -d1 $dev1 $dev2
settle $md0
mdadm -S $md0
