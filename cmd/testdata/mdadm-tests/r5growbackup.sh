# Not one of mdadm's tests: a raid5 grown by one device with --backup-file
# (issues 14 and 16). mdadm 4.2 then reshapes in place: data_offset stays,
# the critical section goes to the file, which its forked child removes
# when the reshape ends; mdtool does the same. (tests/07changelevels,
# translated on 21024K members, covers the in-place changes that keep or
# lower the number of data devices.)
mdadm -CR $md0 -l5 -n3 -c64 --assume-clean $dev0 $dev1 $dev2
mdadm $md0 --add $dev3
mdadm --grow $md0 -n4 --backup-file $targetdir/backup
settle $md0
mdadm -S $md0
