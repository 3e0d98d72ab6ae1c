# tests/00names: arrays with non-numeric names (CREATE names=yes). The
# "check $i" and /sys/class/block tests read the kernel and are left out;
# each array's resync is waited for (settle) before it is stopped, so that
# the last members' superblocks do not depend on how far it got.
conf=$targetdir/mdadm.conf
echo "CREATE names=yes" > $conf

for i in linear raid0 raid1 raid4 raid5 raid6
do
  mdadm -CR --config $conf /dev/md/$i -l $i -n 4 $dev4 $dev3 $dev2 $dev1
  settle /dev/md/$i
  mdadm -S md_$i
done
