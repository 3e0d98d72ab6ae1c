# Not one of mdadm's tests: Grow.c's raid10 <-> raid0 level changes on the
# same harness. The members are given out of order (role 0 is DEV1, role 2
# DEV3), so remove_disks_for_takeover's choice follows the order mdadm reads
# the members from sysfs (kernfs: dev-loop2, dev-loop0, dev-loop3,
# dev-loop1), not the roles: DEV0 and DEV2 stay.
mdadm -CR $md0 -l10 -n4 -c64 --assume-clean $dev1 $dev0 $dev3 $dev2
mdadm --grow $md0 -l5
mdadm --grow $md0 -l0 -c32
mdadm --grow $md0 -l0 -n3
mdadm -D $md0
mdadm --grow $md0 -l0
mdadm -D $md0
mdadm -E $dev0
mdadm --grow $md0 -l10
mdadm --grow $md0 -l10 --add $dev4 $dev5
settle $md0
mdadm -D $md0
mdadm -S $md0
