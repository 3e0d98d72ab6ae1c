# tests/05r1-add-internalbitmap-v1b (metadata 1.1) without its "check" and
# "testdev" lines (the kernel's block device, /proc/mdstat): the final -X of
# each member shows the bitmap added by --grow and kept by the assembly.
mdadm --create --run $md0 --metadata=1.1 --level=1 -n2 --delay=1 $dev1 $dev2
settle $md0
mdadm -Gb internal --bitmap-chunk=4 $md0
mdadm -S $md0

mdadm --assemble $md0 $dev1 $dev2
mdadm -S $md0
