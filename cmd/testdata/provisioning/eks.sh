# awslabs/amazon-eks-ami, templates/shared/runtime/bin/setup-local-disks
# (maybe_raid0): "mdadm --create --force --verbose /dev/md/kubernetes
# --level=0 --name=kubernetes --raid-devices=N DISKS", --detail polled for
# "resyncing", "mdadm --detail --scan > /.aws/mdadm.conf".
mdadm --create --force --verbose /dev/md/kubernetes --level=0 --name=kubernetes --raid-devices=2 $dev0 $dev1
mdadm --detail /dev/md/kubernetes
mdadm --detail --scan >"$conf"
logconf
