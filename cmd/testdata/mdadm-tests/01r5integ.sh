# tests/01r5integ (mdadm runs it with INTEGRITY=yes): for each raid5
# layout, every member in turn is failed and removed, the whole array is
# read back against what was written, and the member is added back and
# recovered. mdadm's test writes "tar cf - /etc" and compares sha1sums
# of $md0; here the whole array is filled with seq's output and each read
# is a step of the log ("as written" or the md5 that differs): mdadm
# through the md device, mdtool through its NBD socket.
#
# mdadm's test removes each member with "-r DEV", which mdadm 4.2 reads
# as -r with DEV as its argument ("r:" in its short options, for
# --monitor's --increment): remove, no device, a silent no-op, exit 0.
# Its test then goes on with the member still in place, the
# --add is "Device or resource busy" and the next --fail breaks the array
# (so does mdtool, seen in a first translation). Here "-r" stays, logged,
# and "--remove" follows it.
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
