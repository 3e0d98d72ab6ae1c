# tests/04update-metadata: 0.90 -> 1.0 with --update=metadata, without
# testdev (the kernel's block device). The raid6 create's resync is not
# waited for before its -S (as in mdadm's test: the update must refuse an
# array that needs a resync).
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

mdadm -CR -e 0.90 $md0 --level=6 -n4 -c32 $dlist
mdadm -S $md0

mdadm -A $md0 --update=metadata $dlist
mdadm -A $md0 $dlist
settle $md0
mdadm -S $md0

mdadm -A $md0 --update=metadata $dlist

mdadm -S /dev/md0
mdadm -CR --assume-clean -e 0.90 $md0 --level=6 -n4 -c32 $dlist --bitmap=internal
mdadm -S $md0

mdadm -A $md0 --update=metadata $dlist
