# tests/00readonly for v1 metadata (-o/-w are h7's).
for metadata in 1.0 1.1 1.2; do
	for level in linear raid0 raid1 raid4 raid5 raid6 raid10; do
		quiet --zero-superblock $devlist
		mdadm -CR $md0 -l $level -n 4 --metadata=$metadata $dev1 $dev2 $dev3 $dev4 --assume-clean
		mdadm -ro $md0
		mdadm -w $md0
		mdadm -S $md0
	done
done
