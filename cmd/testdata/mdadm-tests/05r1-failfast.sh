# tests/05r1-failfast: the failfast flag through create, --add, assembly
# and growth, compared in -E's Flags (the sysfs state checks read the
# kernel and are left out); "check wait" is settle, and the creates'
# resyncs are waited for before the members are failed.
mdadm -CR $md0 -e1.2 --level=raid1 --failfast -n2 $dev0 $dev1
settle $md0

mdadm $md0 -f $dev0
mdadm $md0 -r $dev0

mdadm $md0 -a --failfast $dev0
settle $md0

mdadm -S $md0

mdadm -A $md0 $dev0 $dev1

mdadm $md0 -f $dev0
mdadm $md0 -r $dev0
mdadm $md0 -a --nofailfast $dev0
settle $md0
mdadm -E $dev0

mdadm $md0 -f $dev0
mdadm $md0 -r $dev0
mdadm -S $md0
mdadm -A $md0 $dev0 $dev1
mdadm -S $md0

mdadm -CR $md0 -e1.2 --level=raid1 --failfast -n2 $dev0 $dev1
settle $md0
mdadm $md0 -a --failfast $dev2
settle $md0

mdadm -G $md0 --raid-devices=3
settle $md0
mdadm -S $md0
