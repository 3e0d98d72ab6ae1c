# tests/01raid6integ (mdadm runs it with INTEGRITY=yes): for each raid6
# layout, every member in turn is failed and removed and, with it missing,
# every member tested before it too; the whole array is read back against
# what was written each time, and the members are added back and
# recovered. As in 01r5integ (see there): seq's output instead of
# "tar cf - /etc", each read a step of the log (fill, readback and
# waitclean in prelude.sh), and "-r DEV" (a no-op in mdadm 4.2) followed
# by "--remove DEV".

# mdadm's test takes 13 layouts: ls rs la ra parity-first
# ddf-zero-restart ddf-N-restart ddf-N-continue left-asymmetric-6
# right-asymmetric-6 left-symmetric-6 right-symmetric-6 parity-first-6.
# They cost the oracle's guest about 6.5 minutes, so the table runs this
# translation twice, each entry with part of the list in $layouts
# (01raid6integ and 01raid6integ-6), which the two guests share.
for layout in $layouts; do
	mdadm -CR $md0 -l6 --layout $layout -n5 $dev0 $dev1 $dev2 $dev3 $dev4
	settle $md0
	fill $md0
	waitclean $md0
	readback $md0 all
	totest=
	for second in $dev0 $dev1 $dev2 $dev3 $dev4; do
		mdadm $md0 -f $second
		mdadm $md0 -r $second
		mdadm $md0 --remove $second
		readback $md0 "without $second"
		for first in $totest; do
			mdadm $md0 -f $first
			mdadm $md0 -r $first
			mdadm $md0 --remove $first
			readback $md0 "without $first and $second"
			mdadm $md0 -a $first
			settle $md0
		done
		mdadm $md0 -a $second
		settle $md0
		totest="$totest $second"
	done
	readback $md0 all
	mdadm -S $md0
done
