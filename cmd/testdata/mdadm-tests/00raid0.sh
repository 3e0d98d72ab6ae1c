# tests/00raid0: raid0, default metadata, then -e1.0 with chunks 4 32 256.
# Members are zeroed between arrays (re-creating over old superblocks is
# 00raid0-recreate); the -e0.90 and -B parts are 00raid0-090.
mdadm -CR $md0 -l raid0 -n3 $dev0 $dev1 $dev2
mdadm -S $md0
for chunk in 4 32 256; do
	quiet --zero-superblock $devlist
	mdadm -CR $md0 -e1.0 -l0 -c $chunk -n4 $dev0 $dev1 $dev2 $dev3
	mdadm -S $md0
done
