# tests/04update-metadata: 0.90 -> 1.0 with --update=metadata, without
# testdev (the kernel's block device). mdadm 4.2 refuses the 0.90 raid0
# (its loop's first pass fails as in the kernel run). mdadm's test stops
# the raid6 create during its resync, to see the update refused on an
# unclean array; whether the resync has ended before "-S" is timing (two
# kernel runs differed), so the resync is waited for here (settle) and the
# update succeeds.
dlist="$dev0 $dev1 $dev2 $dev3"

for ls in raid0/4 linear/4 raid1/1 raid5/3 raid6/2
do
  s=${ls#*/} l=${ls%/*}
  mdadm -CR --assume-clean -e 0.90 $md0 --level $l -n 4 -c 64 $dlist
  mdadm -S $md0
  mdadm -A $md0 --update=metadata $dlist
  mdadm -S $md0
done

mdadm -A $md0 --update=metadata $dlist

mdadm -CR --assume-clean -e 0.90 $md0 --level=6 -n4 -c32 $dlist --bitmap=internal
mdadm -S $md0

mdadm -A $md0 --update=metadata $dlist

mdadm -CR -e 0.90 $md0 --level=6 -n4 -c32 $dlist
settle $md0
mdadm -S $md0

mdadm -A $md0 --update=metadata $dlist

mdadm -S /dev/md0
