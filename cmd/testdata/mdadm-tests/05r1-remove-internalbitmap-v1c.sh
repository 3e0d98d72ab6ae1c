# tests/05r1-remove-internalbitmap-v1c (metadata 1.2) without its "check" and
# "testdev" lines (the kernel's block device, /proc/mdstat): the final -E
# and -X of each member show the bitmap gone after the assembly.
mdadm --create --run $md0 --metadata=1.2 --level=1 -n2 --bitmap internal --bitmap-chunk=4 --delay=1 $dev1 $dev2
settle $md0
mdadm -Gb none $md0
mdadm -S $md0

mdadm --assemble $md0 $dev1 $dev2
mdadm -S $md0
