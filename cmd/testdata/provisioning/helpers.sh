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
