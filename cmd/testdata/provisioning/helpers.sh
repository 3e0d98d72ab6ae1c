# Appended to ../mdadm-tests/prelude.sh for the provisioning sequences.
# Nothing reads a terminal: mdadm's "Continue creating array?" gets no
# answer unless the script pipes one in, as the scripts it follows do.
exec </dev/null

# conf is the mdadm.conf the sequence writes (the scripts' /etc/mdadm.conf
# or /etc/mdadm/mdadm.conf).
conf="$targetdir/mdadm.conf"
: >"$conf"

# logconf logs the mdadm.conf as it is now, as a step of its own.
logconf() {
	{
		echo "### file mdadm.conf"
		cat "$conf"
		echo "--- stderr"
		echo "--- rc=0"
	} >>"$LOG"
}

# For the grow-* sequences (mdadm 4.2's restriping --grow forms): the same
# 1 MiB (seq's output) written to the array before the grows and its md5
# logged after each, as a step of its own. mdadm reads and writes the md
# device; mdtool on the host has none (MDTOOL_DEVICE=none) and uses its
# NBD socket.
pattern() {
	seq 1 200000 | head -c 1048576
}
putdata() {
	case "$BIN" in
	*mdtool*) pattern >"$targetdir/pattern" && nbdcopy "$targetdir/pattern" "nbd+unix:///?socket=$(nbdsock "$1")" ;;
	*) pattern | dd of="$1" bs=65536 conv=fsync 2>/dev/null ;;
	esac
}
logdata() {
	case "$BIN" in
	*mdtool*)
		nbdcopy "nbd+unix:///?socket=$(nbdsock "$1")" "$targetdir/read"
		h=$(head -c 1048576 "$targetdir/read" | md5sum)
		rm -f "$targetdir/read"
		;;
	*) h=$(head -c 1048576 "$1" | md5sum) ;;
	esac
	{
		echo "### data $1"
		[ "$h" = "$(pattern | md5sum)" ] && echo "as written" || echo "differs: $h"
		echo "--- stderr"
		echo "--- rc=0"
	} >>"$LOG"
}
# waitlevel waits (at most 60 s) for $1 to reach level $2: mdadm's forked
# child (mdtool's daemon) imposes the final level when the reshape ends.
waitlevel() {
	end=$(($(date +%s) + 60))
	while [ "$(date +%s)" -lt $end ]; do
		"$BIN" --detail "$1" 2>/dev/null | grep -q "Raid Level : $2\$" && return 0
		sleep 0.2
	done
	return 0
}
# servedmd5 leaves the md5 of the whole array $1 in $targetdir/served.md5
# (not a step of the log): the test compares mdtool's with the md5 the
# kernel reads from mdtool's final images.
servedmd5() {
	case "$BIN" in
	*mdtool*) nbdcopy "nbd+unix:///?socket=$(nbdsock "$1")" - | md5sum | cut -d' ' -f1 >"$targetdir/served.md5" ;;
	*) md5sum <"$1" | cut -d' ' -f1 >"$targetdir/served.md5" ;;
	esac
}
