# tests/03r5assem-failed: a raid5 with a member failed while active,
# stopped, and assembled again with the failed member listed first.
# "mkfs" is writedata (1 MiB through the array); "check wait" is settle.
# The test's "echo 2000 > /sys/block/md1/md/safe_mode_delay" keeps the
# array active (dirty) for 2000 s after the write, so that the failed
# member's last superblock says "active" with the write's event: in the
# kernel's world as the test does it, in mdtool's with the daemon's
# --safe-mode-delay (its environment key, which mdadm ignores), given
# before -CR starts the daemon.
export MDTOOL_SAFE_MODE_DELAY=2000s
mdadm -CR $md1 -l5 -n4 $dev0 $dev1 $dev2 $dev3
settle $md1

case "$BIN" in
*mdtool*) ;;
*) echo 2000 > /sys/block/md1/md/safe_mode_delay ;;
esac
writedata $md1
mdadm $md1 -f $dev0
mdadm -S $md1
mdadm -A $md1 $dev0 $dev1 $dev2 $dev3
