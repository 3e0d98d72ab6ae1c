# mdadm 4.2 --grow forms that restripe (issue 14), not a public script:
# a raid0 grown by a device: taken over to raid4, reshaped, back to raid0.
mdadm -CR $md0 -l0 -n3 -c64 $dev0 $dev1 $dev2
putdata $md0
mdadm --grow $md0 -n4
mdadm --grow $md0 -n4 --add $dev3
settle $md0
waitlevel $md0 raid0
mdadm --detail $md0
logdata $md0
