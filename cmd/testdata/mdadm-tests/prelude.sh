# Sourced before every translated mdadm test (tests/*.sh here), by mdadm 4.2
# in the oracle VM and by mdtool on the host, with the same variables:
#   BIN        the tool (mdadm or mdtool), an absolute path: the function
#              mdadm below would otherwise call itself
#   LOG        the log every step is appended to
#   targetdir  the case's scratch directory
#   dev0..     the members (loop devices in the VM, image files on the host)
#   devlist    all members; md0 md1 md2 as in mdadm's tests
#   bmf        the external bitmap file of a test that has one (else empty)
#   scratch    where a step's output is captured and the fill is kept
#              ($targetdir unless set: the guest's tmpfs, as its share
#              is 9p, slow under TCG)
# A step is logged as "### mdadm ARGS", its stdout, "--- stderr", its
# stderr and "--- rc=N"; its stdout is also printed, so that
# uuid=$(mdadm -Db $md0 | sed ...) works as in mdadm's tests.

# Its stderr goes through a pipe, read to its end: a step's log then holds
# what a child it forked (mdadm's reshape monitor) prints before it exits,
# whenever that is, instead of racing the next step for the file.
scratch=${scratch:-$targetdir}
mkdir -p "$scratch"
mdadm() {
	{
		"$BIN" "$@" 2>&1 >"$scratch/.out"
		echo $? >"$scratch/.rc"
	} | cat >"$scratch/.err"
	rc=$(cat "$scratch/.rc")
	{
		echo "### mdadm $*"
		cat "$scratch/.out"
		echo "--- stderr"
		cat "$scratch/.err"
		echo "--- rc=$rc"
	} >>"$LOG"
	cat "$scratch/.out"
	return $rc
}

# quiet runs a step that is not compared (waiting for a resync, cleaning up).
quiet() {
	"$BIN" "$@" >/dev/null 2>&1
}

# settle waits for the resync or recovery of an array to end: mdadm's
# tests' "check wait" (not compared: whether anything still runs is timing).
settle() {
	quiet --wait "$@"
	return 0
}

# finish stops every array and logs every member's -E and -X, and the
# bitmap file's -X.
finish() {
	quiet -Ss
	for d in $devlist; do
		mdadm -E "$d" >/dev/null
		mdadm -X "$d" >/dev/null
	done
	[ -z "$bmf" ] || mdadm -X "$bmf" >/dev/null
	return 0
}

# writedata writes 1 MiB to the array $1 at its start, in one burst: mdadm
# through the md device, mdtool (MDTOOL_DEVICE=none: no block device)
# through its NBD socket. The bitmap-file tests write to a degraded array,
# whose bits then stay set until a recovery: a count that is no timing.
writedata() {
	seq 1 200000 | head -c 1048576 >"$scratch/pattern"
	case "$BIN" in
	*mdtool*) nbdcopy "$scratch/pattern" "$(nbduri "$1")" ;;
	*) dd if="$scratch/pattern" of="$1" bs=65536 conv=fsync 2>/dev/null ;;
	esac
	rm -f "$scratch/pattern"
}

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
# fill writes seq's output over the whole array $1 (01*integ) and keeps it
# as $scratch/fill, its md5 in $scratch/fill.md5 (made once for a size:
# seq is slow under TCG, and 01raid6integ fills 13 arrays of one size);
# readback logs whether the whole array reads back as that ("as
# written") as a step of its own, $2 naming the moment.
arraykib() {
	"$BIN" --detail "$1" | sed -n 's/^ *Array Size : \([0-9]*\) .*/\1/p'
}
fill() {
	n=$(($(arraykib "$1") * 1024))
	if [ ! -f "$scratch/fill" ] || [ "$(wc -c <"$scratch/fill")" -ne "$n" ]; then
		seq 1 100000000 | head -c "$n" >"$scratch/fill"
		md5sum <"$scratch/fill" | cut -d' ' -f1 >"$scratch/fill.md5"
	fi
	case "$BIN" in
	*mdtool*) nbdcopy "$scratch/fill" "$(nbduri "$1")" ;;
	*) dd if="$scratch/fill" of="$1" bs=1M conv=fsync 2>/dev/null ;;
	esac
}
readback() {
	case "$BIN" in
	*mdtool*) h=$(nbdcopy "$(nbduri "$1")" - | md5sum | cut -d' ' -f1) ;;
	*)
		blockdev --flushbufs "$1"
		h=$(md5sum <"$1" | cut -d' ' -f1)
		;;
	esac
	[ "$h" = "$(cat "$scratch/fill.md5")" ] && r="as written" || r="differs: $h"
	logstep "data $1 $2" "$r"
}
# rocheck logs whether the array $1 takes a write (mdadm's tests' "check
# readonly"): its first 4 KiB, read and written back in place.
rocheck() {
	case "$BIN" in
	*mdtool*)
		s="$(nbduri "$1")"
		{ nbdcopy "$s" - 2>/dev/null | head -c 4096 >"$scratch/blk"; } && [ -s "$scratch/blk" ] && nbdcopy "$scratch/blk" "$s" 2>/dev/null && r=written || r=refused
		;;
	*) dd if="$1" of="$scratch/blk" bs=4096 count=1 2>/dev/null && dd if="$scratch/blk" of="$1" bs=4096 count=1 oflag=direct conv=notrunc 2>/dev/null && r=written || r=refused ;;
	esac
	rm -f "$scratch/blk"
	logstep "write $1" "$r"
}
# mdstate logs the State line of -D for the array $1.
mdstate() {
	logstep "state $1" "$("$BIN" -D "$1" 2>&1 | sed -n 's/^ *State : //p')"
}

