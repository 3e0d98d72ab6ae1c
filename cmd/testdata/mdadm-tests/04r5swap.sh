# tests/04r5swap with "settle" for its "sleep"s and without its "check
# recovery": the create's recovery ends before the stop (the original
# stops it wherever 4 s got it, and expects a recovery after the
# assembly), so both runs swap the same clean superblocks. swap_super is
# mdadm's tests helper (internal/testkit/swapsuper here, which the test
# builds into the share: ../../swap_super from $targetdir on both sides).
# The diff of the two -E texts is logged as a step of its own.
mdadm -CR $md0 -e 0.90 -l5 -n4 $dev0 $dev1 $dev2 $dev3
settle $md0
mdadm -S $md0

mdadm -E --metadata=0 $dev1 > $targetdir/d1
for d in $dev0 $dev1 $dev2 $dev3
do "$targetdir/../../swap_super" $d
done
mdadm -E --metadata=0.swap $dev1 > $targetdir/d1s
{
	echo "### diff -u d1 d1s"
	diff -u $targetdir/d1 $targetdir/d1s
	echo "--- rc=$?"
} >>$LOG

mdadm --assemble --update=byteorder $md0 $dev0 $dev1 $dev2 $dev3
settle $md0
mdadm -S $md0
