# tests/04update-uuid: the v1 and internal-bitmap parts (0.90 and
# external bitmap files are h7's and not supported).
mdadm -CR --assume-clean -e1 $md0 -l5 -n3 $dev0 $dev1 $dev2
mdadm -S /dev/md0
mdadm -A /dev/md0 --update=uuid --uuid=0123456789abcdef:fedcba9876543210 $dev0 $dev1 $dev2
mdadm -Db /dev/md0
mdadm -S /dev/md0
