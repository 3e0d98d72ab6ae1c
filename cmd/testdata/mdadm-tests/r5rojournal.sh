# Not one of mdadm's tests: -o and -w (STOP_ARRAY_RO, RESTART_ARRAY_RW) on
# a raid5 with a write journal, before any write and after writes in
# both journal modes, then on a raid5 without one; each member's -E after
# each step. md 6.1: -w always costs an event (md_reap_sync_thread's
# superblock update, left pending while read-only, written then); -o on
# a journaled array costs one when the log's tail moves (r5l_quiesce's
# reclaim, written by __md_stop_writes). raid0 and linear have no md
# thread: -w costs nothing there; raid1 as raid5. waitclean before each -o: the
# array is clean then in both worlds.
mdadm -CR $md0 -l5 -n4 $dev0 $dev1 $dev2 $dev3 --write-journal $dev4
settle $md0
mdadm -o $md0
mdadm -E $dev0 >/dev/null
mdadm -w $md0
mdadm -E $dev0 >/dev/null
for mode in write-through write-back; do
	journalmode $md0 $mode
	writedata $md0
	waitclean $md0
	mdadm -o $md0
	mdadm -E $dev0 >/dev/null
	mdadm -E $dev4 >/dev/null
	mdadm -w $md0
	mdadm -E $dev0 >/dev/null
done
mdadm -S $md0
quiet --zero-superblock $devlist
mdadm -CR $md0 -l5 -n4 $dev0 $dev1 $dev2 $dev3
settle $md0
mdadm -o $md0
mdadm -w $md0
mdadm -E $dev0 >/dev/null
mdadm -S $md0
for level in 0 linear 1; do
	quiet --zero-superblock $devlist
	mdadm -CR $md0 -l$level -n4 $dev0 $dev1 $dev2 $dev3
	settle $md0
	waitclean $md0
	mdadm -o $md0
	mdadm -w $md0
	mdadm -E $dev0 >/dev/null
	mdadm -S $md0
done
