# tests/01replace (as 01replace.sh translates it) on -e 0.90 arrays, for
# raid1 and raid5: --replace onto the spare md picks and --replace --with,
# the replaced members removed and added back, a member failed while a
# replacement ran (settle first, as in 01replace.sh).
for level in 1 5
do
  quiet --zero-superblock $dev4 $dev5
  mdadm -CR $md0 -e0.90 -l $level -n4 -x2 $devlist
  settle $md0
  mdadm $md0 --replace $dev1
  settle $md0
  mdadm $md0 --remove $dev1
  mdadm $md0 --remove $dev5
  mdadm -S $md0
  quiet --zero-superblock $dev4 $dev5
  mdadm -CR $md0 -e0.90 -l $level -n4 -x2 $devlist
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
  mdadm -S $md0
done
