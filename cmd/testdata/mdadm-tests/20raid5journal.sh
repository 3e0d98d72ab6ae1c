# mdadm 4.2's tests/20raid5journal: a raid5 with a write journal is
# created, written, stopped, assembled without its journal (refused, then
# forced read-only) and assembled incrementally with and without it.
#
# Translation notes:
# - "tar cf - /etc > $md0" is writedata (1 MiB through the array); the
#   test's ./raid6check (mdadm's separate program) is left out: the kernel
#   checks the array mdtool leaves (mismatch_cnt 0) and reads its md5.
# - test_detail_shows_journal and test_examine_shows_journal grep -D and
#   -E: both are logged whole.
# - waitclean after the write: -D's State and Events do not depend on
#   how soon the array goes clean again; so after the write of the
#   incremental array with its journal (rocheck), else the events depend
#   on whether -S or md's 200 ms safe mode marks it clean (mdtool once
#   ended one event ahead on a loaded machine: 24 against 23).
# - "check readonly" is rocheck (a 4 KiB write of what the array holds:
#   refused or written), "check raid5" is -D, "check inactive" is the
#   State line of -D (mdstate): the inactive array's -D lists its members
#   in sysfs order, a hash of the device names, which differ between the
#   loop devices and the image files.
create_with_journal_and_stop() {
	mdadm -CR $md0 -l5 -n4 $dev0 $dev1 $dev2 $dev3 --write-journal $dev4
	settle $md0
	writedata $md0
	waitclean $md0
	mdadm -D $md0 >/dev/null
	mdadm -E $dev4 >/dev/null
	mdadm -S $md0
}

test_assemble() {
	create_with_journal_and_stop
	mdadm -A $md0 $dev0 $dev1 $dev2 $dev3
	mdadm -S $md0

	mdadm -A $md0 $dev0 $dev1 $dev2 $dev3 --force
	rocheck $md0
	mdadm -S $md0
}

test_incremental() {
	create_with_journal_and_stop
	for d in $dev0 $dev1 $dev2 $dev3; do
		mdadm -I $d
	done
	mdstate $md0
	mdadm -I $dev4
	mdadm -D $md0 >/dev/null
	rocheck $md0
	waitclean $md0
	mdadm -S $md0

	for d in $dev0 $dev1 $dev2 $dev3; do
		mdadm -I $d
	done
	mdadm -R $md0
	rocheck $md0
	mdadm -S $md0
}

create_with_journal_and_stop
test_assemble
test_incremental

# The whole array as it is left, assembled with its journal (both
# worlds, so that the members' final -E match): the kernel's md5 of
# mdtool's images must equal what mdtool serves.
quiet -A $md0 $dev0 $dev1 $dev2 $dev3 $dev4
case "$BIN" in
*mdtool*) nbdcopy "$(nbduri $md0)" - | md5sum | cut -d' ' -f1 >"$targetdir/served.md5" ;;
esac
quiet -S $md0
