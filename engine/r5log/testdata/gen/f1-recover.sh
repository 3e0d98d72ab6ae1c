i=0; while [ $i -lt 1024 ]; do printf "%-4095s\n" "f1 block $i pattern" ; i=$((i+1)); done > /tmp/pat
mdadm --assemble /dev/md0 /dev/vda /dev/vdb /dev/vdc /dev/vdd /dev/vde 2>&1
cat /proc/mdstat
dmesg | grep -i "md/raid\|md0" 
echo pat5=$(dd if=/tmp/pat bs=192k count=5 2>/dev/null | md5sum) md5=$(dd if=/dev/md0 bs=192k count=5 2>/dev/null | md5sum)
echo pat21=$(dd if=/tmp/pat bs=192k count=21 2>/dev/null | md5sum) md5=$(dd if=/dev/md0 bs=192k count=21 2>/dev/null | md5sum)
echo check > /sys/block/md0/md/sync_action; sleep 0.5; mdadm --wait /dev/md0; echo mismatch=$(cat /sys/block/md0/md/mismatch_cnt)
mdadm --stop /dev/md0
mdadm -E /dev/vde > /share/after-E-journal.txt
dd if=/dev/vde of=/share/after-journal.img bs=1M 2>/dev/null
