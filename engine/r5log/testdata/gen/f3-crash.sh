set -e
i=0; while [ $i -lt 1024 ]; do printf "%-4095s\n" "f3 block $i pattern" ; i=$((i+1)); done > /tmp/pat
mdadm -CR /dev/md0 -l5 -n4 -c64 --homehost=any --name=f3 /dev/vda /dev/vdb /dev/vdc /dev/vdd --write-journal /dev/vde 2>&1
mdadm --wait /dev/md0 || true
echo write-back > /sys/block/md0/md/journal_mode
cat /sys/block/md0/md/journal_mode
mdadm -E /dev/vde > /share/create-E-journal.txt
dd if=/tmp/pat of=/dev/md0 bs=192k count=6 oflag=direct 2>&1
for b in 100 116 200 300; do dd if=/tmp/pat of=/dev/md0 bs=4k count=1 skip=$b seek=$b oflag=direct 2>/dev/null; done
dd if=/tmp/pat of=/dev/md0 bs=4k count=1 skip=500 seek=100 oflag=direct 2>/dev/null
dd if=/tmp/pat of=/dev/md0 bs=8k count=1 skip=200 seek=200 oflag=direct 2>/dev/null
cat /proc/mdstat
mdvm-crash 0
