# Derived from tests/05r1-re-add on -e 0.90 (--remove where a member must
# leave: mdadm 4.2's short -r removes nothing, see 05r1-re-add-nobitmap):
# with an internal bitmap, --re-add of a failed and removed member
# (--assume-clean: no resync, whose bits md's bitmap daemon clears some
# seconds later, a -X count that would be timing); then
# without one (--grow --bitmap=none): --re-add of the faulty member md
# still holds, --re-add (refused) and --add (a new spare) of a failed and
# removed member, --re-add of a member left out of a degraded assembly.
mdadm -CR $md0 -e0.90 -l1 -n2 -binternal --bitmap-chunk=4 --assume-clean $dev1 $dev2
mdadm $md0 -f $dev2
sleep 1
mdadm $md0 --remove $dev2
mdadm $md0 --re-add $dev2
settle $md0

mdadm --grow $md0 --bitmap=none
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
