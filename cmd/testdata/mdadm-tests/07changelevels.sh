# mdadm 4.2's tests/07changelevels: level, chunk, layout and device-count
# changes, the later ones in place through a backup file.
#
# Translation notes:
# - The members are 21024K, not func.sh's 20000K: mdadm 4.2 gives these
#   arrays a 1M (raid1) or 2M (raid6, 512K chunk) data offset, so the
#   test's sizes (-z 19968, --array-size 37888 and 18944) fit only members
#   1M larger; on 20000K members mdadm refuses the first step ("smaller
#   than given size"). With them, the figures are the ones the test names.
# - dotest's data writes and cmp, testdev and checkgeo read the kernel's
#   block device and sysfs; they are left out, "check wait" is settle, and
#   checkgeo's geometry is compared through -D.
# - The first part's steps are refused by mdadm 4.2 itself (a level and
#   chunk change in one step, a chunk for raid1, raid1 -> raid6): the same
#   refusals are compared.
bu=$targetdir/md-test-backup
rm -f $bu
mdadm -CR $md0 -l1 -n2 -x1 $dev0 $dev1 $dev2 -z 19968
settle $md0

mdadm --grow $md0 -l5 -n3 --chunk 64
settle $md0

mdadm $md0 --add $dev3 $dev4
mdadm --grow $md0 -n4 --chunk 32
settle $md0

mdadm -G $md0 -l6 --backup-file $bu
settle $md0

mdadm -G $md0 --array-size 39936
mdadm -G $md0 -n4 --backup-file $bu
settle $md0
mdadm -D $md0 >/dev/null

mdadm -G $md0 -l5 --backup-file $bu
settle $md0
mdadm -D $md0 >/dev/null

mdadm -G $md0 --array-size 19968
mdadm -G $md0 -n2 --backup-file $bu
settle $md0
mdadm -D $md0 >/dev/null

mdadm -G --level=1 $md0
settle $md0

# now repeat that last few steps only with a degraded array.
mdadm -S $md0
mdadm -CR $md0 -l6 -n5 $dev0 $dev1 $dev2 $dev3 $dev4
settle $md0

mdadm $md0 --fail $dev0

mdadm -G $md0 --array-size 37888
mdadm -G $md0 -n4 --backup-file $bu
settle $md0
mdadm -D $md0 >/dev/null
mdadm $md0 --fail $dev4

mdadm $md0 --fail $dev3
# now double-degraded.
# switch layout to a DDF layout and back to make sure that works.

mdadm -G $md0 --layout=ddf-N-continue --backup-file $bu
settle $md0
mdadm -D $md0 >/dev/null
mdadm -G $md0 --layout=ra --backup-file $bu
settle $md0
mdadm -D $md0 >/dev/null

mdadm -G $md0 -l5 --backup-file $bu
settle $md0

mdadm -G $md0 --array-size 18944
mdadm -G $md0 -n2 --backup-file $bu
settle $md0
mdadm -D $md0 >/dev/null
mdadm $md0 --fail $dev2

mdadm -G --level=1 $md0
settle $md0
mdadm -D $md0 >/dev/null
mdadm -S $md0
