# Derived from tests/05r1-re-add (fail, remove, re-add, add) on a 1.2 raid1
# WITHOUT a bitmap. mdadm 4.2's short -r takes a value and removes nothing
# (see README), so its "-r; --re-add" re-adds the faulty member md still
# holds; with --remove the member is out and its events are behind:
# --re-add is refused, --add makes it a new spare. Then --re-add and --add
# of a member left out of a degraded assembly while nothing was written
# (its events are the array's: md takes it back into its slot), and of one
# that missed a write (writedata; then waitclean: whether md's 200 ms safe
# mode marks the array clean before or during the recovery that follows
# changes the final events by one: twice, on a loaded machine, md ended
# at 73 and mdtool at 74).
mdadm -CR $md0 -l1 -n2 $dev1 $dev2
settle $md0
mdadm $md0 -f $dev2
sleep 1
mdadm $md0 -r $dev2
mdadm $md0 --re-add $dev2
settle $md0
mdadm $md0 -f $dev2
sleep 1
mdadm $md0 --remove $dev2
mdadm $md0 --re-add $dev2
mdadm $md0 -a $dev2
settle $md0
mdadm -S $md0

mdadm -A -R $md0 $dev1
mdadm $md0 --re-add $dev2
settle $md0
mdadm -S $md0
mdadm -A -R $md0 $dev1
mdadm $md0 -a $dev2
settle $md0
mdadm -S $md0

mdadm -A -R $md0 $dev1
writedata $md0
waitclean $md0
mdadm $md0 --re-add $dev2
mdadm $md0 -a $dev2
settle $md0
mdadm -S $md0
