# mdadm 4.2's tests/21raid5cache: data integrity with md's raid5
# write-back journal. A 10-device raid5 with a write journal is created,
# switched to write-back (journal_mode), written a page and then a 1 KiB
# piece of it, restarted between the writes, and its first page compared
# with what was written; degraded (a member failed after the create) and
# not.
#
# Translation notes:
# - "echo write-back > /sys/block/md0/md/journal_mode" is journalmode (the
#   VM writes sysfs, mdtool runs action --journal-mode), logged with its
#   outcome: on the degraded array md refuses it (EINVAL) at every
#   restart, which the original does not check (the echo's failure does
#   not end it).
# - The dd writes to $md0 are writeat (the VM: dd through the page cache,
#   as the original, which reaches md when dd closes the device, the last
#   close syncing it; mdtool: nbdkit's offset filter over the NBD socket),
#   logged as steps; "cmp -n 4096 FILE $md0" is cmpfirst, logged "same"
#   or "differs" where the original exits 2.
# - waitclean after each write (writepage): on the degraded array every
#   active/clean transition costs an event (md_update_sb: no roll-back of
#   events while degraded), so back-to-back writes would make the final
#   Events depend on whether the next write came within md's 200 ms
#   safe_mode_delay (seen in both worlds: 32, 34 and 43 on the same
#   steps).
# - The random data stays /dev/urandom (the log only says same/differs),
#   its files in $targetdir instead of /tmp, logged by their names
#   (randfile, newrandfile; page for write_three_pages' pages, a new
#   random page each).
# - "check wait" is settle.
# - run_test 6 creates the same -l5 array as run_test 5: the original's
#   create_array checks that $1 is 5 or 6 and then always passes -l5.
#   Kept: four runs (5 no, 5 yes, 6 no, 6 yes), two of them the same.
# - $dev11 stands in for $dev7 in the array, as in the original ($dev7 is
#   not used).
# - At the end, as 20raid5journal: the array is assembled once more with
#   every member and the md5 of what mdtool serves kept for the kernel's
#   check of mdtool's final images (which include the stale $dev0).

create_random_data() {
	dd if=/dev/urandom of="$targetdir/randfile" bs=4k count=1 2>/dev/null
	for x in 0 1 2 3; do
		dd if="$targetdir/randfile" of="$targetdir/randchunk$x" bs=1k count=1 skip=$x 2>/dev/null
	done
	dd if=/dev/urandom of="$targetdir/randchunk4" bs=1k count=1 2>/dev/null
	rm -f "$targetdir/newrandfile"
	for x in 0 1 4 3; do
		cat "$targetdir/randchunk$x" >>"$targetdir/newrandfile"
	done
}

# create_array N: the original's check of N (5 or 6), then always -l5.
create_array() {
	if [ "$1" -lt 5 ] || [ "$1" -gt 6 ]; then
		echo wrong array type $1
		exit 2
	fi
	mdadm -CR $md0 -c4 -l5 -n10 $dev0 $dev1 $dev2 $dev3 $dev4 $dev5 $dev6 $dev11 $dev8 $dev9 --write-journal $dev10
	settle $md0
	journalmode $md0 write-back
}

restart_array_write_back() {
	mdadm -S $md0
	mdadm -A $md0 $dev0 $dev1 $dev2 $dev3 $dev4 $dev5 $dev6 $dev11 $dev8 $dev9 $dev10
	journalmode $md0 write-back
}

cmp_first_page() {
	cmpfirst $md0 "$1"
}

# writepage writes the file $1 at byte $2 of md0 and waits until md0 is
# clean again.
writepage() {
	writeat $md0 "$1" "$2"
	waitclean $md0
}

# write 3 new random pages after the first page of md0
write_three_pages() {
	for x in 1 2 3; do
		dd if=/dev/urandom of="$targetdir/page" bs=4k count=1 2>/dev/null
		writepage "$targetdir/page" $((x * 4096))
	done
}

# run_test <array_type:5/6> <degraded_or_not:yes/no>
run_test() {
	create_random_data
	create_array $1

	if [ "$2" = yes ]; then
		mdadm --fail $md0 $dev0
	fi

	writepage "$targetdir/randfile" 0
	restart_array_write_back
	cmp_first_page "$targetdir/randfile"
	restart_array_write_back
	write_three_pages
	cmp_first_page "$targetdir/randfile"

	writepage "$targetdir/randchunk4" 2048
	restart_array_write_back
	cmp_first_page "$targetdir/newrandfile"
	restart_array_write_back
	write_three_pages
	cmp_first_page "$targetdir/newrandfile"

	mdadm -S $md0
}

run_test 5 no
run_test 5 yes
run_test 6 no
run_test 6 yes

quiet -A $md0 $dev0 $dev1 $dev2 $dev3 $dev4 $dev5 $dev6 $dev11 $dev8 $dev9 $dev10
case "$BIN" in
*mdtool*) nbdcopy "$(nbduri $md0)" - | md5sum | cut -d' ' -f1 >"$targetdir/served.md5" ;;
esac
quiet -S $md0
rm -f "$targetdir"/rand* "$targetdir"/newrandfile "$targetdir"/page
