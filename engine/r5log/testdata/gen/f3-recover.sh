i=0; while [ $i -lt 1024 ]; do printf "%-4095s\n" "f3 block $i pattern" ; i=$((i+1)); done > /tmp/pat
mdadm --assemble /dev/md0 /dev/vda /dev/vdb /dev/vdc /dev/vdd /dev/vde 2>&1
cat /proc/mdstat
cat /sys/block/md0/md/journal_mode
sleep 1
echo pat=$(dd if=/tmp/pat bs=4k count=300 2>/dev/null | md5sum) md5=$(dd if=/dev/md0 bs=4k count=300 2>/dev/null | md5sum)
for b in 100 116 200 300 400 401; do echo blk$b: $(dd if=/dev/md0 bs=4k skip=$b count=1 2>/dev/null | head -c 20); done
echo check > /sys/block/md0/md/sync_action; sleep 0.5; mdadm --wait /dev/md0; echo mismatch=$(cat /sys/block/md0/md/mismatch_cnt)
mdadm --stop /dev/md0
dd if=/dev/vde of=/share/after-journal.img bs=1M 2>/dev/null
