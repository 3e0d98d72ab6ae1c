# tests/04r0update: a 0.90 array re-assembled with --update=super-minor,
# without testdev (the kernel's block device); the minors its "case"
# compares are in the logged -E steps. mdadm 4.2 refuses its 0.90 raid0
# ("0.90 metadata does not support layouts for RAID0": the test is stale),
# so a raid1 of three stands in for it (--assume-clean: no resync).
mdadm -CR -e 0.90 $md0 -l1 -n3 --assume-clean $dev0 $dev1 $dev2
minor1=`mdadm -E $dev0 | sed -n -e 's/.*Preferred Minor : //p'`
mdadm -S /dev/md0

mdadm -A $md1 $dev0 $dev1 $dev2
minor2=`mdadm -E $dev0 | sed -n -e 's/.*Preferred Minor : //p'`
mdadm -S /dev/md1

mdadm -A $md1 --update=super-minor $dev0 $dev1 $dev2
minor3=`mdadm -E $dev0 | sed -n -e 's/.*Preferred Minor : //p'`
mdadm -S /dev/md1
