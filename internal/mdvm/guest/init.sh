#!/bin/sh
# PID 1 of the mdvm guest (internal/mdvm). Sets up the guest, runs
# /mdvm/cmds.sh with its output on the second serial port between the
# run's markers, then powers off.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null || mount -t tmpfs dev /dev
mkdir -p /dev/pts /dev/shm /run/mdadm /tmp /root /share /etc/mdadm /var/tmp
mount -t devpts devpts /dev/pts 2>/dev/null
mount -t tmpfs -o mode=1777 shm /dev/shm 2>/dev/null
. /mdvm/config
hostname "$MDVM_HOSTNAME"
echo "$MDVM_HOSTNAME" >/etc/hostname
echo 0 >/proc/sys/kernel/printk_ratelimit 2>/dev/null
kdir=/lib/modules/$(uname -r)
while read -r ko; do
	[ -n "$ko" ] || continue
	insmod "$kdir/$ko" || echo "mdvm init: cannot load $ko" >/dev/console
done </etc/mdvm/modules
# the virtio disks appear asynchronously
i=0
while [ "$(ls -d /sys/block/vd* 2>/dev/null | wc -l)" -lt "$MDVM_NDISKS" ] && [ $i -lt 200 ]; do
	sleep 0.1
	i=$((i + 1))
done
if [ "$MDVM_SHARE" = 1 ]; then
	while read -r ko; do
		[ -n "$ko" ] && insmod "$kdir/$ko" 2>/dev/null
	done </etc/mdvm/modules.9p
	mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,access=any mdvmshare /share ||
		echo "mdvm init: cannot mount /share" >/dev/console
fi
d=
for b in /sys/block/vd*; do
	[ -e "$b" ] && d="$d /dev/${b##*/}"
done
export MDVM_DISKS="${d# }"
stty -F /dev/ttyS1 raw -echo 2>/dev/null
exec 3>/dev/ttyS1
echo "__MDVM_BEGIN_${MDVM_NONCE}__" >&3
cd /root
if [ "$MDVM_TRACE" = 1 ]; then
	/bin/sh -x /mdvm/cmds.sh </dev/null >&3 2>&3
else
	/bin/sh /mdvm/cmds.sh </dev/null >&3 2>&3
fi
rc=$?
printf '%s\n%s\n' "__MDVM_END_${MDVM_NONCE}__" "__MDVM_RC=$rc" >&3
exec 3>&-
sync
if [ "$MDVM_KLOG" = 1 ]; then
	{
		echo
		echo "__MDVM_KLOG_BEGIN_${MDVM_NONCE}__"
		dmesg
		echo "__MDVM_KLOG_END_${MDVM_NONCE}__"
	} >/dev/console
fi
# the last close of the port and tcsetattr wait until the UART has sent everything
stty -F /dev/ttyS1 raw -echo 2>/dev/null
: >/dev/ttyS1
poweroff -f
