# tests/05r1-re-add without -d1 (--delay is h7's: 05r1-re-add-delay) and
# without the writes through the array's block device (h1's). The sleeps
# are the test's: the kernel lets go of a failed member asynchronously.
mdadm -CR $md0 -l1 -n2 -binternal --bitmap-chunk=4 $dev1 $dev2
settle $md0

mdadm $md0 -f $dev2
sleep 1
mdadm $md0 -r $dev2
mdadm $md0 -a $dev2
settle $md0

mdadm $md0 -f $dev2
sleep 1
mdadm $md0 -r $dev2
mdadm $md0 -a $dev2
settle $md0
mdadm -S $md0
