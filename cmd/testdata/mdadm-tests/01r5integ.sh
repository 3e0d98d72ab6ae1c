# tests/01r5integ (mdadm runs it with INTEGRITY=yes): for each raid5
# layout, every member in turn is failed and removed, the whole array is
# read back against what was written, and the member is added back and
# recovered. mdadm's test writes "tar cf - /etc" and compares sha1sums
# of $md0; here the whole array is filled with seq's output and each read
# is a step of the log ("as written" or the md5 that differs): mdadm
# through the md device, mdtool through its NBD socket (fill, readback
# and waitclean in prelude.sh).
#
# mdadm's test removes each member with "-r DEV", which mdadm 4.2 reads
# as -r with DEV as its argument ("r:" in its short options, for
# --monitor's --increment): remove, no device, a silent no-op, exit 0.
# Its test then goes on with the member still in place, the
# --add is "Device or resource busy" and the next --fail breaks the array
# (so does mdtool, seen in a first translation). Here "-r" stays, logged,
# and "--remove" follows it.
for layout in ls rs la ra; do
	mdadm -CR $md0 -l5 --layout $layout -n4 $dev0 $dev1 $dev2 $dev3
	settle $md0
	fill $md0
	waitclean $md0
	readback $md0 all
	for i in $dev0 $dev1 $dev2 $dev3; do
		mdadm $md0 -f $i
		mdadm $md0 -r $i
		mdadm $md0 --remove $i
		readback $md0 "without $i"
		mdadm $md0 -a $i
		settle $md0
	done
	readback $md0 all
	mdadm -S $md0
done
