# tests/00raid10: six devices and a spare, n2 n3 f2 f3 (members zeroed
# between the arrays; each array's first member examined after its stop).
devs="$dev0 $dev1 $dev2 $dev3 $dev4 $dev5 $dev6"
for lo in n2 n3 f2 f3; do
	quiet --zero-superblock $devlist
	mdadm --create --run --level=raid10 --layout $lo --raid-disks 6 -x 1 $md0 $devs
	settle $md0
	mdadm -S $md0
	mdadm -E $dev0 >/dev/null
done
