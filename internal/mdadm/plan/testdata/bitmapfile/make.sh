U=0a1b2c3d:4e5f6071:8293a4b5:c6d7e8f9
mdadm --create /dev/md0 --run -l1 -n2 --uuid=$U --homehost=any --bitmap=/tmp/r1.bm /dev/vda /dev/vdb; echo rc=$?
mdadm --create /dev/md1 --run -e 0.90 -l1 -n2 --uuid=$U --delay=3 --bitmap-chunk=64K --bitmap=/tmp/r1-090.bm /dev/vda /dev/vdb; echo rc=$?
mdadm --create /dev/md2 --run -l10 -n4 -c64 --uuid=$U --homehost=any --write-behind=256 --bitmap=/tmp/r10.bm /dev/vda /dev/vdb /dev/vdc /dev/vdd; echo rc=$?
mdadm --create /dev/md3 --run -l5 -n3 -c64 --uuid=$U --homehost=any --bitmap=/tmp/r5.bm /dev/vda /dev/vdb /dev/vdc; echo rc=$?
ls -l /tmp/*.bm; cp /tmp/*.bm /share/; mdadm -E /dev/vda | head -5
