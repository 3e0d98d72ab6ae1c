# tests/01replace for raid1, raid5, raid6 and raid10, without the data
# written through the array's block device and its sha1sums (the kernel's
# block device). "dd if=/dev/zero of=$dev4" (a whole member) becomes
# --zero-superblock (what it is there for: no old superblock on the spares).
# "sleep 1" before the --fail of a member while a replacement runs becomes
# "settle": whether the 20 MB replacement ended within the second is timing,
# and the rest of the test (roles, events) depends on it. "--remove $dev0
# $dev2" is two commands: md writes the superblocks of each removal from
# its thread, and when the second removal comes before the thread ran, one
# write records both (seen once in the VM: events one lower from there on).
# "--fail $dev0 $dev2" is two commands for the same reason (raid10 in one
# VM run: 57 events at the end, 58 in the others and in mdtool's).
# The steps that the test expects to fail ("&& exit 1") are logged with
# their exit status.
for level in 1 5 6 10
do
  quiet --zero-superblock $dev4 $dev5
  mdadm -CR $md0 -l $level -n4 -x2 $devlist
  settle $md0
  mdadm $md0 --replace $dev1
  settle $md0
  mdadm $md0 --remove $dev1
  mdadm $md0 --remove $dev5
  mdadm -S $md0
  quiet --zero-superblock $dev4 $dev5
  mdadm -CR $md0 -l $level -n4 -x2 $devlist
  settle $md0

  mdadm $md0 --replace $dev1 --with $dev4
  settle $md0
  mdadm $md0 --remove $dev1
  mdadm $md0 --remove $dev5
  mdadm $md0 --remove $dev4

  mdadm $md0 --add $dev1 $dev5
  mdadm $md0 --replace $dev0
  settle $md0
  mdadm $md0 --fail $dev2
  settle $md0

  mdadm $md0 --remove $dev0
  mdadm $md0 --remove $dev2
  mdadm $md0 --add $dev0 $dev2
  mdadm $md0 --replace $dev3
  settle $md0
  mdadm $md0 --fail $dev0
  mdadm $md0 --fail $dev2
  settle $md0

  mdadm -S $md0
done
