package cmd

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"mdtool/internal/mdvm"
)

// TestKernelUblk runs the block-device acceptance on Linux 6.12 through the
// ublk door (--device=auto picks ublk there): raid5 on 4 virtio disks with
// 512K chunks as /dev/ublkb0 behind /dev/md0, its geometry as far as ublk
// carries it (io_min = chunk; io_opt = the largest power-of-two divisor of
// the 1.5 MiB full stripe, since ublk takes shifts), mkfs.ext4 and a
// mount, stop refused while mounted (mdadm's text), the daemon killed with
// SIGKILL while fio verify runs on the mounted file system and assembled
// again (UBLK_F_USER_RECOVERY: the same /dev/ublkb0, the mount stays, fio's
// verify passes), assemble --scan and mount LABEL=data, e2fsck clean; then
// the kernel md driver assembles the disks: same files, check gives
// mismatch_cnt 0.
func TestKernelUblk(t *testing.T) {
	mdvm.Parallel(t)
	mdvm.RequireKernel(t, "6.12")
	bin := mdtoolBinary(t)
	dir := t.TempDir()
	var disks []mdvm.Disk
	for i := 0; i < 4; i++ {
		disks = append(disks, mdvm.Disk{Path: sparse(t, dir, fmt.Sprintf("u%d.img", i), 128<<20)})
	}
	start := time.Now()
	out := string(mdvm.MustExec(t, mdvm.Run{
		Kernel:  "6.12",
		Disks:   disks,
		Bins:    append([]string{bin, "/usr/sbin/blockdev", "/usr/sbin/dumpe2fs"}, kernelNBDBins...),
		Modules: []string{"ublk_drv", "nbd", "ext4"},
		Mem:     1536,
		Script:  ublkScript,
		Timeout: 1500 * time.Second,
	}))
	t.Logf("VM run: %v\n%s", time.Since(start), out)
	if strings.Contains(out, "FAIL:") || !strings.Contains(out, "DONE") {
		t.Fatalf("guest script failed")
	}
	wantLines(t, out,
		"mdtool: /dev/md0 attached as /dev/ublkb0 (ublk)\n",
		"/dev/md0 -> ublkb0\n",
		"      Block Device : /dev/ublkb0 (ublk)\n",
		"iomin=524288 ioopt=524288\n",
		// 4K blocks: stride = chunk (128 blocks); the stripe width is
		// io_opt's 512K (128 blocks), not the 1536K full stripe (384),
		// which ublk's power-of-two hints cannot carry.
		"RAID stride:              128\n", "RAID stripe width:        128\n",
		"mdtool: Cannot get exclusive access to /dev/md0:Perhaps a running process, mounted filesystem or active volume group?\nstop-mounted rc=1\n",
		"same device after kill: /dev/ublkb0\n", "mounted=1\n", "fio after kill rc=0 err= 0",
		"assemble-scan rc=0\n", "f1: OK\nf2: OK\n", "e2fsck rc=0\n",
		"kernel md5 OK\n", "kernel mismatch_cnt=0\n")
}

const ublkScript = `M=/usr/bin/mdtool
B=/usr/bin
fail() { echo "FAIL: $*"; tail -30 /run/mdtool/*.log 2>/dev/null; dmesg | tail -20; exit 1; }
mkdir -p /etc/mdadm /mnt
$M --create /dev/md0 --level=5 --raid-devices=4 --chunk=512 --bitmap=internal --run /dev/vda /dev/vdb /dev/vdc /dev/vdd 2>&1 || fail create
ls -l /dev/md0
$M --detail /dev/md0 | grep -E 'Block Device'
echo "iomin=$($B/blockdev --getiomin /dev/md0) ioopt=$($B/blockdev --getioopt /dev/md0)"
$M --wait /dev/md0
$M --detail --scan >> /etc/mdadm/mdadm.conf
$B/mke2fs -t ext4 -b 4096 -q -L data /dev/md0 || fail mkfs
$B/dumpe2fs -h /dev/md0 2>/dev/null | grep -E "RAID stride|RAID stripe width"
mount /dev/md0 /mnt || fail mount
for i in 1 2; do dd if=/dev/urandom of=/mnt/f$i bs=64k count=$((i*16)) 2>/dev/null; done
sync
(cd /mnt && md5sum f1 f2) > /tmp/sums
$M --stop /dev/md0; echo "stop-mounted rc=$?"
echo "== daemon killed under a mounted file system"
$B/fio --name=k --filename=/mnt/kf --size=16M --ioengine=libaio --direct=1 --rw=randwrite --bs=4k --iodepth=8 --verify=crc32c --verify_fatal=1 --output=/tmp/fiok >/dev/null 2>&1 &
fpid=$!
sleep 3
pid=$(cat /run/mdtool/md0.lock)
kill -9 $pid; echo "killed daemon $pid"
sleep 1
$M --assemble /dev/md0 /dev/vda /dev/vdb /dev/vdc /dev/vdd 2>&1; echo "re-assemble rc=$?"
echo "same device after kill: $(readlink -f /dev/md0)"
wait $fpid; echo "fio after kill rc=$? $(grep -o 'err= *[0-9]*' /tmp/fiok | head -1)"
echo "mounted=$(grep -c ' /mnt ' /proc/mounts)"
rm -f /mnt/kf
umount /mnt || fail umount
$M --stop /dev/md0; echo "stop rc=$?"
$M --assemble --scan; echo "assemble-scan rc=$?"
mount LABEL=data /mnt || fail "mount LABEL=data"
(cd /mnt && md5sum -c /tmp/sums) || fail "files after assemble --scan"
umount /mnt
$B/e2fsck -fn /dev/md0 >/tmp/fsck 2>&1; echo "e2fsck rc=$?"
$M --stop /dev/md0 || fail stop2
echo "== the kernel reads what the block device wrote"
mdadm --assemble /dev/md1 /dev/vda /dev/vdb /dev/vdc /dev/vdd 2>&1
mount /dev/md1 /mnt && (cd /mnt && md5sum -c /tmp/sums) >/dev/null && echo "kernel md5 OK"; umount /mnt
mdadm --wait /dev/md1; echo check > /sys/block/md1/md/sync_action || fail check; mdadm --wait /dev/md1; echo "kernel mismatch_cnt=$(cat /sys/block/md1/md/mismatch_cnt)"
mdadm --stop /dev/md1
echo DONE
`
