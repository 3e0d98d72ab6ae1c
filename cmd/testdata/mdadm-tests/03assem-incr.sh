# tests/03assem-incr: a partly -I assembled array completed with -A.
for l in 0 1 5 linear
do
  mdadm -CR $md0 -l $l -n5 $dev0 $dev1 $dev2 $dev3 $dev4 --assume-clean
  mdadm -S md0
  mdadm -I $dev1
  mdadm -I $dev3
  mdadm -A /dev/md0  $dev0 $dev1 $dev2 $dev3 $dev4
  mdadm -S /dev/md0
done
