# tests/03r5assem-failed: a raid5 with a member failed while active,
# stopped, and assembled again with the failed member listed first.
# "mkfs" is writedata (1 MiB through the array); "check wait" is settle;
# the test's "echo 2000 > /sys/block/md1/md/safe_mode_delay" is md's
# sysfs only (how soon md marks the array clean: mdtool has no such file)
# and is left out.
mdadm -CR $md1 -l5 -n4 $dev0 $dev1 $dev2 $dev3
settle $md1

writedata $md1
mdadm $md1 -f $dev0
mdadm -S $md1
mdadm -A $md1 $dev0 $dev1 $dev2 $dev3
