# tests/05r1-grow-internal-1 (metadata 1.0) without its "check" and
# "testdev" lines (the kernel's block device, /proc/mdstat) and its timed
# dirty counts: the bitmap that --grow adds (-X of dev2 while the array
# runs, its dirty count masked: the bitmap daemon clears the bits that
# --grow set at its own pace), then its removal; the final -E and -X show
# it gone.
mdadm --create --run $md0 -e1 -l 1 -n 2 $dev1 $dev2
settle $md0

mdadm --grow $md0 --bitmap=internal --bitmap-chunk=4 --delay=1
mdadm -X $dev2

mdadm --grow $md0 --bitmap=none
mdadm -S $md0
