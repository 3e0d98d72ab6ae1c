# tests/06wrmostly: raid1 with a write-mostly member, then also
# write-behind with an internal bitmap; without testdev (the kernel's
# block device); the resyncs are waited for before -S. mdadm 4.2 refuses
# the second create: its bare --write-behind has no value ("Invalid value
# for maximum outstanding write-behind writes: (null).", exit 2; the test
# is stale), and so does mdtool.
mdadm -CR $md0 -l1 -n3 $dev0 $dev1 --write-mostly $dev2
settle $md0
mdadm -S $md0

mdadm -CR $md0 -l1 -n3 --write-behind --bitmap=internal --bitmap-chunk=4 $dev0 $dev1 --write-mostly $dev2
settle $md0
mdadm -S $md0
