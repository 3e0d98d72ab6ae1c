# mrlesmithjr/ansible-mdadm, tasks/arrays.yml: "state: present" creates with
# "yes | mdadm --create /dev/NAME --level=L --raid-devices=N DEVS", captures
# "mdadm --detail --scan" into mdadm.conf; "state: absent" stops, removes
# (mdadm --remove /dev/NAME) and zeroes every member's superblock.
yes | mdadm --create /dev/md0 --level=1 --raid-devices=2 $dev0 $dev1
settle /dev/md0
mdadm --detail --scan >>"$conf"
logconf
mdadm --stop /dev/md0
mdadm --remove /dev/md0
mdadm --zero-superblock $dev0
mdadm --zero-superblock $dev1
