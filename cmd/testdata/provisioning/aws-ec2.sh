# AWS EC2 User Guide, "Create a RAID array on Linux"
# (https://docs.aws.amazon.com/ebs/latest/userguide/raid-config.html, also in
# the awsdocs/amazon-ec2-user-guide repository): create with --verbose and a
# name, show it, record it with "mdadm --detail --scan | tee -a
# /etc/mdadm.conf". RAID 0 as the guide's first example, RAID 1 as its second
# (the guide answers the boot-device question at the terminal: "yes |" here).
mdadm --create --verbose /dev/md0 --level=0 --name=MY_RAID --raid-devices=2 $dev0 $dev1
mdadm --detail /dev/md0
mdadm --detail --scan | tee -a "$conf" >/dev/null
logconf
yes | mdadm --create --verbose /dev/md1 --level=1 --name=MY_RAID1 --raid-devices=2 $dev2 $dev3
settle /dev/md1
mdadm --detail /dev/md1
mdadm --detail --scan | tee -a "$conf" >/dev/null
logconf
