# tests/03r0assem: the v1 part (the 0.90 part needs create -e 0.90, h7;
# the -I lines are h7's).
mdadm -CR $md2 -l0 -n3 $dev0 $dev1 $dev2
uuid=`mdadm -Db $md2 | sed 's/.*UUID=//'`
mdadm -S $md2

mdadm -A $md2 $dev0 $dev1 $dev2
mdadm -S $md2

mdadm -A $md2 -u $uuid $devlist
mdadm -S $md2

mdadm --assemble $md2 --name=2 $devlist
mdadm -S $md2

conf=$targetdir/mdadm.conf
{
  echo DEVICE $devlist
  echo array $md2 UUID=$uuid
} > $conf
mdadm -As -c $conf $md2
mdadm -S $md2

{
  echo DEVICE $devlist
  echo array $md2 name=2
} > $conf
mdadm -As -c $conf $md2
mdadm -S $md2

{
  echo DEVICE $devlist
  echo array $md2 devices=$dev0,$dev1,$dev2
} > $conf
mdadm -As -c $conf $md2

echo "DEVICE $devlist" > $conf
mdadm -Db $md2 >> $conf
mdadm -S $md2

mdadm --assemble --scan --config=$conf $md2
mdadm -S $md2

echo "  metadata=0.90 devices=$dev0,$dev1,$dev2" >> $conf
mdadm --assemble --scan --config=$conf $md2
mdadm -S $md2
