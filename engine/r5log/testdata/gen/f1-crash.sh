set -e
i=0; while [ $i -lt 1024 ]; do printf "%-4095s\n" "f1 block $i pattern" ; i=$((i+1)); done > /tmp/pat
mdadm -CR /dev/md0 -l5 -n4 -c64 --homehost=any --name=f1 /dev/vda /dev/vdb /dev/vdc /dev/vdd --write-journal /dev/vde 2>&1
cat /proc/mdstat
mdadm --wait /dev/md0 || true
cat /proc/mdstat
cat /sys/block/md0/md/journal_mode
mdadm -E /dev/vde > /share/create-E-journal.txt
mdadm -E /dev/vda > /share/create-E-d0.txt
DO=$(mdadm -E /dev/vde | sed -n 's/.*Data Offset : \([0-9]*\) sectors.*/\1/p')
echo DO=$DO
dd if=/dev/vde of=/share/create-log-head.bin bs=512 skip=$DO count=32 2>/dev/null
dd if=/tmp/pat of=/dev/md0 bs=192k count=5 oflag=direct 2>&1
sync
dd if=/tmp/pat of=/dev/md0 bs=192k skip=5 seek=5 count=16 oflag=direct 2>&1 &
sleep 0.05
mdvm-crash 0
