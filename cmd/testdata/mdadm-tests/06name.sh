# tests/06name
mdadm -CR $md0 -l0 -n2 --metadata=1 --name="Fred" $dev0 $dev1
mdadm -E $dev0 | grep 'Name : [^:]*:Fred ' > /dev/null || echo "no name Fred in -E" >>$LOG
mdadm -Db $md0
mdadm -S $md0

mdadm -A $md0 --name="Fred" $devlist
mdadm -Db $md0
mdadm -S $md0
