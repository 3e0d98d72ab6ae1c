i=0; while [ $i -lt 2048 ]; do printf "%-4095s\n" "f2 block $i pattern" ; i=$((i+1)); done > /tmp/pat
mdadm --assemble /dev/md0 /dev/vda /dev/vdb /dev/vdc /dev/vdd /dev/vde /dev/vdf 2>&1
cat /proc/mdstat
echo pat22=$(dd if=/tmp/pat bs=192k count=22 2>/dev/null | md5sum) md5=$(dd if=/dev/md0 bs=192k count=22 2>/dev/null | md5sum)
echo check > /sys/block/md0/md/sync_action; sleep 0.5; mdadm --wait /dev/md0; echo mismatch=$(cat /sys/block/md0/md/mismatch_cnt)
mdadm --stop /dev/md0
mdadm -E /dev/vdf > /share/after-E-journal.txt
dd if=/dev/vdf of=/share/after-journal.img bs=1M 2>/dev/null
