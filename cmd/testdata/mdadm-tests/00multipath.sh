# tests/00multipath: md's multipath personality, two paths to one disk.
# mdadm runs it where the multipath module loads (Linux 6.1 has it; 6.8
# removed it), with $path0 and $path1 two loop devices over the same
# image ($dev6 and $dev7 in tests/func.sh, /dev/loop7 set up over
# mdtest6); both worlds run in the guest, on those loop devices.
#
# mdadm's "testdev $md1 1 $mdsize12 1" (mkfs.ext3, fsck, the size) and
# "rotest $md1" (fsck -n) become a fill of the whole array, a read back
# of it after each change and -D (the size among the rest). As in
# 01r5integ: mdadm 4.2 reads "-r DEV" as -r with DEV as its argument, a
# silent no-op, and its own test then stops at the "-a", which finds the
# path still in the array ("Cannot open ...: Device or resource busy"):
# here "--remove DEV" follows each "-r DEV".
mdadm -CR $md1 -l multipath -n2 $path0 $path1
fill $md1
readback $md1 "both paths"
mdadm -D $md1

mdadm $md1 -f $path0
readback $md1 "path0 failed"

mdadm $md1 -r $path0
mdadm $md1 --remove $path0
mdadm $md1 -a $path0
readback $md1 "path0 added back"
mdadm -D $md1

mdadm $md1 -f $path1
mdadm $md1 -r $path1
mdadm $md1 --remove $path1
readback $md1 "path1 removed"
mdadm -D $md1

mdadm -S $md1

# Not one of mdadm's steps: assembled again from both paths (md numbers
# them by the order mdadm adds them in, the chosen drive last).
mdadm -A $md1 $path0 $path1
mdadm -D $md1
mdadm -S $md1
