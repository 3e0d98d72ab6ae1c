# tests/07autoassemble without arrays on arrays (md devices as members are
# block devices: h1's): two raid1s stopped, then found by -As with no
# mdadm.conf, which reads every block device.
mdadm -CR $md1 -l1 -n2 $dev0 $dev1 --homehost=testing
mdadm -CR $md2 -l1 -n2 $dev2 $dev3 --homehost=testing
settle $md1
settle $md2
mdadm -Ss
mdadm -Es -c /dev/null
mdadm -As -c /dev/null --homehost=testing
mdadm -Ss
