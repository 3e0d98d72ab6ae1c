# Debian's mdadm package: /usr/share/mdadm/mkconf ("mdadm --examine --scan
# --config=partitions" for the ARRAY lines of the generated mdadm.conf,
# MAILADDR root), /etc/cron.daily/mdadm ("mdadm --monitor --scan
# --oneshot"), checkarray (sync_action "check": mdadm --action=check) and
# the usual health check "mdadm --detail --test".
mdadm -CR /dev/md0 -l1 -n2 $dev0 $dev1
mdadm -CR /dev/md1 -l5 -n3 $dev2 $dev3 $dev4
settle /dev/md0
settle /dev/md1
echo "MAILADDR root" >"$conf"
mdadm --examine --scan --config=partitions >>"$conf"
logconf
mdadm --monitor --scan --oneshot --config="$conf"
mdadm --detail --test /dev/md0
mdadm --action=check /dev/md1
settle /dev/md1
mdadm --detail --test /dev/md1
mdadm /dev/md0 --fail $dev1
mdadm --detail --test /dev/md0
mdadm --stop /dev/md0
