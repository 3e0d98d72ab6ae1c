# hetzneronline/installimage, functions.sh: make_swraid ("yes | mdadm -q -C
# MD -lL -nN $array_metadata [--assume-clean] COMPONENTS", --metadata=1.0
# for /boot/efi) and generate_config_mdadm ("DEVICES ..." and "MAILADDR
# root" written first, then "mdadm --examine --scan >> mdadm.conf").
yes | mdadm -q -C /dev/md0 -l1 -n2 --metadata=1.2 $dev0 $dev1
yes | mdadm -q -C /dev/md1 -l1 -n2 --metadata=1.0 --assume-clean $dev2 $dev3
settle /dev/md0
echo "DEVICE $devlist" >"$conf"
echo "MAILADDR root" >>"$conf"
mdadm --examine --scan --config="$conf" >>"$conf"
logconf
