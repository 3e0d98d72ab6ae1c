set -e
i=0; while [ $i -lt 2048 ]; do printf "%-4095s\n" "f2 block $i pattern" ; i=$((i+1)); done > /tmp/pat
mdadm -CR /dev/md0 -l6 -n5 -c64 --homehost=any --name=f2 /dev/vda /dev/vdb /dev/vdc /dev/vdd /dev/vde --write-journal /dev/vdf 2>&1
mdadm --wait /dev/md0 || true
cat /proc/mdstat
mdadm -E /dev/vdf > /share/create-E-journal.txt
dd if=/tmp/pat of=/dev/md0 bs=192k count=22 oflag=direct 2>&1
mdvm-crash 0
