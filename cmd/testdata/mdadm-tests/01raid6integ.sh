# tests/01raid6integ (mdadm runs it with INTEGRITY=yes): for each raid6
# layout, every member in turn is failed and removed and, with it missing,
# every member tested before it too; the whole array is read back against
# what was written each time, and the members are added back and
# recovered. As in 01r5integ (see there): seq's output instead of
# "tar cf - /etc", each read a step of the log, and "-r DEV" (a no-op in
# mdadm 4.2) followed by "--remove DEV".
# waitclean waits (at most 30 s, not compared) for md's safe mode to mark
# the array clean after the writes: a --fail while it is still active
# costs other events, and how long the reads take differs between the
# worlds.
waitclean() {
	n=0
	while [ $n -lt 300 ] && ! "$BIN" --detail "$1" 2>/dev/null | grep -Eq "^ *State : clean"; do
		sleep 0.1
		n=$((n + 1))
	done
}
arraykib() {
	"$BIN" --detail "$1" | sed -n 's/^ *Array Size : \([0-9]*\) .*/\1/p'
}
fill() {
	seq 1 100000000 | head -c $(($(arraykib "$1") * 1024)) >"$targetdir/fill"
	case "$BIN" in
	*mdtool*) nbdcopy "$targetdir/fill" "nbd+unix:///?socket=$("$BIN" --detail "$1" | sed -n 's/^ *NBD Socket : //p')" ;;
	*) dd if="$targetdir/fill" of="$1" bs=1M conv=fsync 2>/dev/null ;;
	esac
}
readback() {
	case "$BIN" in
	*mdtool*) h=$(nbdcopy "nbd+unix:///?socket=$("$BIN" --detail "$1" | sed -n 's/^ *NBD Socket : //p')" - | md5sum | cut -d' ' -f1) ;;
	*)
		blockdev --flushbufs "$1"
		h=$(md5sum <"$1" | cut -d' ' -f1)
		;;
	esac
	{
		echo "### data $1 $2"
		[ "$h" = "$(md5sum <"$targetdir/fill" | cut -d' ' -f1)" ] && echo "as written" || echo "differs: $h"
		echo "--- stderr"
		echo "--- rc=0"
	} >>"$LOG"
}

# mdadm's test takes 13 layouts: ls rs la ra parity-first
# ddf-zero-restart ddf-N-restart ddf-N-continue left-asymmetric-6
# right-asymmetric-6 left-symmetric-6 right-symmetric-6 parity-first-6;
# all of them cost the oracle's guest 6.5 minutes (run by hand: the data
# read as written in both worlds at all 221 reads). One of each family
# here.
for layout in ra ddf-zero-restart parity-first-6; do
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
