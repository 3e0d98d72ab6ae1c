# mdadm 4.2 --grow forms that restripe (issue 14), not a public script:
# raid0 -> raid5 (parity-last by takeover, restriped to left-symmetric),
# raid5 -> raid6 (the -6 layout by takeover, restriped to left-symmetric;
# refused without the spare), raid6 -> raid5 (restriped to
# left-symmetric-6, then taken over), raid5 -> raid0 (restriped to
# parity-last, then taken over).
mdadm -CR $md0 -l0 -n3 -c64 $dev0 $dev1 $dev2
putdata $md0
mdadm --grow $md0 -l5 --add $dev3
settle $md0
mdadm --detail $md0
logdata $md0
mdadm --grow $md0 -l6 -n5
mdadm --grow $md0 -l6 -n5 --add $dev4
settle $md0
logdata $md0
mdadm --grow $md0 -l5
settle $md0
waitlevel $md0 raid5
logdata $md0
mdadm --grow $md0 -l0
settle $md0
waitlevel $md0 raid0
mdadm --detail $md0
logdata $md0
servedmd5 $md0
