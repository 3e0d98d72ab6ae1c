# kilnfi/ansible-mdadm (a fork of mrlesmithjr/ansible-mdadm),
# tasks/arrays.yml: "yes | mdadm --create /dev/NAME --level=L --chunk=512K
# --metadata=1.2 --raid-devices=N DEVS" (no --chunk for raid1), then
# "mdadm --detail --scan" into mdadm.conf. The second array is a
# re-provisioning: its members held an earlier array, and the "yes" answers
# mdadm's "Continue creating array?".
yes | mdadm --create /dev/md0 --level=5 --chunk=512K --metadata=1.2 --raid-devices=3 $dev0 $dev1 $dev2
settle /dev/md0
mdadm --detail --scan >>"$conf"
logconf
mdadm -CR /dev/md1 -l0 -n2 $dev3 $dev4
mdadm --stop /dev/md1
yes | mdadm --create /dev/md1 --level=1 --metadata=1.2 --raid-devices=2 $dev3 $dev4
settle /dev/md1
mdadm --detail --scan >>"$conf"
logconf
mdadm --stop /dev/md1
