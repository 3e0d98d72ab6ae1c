# tests/00raid5: the v1 parts (members zeroed between the arrays; the
# -e 0.90 array is left out: create -e 0.90 is h7's).
mdadm -CR $md0 -e1 --level=raid5 -n4 $dev0 $dev1 $dev2 $dev3
settle $md0
mdadm -S $md0
for lo in la ra left-symmetric right-symmetric; do
	quiet --zero-superblock $devlist
	mdadm -CfR $md0 -l 5 -p $lo -n3 $dev0 $dev1 $dev2
	settle $md0
	mdadm -S $md0
	quiet --zero-superblock $devlist
	mdadm -CR $md0 -e1 --level=raid5 --layout $lo -n4 $dev0 $dev1 $dev2 $dev3
	settle $md0
	mdadm -S $md0
done
