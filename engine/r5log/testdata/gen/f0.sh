set -e
mdadm -CR /dev/md0 -l5 -n4 -c64 --homehost=any --name=f0 /dev/vda /dev/vdb /dev/vdc /dev/vdd --write-journal /dev/vde 2>&1
mdadm -S /dev/md0
mdadm -E /dev/vde > /share/E-journal.txt
DO=$(mdadm -E /dev/vde | sed -n 's/.*Data Offset : \([0-9]*\) sectors.*/\1/p')
echo DO=$DO
dd if=/dev/vde of=/share/sb.bin bs=4096 skip=1 count=1 2>/dev/null
dd if=/dev/vde of=/share/log-head.bin bs=512 skip=$DO count=16 2>/dev/null
