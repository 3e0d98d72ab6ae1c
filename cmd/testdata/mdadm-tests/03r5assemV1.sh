# tests/03r5assemV1: the part without a missing device (the rest slows the
# kernel's recovery down and uses -I, h7's).
mdadm -CR -e1 --name one $md1 -l5 -n3 -x2 $dev0 $dev1 $dev2 $dev3 $dev4
uuid=`mdadm -Db $md1 | sed 's/.*UUID=//'`
settle $md1
mdadm -S $md1

mdadm -A $md1 $dev0 $dev1 $dev2
mdadm $md1 --add $dev3 $dev4
mdadm -S $md1

mdadm -A $md1 -u $uuid $devlist
mdadm -S $md1

mdadm -A $md1 --name one $devlist
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
  echo array $md1 name=one
} > $conf
mdadm -As -c $conf
mdadm -S $md1

{
  echo DEVICE $devlist
  echo array $md1 devices=$dev0,$dev1,$dev2,$dev3,$dev4
} > $conf
mdadm -As -c $conf

echo "DEVICE $devlist" > $conf
mdadm -Db $md1 >> $conf
mdadm -S $md1
mdadm --assemble --scan --config=$conf $md1
mdadm -S $md1

echo "  metadata=1.0 devices=$dev0,$dev1,$dev2,$dev3,$dev4" >> $conf
mdadm --assemble --scan --config=$conf $md1
mdadm -S $md1