# nbdsock is the NBD unix socket of mdtool's array $1, nbduri its URI.
nbdsock() {
	"$BIN" --detail "$1" | sed -n 's/^ *NBD Socket : //p'
}
nbduri() {
	echo "nbd+unix:///?socket=$(nbdsock "$1")"
}

# journalmode sets md's journal_mode of the array $1 to $2 and logs
# "set" or "refused: " and strerror's text: the VM writes sysfs, mdtool
# runs action --journal-mode (which words a refusal as a sysfs write's).
journalmode() {
	case "$BIN" in
	*mdtool*) err=$("$BIN" action --journal-mode="$2" "$1" 2>&1) ;;
	*) err=$( (echo "$2" >"/sys/block/$(basename "$(readlink -f "$1")")/md/journal_mode") 2>&1) ;;
	esac
	[ $? -eq 0 ] && r=set || r="refused: ${err##*: }"
	logstep "journal_mode $1 $2" "$r"
}

# writeat writes the file $2 at byte $3 of the array $1 and logs the step
# under the file's name: the VM through the page cache, as mdadm's tests
# write (md gets the pages when dd's close, the device's last, syncs it),
# in 1 KiB blocks (offsets and sizes are multiples of 1 KiB); mdtool
# through nbdkit's offset filter over the array's NBD socket, a window of
# the file's size at $3.
writeat() {
	n=$(($(wc -c <"$2")))
	case "$BIN" in
	*mdtool*)
		nbdkit -U - --filter=offset nbd socket="$(nbdsock "$1")" offset="$3" range="$n" \
			--run "nbdcopy '$2' \"\$uri\"" >/dev/null 2>&1
		;;
	*) dd if="$2" of="$1" bs=1024 seek=$(($3 / 1024)) count=$((n / 1024)) conv=notrunc 2>/dev/null ;;
	esac
	[ $? -eq 0 ] && r=written || r=failed
	logstep "write $1 $(basename "$2") at $3" "$r"
}

# cmpfirst logs whether the first 4 KiB of the array $1 are the file $2
# ("same" or "differs"), under the file's name.
cmpfirst() {
	case "$BIN" in
	*mdtool*)
		nbdkit -U - --filter=offset nbd socket="$(nbdsock "$1")" range=4096 --run 'nbdcopy "$uri" -' 2>/dev/null |
			cmp -s - "$2"
		;;
	*) cmp -s -n 4096 "$2" "$1" ;;
	esac
	[ $? -eq 0 ] && r=same || r=differs
	logstep "cmp $1 $(basename "$2")" "$r"
}

# logstep logs a step that is not a command: "### $1", the text $2, no
# stderr, exit 0.
logstep() {
	printf '### %s\n%s\n--- stderr\n--- rc=0\n' "$1" "$2" >>"$LOG"
}
