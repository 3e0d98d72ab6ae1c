#!/bin/sh
# mdvm-crash [RC]: a power cut. The run ends at once with status RC
# (default 0): no sync, no md shutdown, so arrays stay active and bitmap
# bits dirty; only what already reached the virtual disks survives.
. /mdvm/config
if [ "$MDVM_KLOG" = 1 ]; then
	{
		echo
		echo "__MDVM_KLOG_BEGIN_${MDVM_NONCE}__"
		dmesg
		echo "__MDVM_KLOG_END_${MDVM_NONCE}__"
	} >/dev/console
fi
printf '%s\n%s\n' "__MDVM_END_${MDVM_NONCE}__" "__MDVM_RC=${1:-0}" >/dev/ttyS1
stty -F /dev/ttyS1 raw -echo
echo b >/proc/sysrq-trigger
