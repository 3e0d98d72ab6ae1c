mdadm --assemble /dev/md0 /dev/vda /dev/vdb /dev/vdc /dev/vdd /dev/vde 2>&1
mdadm --stop /dev/md0
dd if=/dev/vde of=/share/after-journal.img bs=1M 2>/dev/null
