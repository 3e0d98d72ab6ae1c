# tests/03r5assem (0.90 raid5 assembled in many ways, also with a member
# missing) without its "check" and testdev lines, which read the kernel's
# block device; the "mdadm -S" of its $tst stays. "check wait" is settle.
mdadm -CR -e 0.90 $md1 -l5 -n3 $dev0 $dev1 $dev2
uuid=`mdadm -Db $md1 | sed 's/.*UUID=//'`
settle $md1
mdadm -S $md1

mdadm -A $md1 $dev0 $dev1 $dev2
mdadm -S $md1

mdadm -A $md1 -u $uuid $devlist
mdadm -S $md1

mdadm -A $md1 -m 1 $devlist
mdadm -S $md1

conf=$targetdir/mdadm.conf
{
  echo DEVICE $devlist
  echo array $md1 UUID=$uuid
} > $conf

mdadm -As -c $conf $md1
mdadm -S $md1

{
  echo DEVICE $devlist
  echo array $md1 super-minor=1
} > $conf

mdadm -As -c $conf
mdadm -S $md1

{
  echo DEVICE $devlist
  echo array $md1 devices=$dev0,$dev1,$dev2
} > $conf

mdadm -As -c $conf

echo "DEVICE $devlist" > $conf
mdadm -Db $md1 >> $conf
mdadm -S $md1

mdadm --assemble --scan --config=$conf $md1
mdadm -S $md1

echo "  metadata=0.90 devices=$dev0,$dev1,$dev2" >> $conf
mdadm --assemble --scan --config=$conf $md1
mdadm -S $md1

### Now with a missing device

mdadm -AR $md1 $dev0 $dev2 #
mdadm -S $md1

mdadm -A $md1 -u $uuid $devlist
mdadm -S $md1

mdadm -A $md1 -m 1 $devlist
mdadm -S $md1

conf=$targetdir/mdadm.conf
{
  echo DEVICE $devlist
  echo array $md1 UUID=$uuid
} > $conf

mdadm -As -c $conf $md1
mdadm -S $md1

{
  echo DEVICE $devlist
  echo array $md1 super-minor=1
} > $conf

mdadm -As -c $conf
mdadm -S $md1

{
  echo DEVICE $devlist
  echo array $md1 devices=$dev0,$dev1,$dev2
} > $conf

mdadm -As -c $conf

echo "DEVICE $devlist" > $conf
mdadm -Db $md1 >> $conf
mdadm -S $md1

mdadm --assemble --scan --config=$conf $md1
mdadm -S $md1

echo "  metadata=0.90 devices=$dev0,$dev1,$dev2" >> $conf
mdadm --assemble --scan --config=$conf $md1
mdadm -S $md1
