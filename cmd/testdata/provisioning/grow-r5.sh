# mdadm 4.2 --grow forms that restripe (issue 14), not a public script:
# a raid5 of 4 shrunk to 3 -- refused until --array-size is reduced, then
# while the members lack room after the data for data_offset to move up
# (a backup file would be needed), made once --size leaves that room --
# then its chunk size and its layout changed in place.
mdadm -CR $md0 -l5 -n4 -c64 --assume-clean $dev0 $dev1 $dev2 $dev3
putdata $md0
u=$("$BIN" --detail $md0 | sed -n 's/^ *Used Dev Size : \([0-9]*\) .*/\1/p')
mdadm --grow $md0 -n3
mdadm --grow $md0 --array-size=$((2 * (u - 64)))
mdadm --grow $md0 --size=$((u - 64))
mdadm --grow $md0 -n3
mdadm --grow $md0 --array-size=$((2 * (u - 128)))
mdadm --grow $md0 --size=$((u - 128))
mdadm --grow $md0 --raid-devices=3
settle $md0
mdadm --detail $md0
logdata $md0
mdadm --grow $md0 --chunk=128
settle $md0
mdadm --grow $md0 --layout=right-asymmetric
settle $md0
mdadm --detail $md0
logdata $md0
servedmd5 $md0
