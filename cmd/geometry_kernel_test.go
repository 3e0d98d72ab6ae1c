package cmd

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"mdtool/internal/mdvm"
)

// geometryRun runs geometryScript on 4 virtio disks in the VM of kernel
// ("" = 6.1) with device-mapper, and checks issue 12's geometry item on
// the block device the door gives: raid5, 4 disks, 512K chunks through
// the device-mapper shim (/dev/md/geo -> /dev/dm-0 over the door): io_min
// 524288, io_opt 1572864, mkfs.ext4's stride 128 and stripe width 384;
// stop refused while mounted, the daemon killed with SIGKILL under a
// mounted ext4 with fio verify running and assembled again (the dm device
// stays, the door below is re-attached), assemble --scan, e2fsck clean,
// stop --force while mounted (read-only) removes the dm device once the
// mount goes;
// then the kernel md driver reads the same files and its check finds
// mismatch_cnt 0, which proves the shim's mapping is the identity. With
// MDTOOL_SHIM_COST set (make bench-shim), last, fio through the shim and
// through the door below it (geometryCostScript; figures in the log, not
// checked: TCG on a shared machine).
func geometryRun(t *testing.T, kernel, door string, modules []string) string {
	bin := mdtoolBinary(t)
	dir := t.TempDir()
	var disks []mdvm.Disk
	for i := 0; i < 4; i++ {
		disks = append(disks, mdvm.Disk{Path: sparse(t, dir, fmt.Sprintf("g%d.img", i), 64<<20)})
	}
	script := geometryScript
	if os.Getenv("MDTOOL_SHIM_COST") != "" {
		script = strings.Replace(script, "echo DONE\n", geometryCostScript+"echo DONE\n", 1)
	}
	start := time.Now()
	out := string(mdvm.MustExec(t, mdvm.Run{
		Kernel:  kernel,
		Disks:   disks,
		Bins:    append([]string{bin, "/usr/sbin/blockdev", "/usr/sbin/dumpe2fs"}, kernelNBDBins...),
		Modules: modules,
		Mem:     1536,
		Script:  "DOOR=" + door + "\n" + script,
		Timeout: 1800 * time.Second,
	}))
	t.Logf("VM run: %v\n%s", time.Since(start), out)
	if strings.Contains(out, "FAIL:") || !strings.Contains(out, "DONE") {
		t.Fatalf("guest script failed")
	}
	wantLines(t, out,
		"mdtool: /dev/md/geo attached as /dev/dm-0 ("+door+")\n",
		"/dev/md/geo -> ../dm-0\n",
		"      Block Device : /dev/dm-0 ("+door+")\n",
		"iomin=524288 ioopt=1572864\n",
		"RAID stride:              128\n", "RAID stripe width:        384\n",
		"mdtool: Cannot get exclusive access to /dev/md/geo:Perhaps a running process, mounted filesystem or active volume group?\nstop-mounted rc=1\n",
		"mdtool: /dev/md/geo re-attached as /dev/dm-0 ("+door+")\nre-assemble rc=0\n",
		"same device after kill: /dev/dm-0\n", "mounted=1\n", "fio after kill rc=0 err= 0",
		"iomin after kill=524288 ioopt=1572864\n",
		"dm device gone after stop\n",
		"assemble-scan rc=0\n", "f1: OK\nf2: OK\n", "e2fsck rc=0\n",
		"mdtool: stopped /dev/md/geo\nforced stop rc=0\n", "dm device gone after a forced stop\n",
		"kernel md5 OK\n", "kernel e2fsck rc=0\n", "kernel mismatch_cnt=0\n")
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "COST ") {
			t.Log(l)
		}
	}
	return out
}

// TestKernelGeometryUblk: the geometry through ublk on Linux 6.12, where
// ublk's power-of-two hints cannot say a 1.5 MiB full stripe.
func TestKernelGeometryUblk(t *testing.T) {
	mdvm.Parallel(t)
	mdvm.RequireKernel(t, "6.12")
	out := geometryRun(t, "6.12", "ublk", []string{"ublk_drv", "nbd", "ext4", "dm_mod"})
	wantLines(t, out, "lower=ublkb0\n")
}

// TestKernelGeometryNBD: the geometry through the kernel NBD client on
// Linux 6.1, which carries no I/O hints.
func TestKernelGeometryNBD(t *testing.T) {
	mdvm.Parallel(t)
	mdvm.Require(t)
	out := geometryRun(t, "", "nbd", []string{"nbd", "ext4", "dm_mod"})
	wantLines(t, out, "lower=nbd0\n")
}

const geometryScript = `M=/usr/bin/mdtool
B=/usr/bin
fail() { echo "FAIL: $*"; tail -30 /run/mdtool/*.log 2>/dev/null; dmesg | tail -20; exit 1; }
mkdir -p /etc/mdadm /mnt
[ -c /dev/mapper/control ] || fail "no /dev/mapper/control"
$M --create /dev/md/geo --device=$DOOR --level=5 --raid-devices=4 --chunk=512 --bitmap=internal --run /dev/vda /dev/vdb /dev/vdc /dev/vdd 2>&1 || fail create
ls -l /dev/md/geo | sed 's/.* \/dev/\/dev/'
dev=$(readlink -f /dev/md/geo)
echo "lower=$(ls /sys/block/${dev#/dev/}/slaves)"
$M --detail /dev/md/geo | grep -E 'Block Device'
echo "iomin=$($B/blockdev --getiomin $dev) ioopt=$($B/blockdev --getioopt $dev)"
$M --wait /dev/md/geo
$M --detail --scan >> /etc/mdadm/mdadm.conf
$B/mke2fs -t ext4 -b 4096 -q -L data /dev/md/geo || fail mkfs
$B/dumpe2fs -h /dev/md/geo 2>/dev/null | grep -E "RAID stride|RAID stripe width"
mount /dev/md/geo /mnt || fail mount
for i in 1 2; do dd if=/dev/urandom of=/mnt/f$i bs=64k count=$((i*40)) 2>/dev/null; done
sync
(cd /mnt && md5sum f1 f2) > /tmp/sums
$M --stop /dev/md/geo; echo "stop-mounted rc=$?"
echo "== daemon killed under a mounted file system"
$B/fio --name=k --filename=/mnt/kf --size=16M --ioengine=libaio --direct=1 --rw=randwrite --bs=4k --iodepth=8 --verify=crc32c --verify_fatal=1 --output=/tmp/fiok >/dev/null 2>&1 &
fpid=$!
sleep 3
pid=$(cat /run/mdtool/geo.lock)
kill -9 $pid; echo "killed daemon $pid"
sleep 1
$M --assemble --device=$DOOR /dev/md/geo /dev/vda /dev/vdb /dev/vdc /dev/vdd 2>&1; echo "re-assemble rc=$?"
echo "same device after kill: $(readlink -f /dev/md/geo)"
wait $fpid; echo "fio after kill rc=$? $(grep -o 'err= *[0-9]*' /tmp/fiok | head -1)"
echo "mounted=$(grep -c ' /mnt ' /proc/mounts)"
echo "iomin after kill=$($B/blockdev --getiomin $dev) ioopt=$($B/blockdev --getioopt $dev)"
rm -f /mnt/kf
umount /mnt || fail umount
$M --stop /dev/md/geo; echo "stop rc=$?"
[ -e /sys/block/${dev#/dev/} ] || echo "dm device gone after stop"
$M --assemble --scan; echo "assemble-scan rc=$?"
mount LABEL=data /mnt || fail "mount LABEL=data"
(cd /mnt && md5sum -c /tmp/sums) || fail "files after assemble --scan"
umount /mnt
$B/e2fsck -fn /dev/md/geo >/tmp/fsck 2>&1; echo "e2fsck rc=$?"
mount -o ro /dev/md/geo /mnt || fail "mount ro"
$M --stop --force /dev/md/geo; echo "forced stop rc=$?"
umount -l /mnt
i=0; while [ -e /sys/block/${dev#/dev/} ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
[ -e /sys/block/${dev#/dev/} ] || echo "dm device gone after a forced stop"
[ -e /dev/md/geo ] && fail "/dev/md/geo left after a forced stop"
echo "== the kernel reads what the block device wrote"
mdadm --assemble /dev/md1 /dev/vda /dev/vdb /dev/vdc /dev/vdd 2>&1
$B/e2fsck -fn /dev/md1 >/tmp/fsck 2>&1; echo "kernel e2fsck rc=$?"
mount /dev/md1 /mnt && (cd /mnt && md5sum -c /tmp/sums) >/dev/null && echo "kernel md5 OK"; umount /mnt
mdadm --wait /dev/md1; echo check > /sys/block/md1/md/sync_action || fail check; mdadm --wait /dev/md1; echo "kernel mismatch_cnt=$(cat /sys/block/md1/md/mismatch_cnt)"
mdadm --stop /dev/md1
echo DONE
`

// geometryCostScript: fio through the shim and through the door below
// it, twice each in alternating order (the shim's cost). Only for
// `make bench-shim` (MDTOOL_SHIM_COST=1): a measurement, not a check, and
// four minutes of a CI guest.
const geometryCostScript = `echo "== the shim's cost: fio through the dm device and through the door below it"
$M --assemble --scan >/dev/null 2>&1 || fail "assemble for fio"
dev=$(readlink -f /dev/md/geo); low=/dev/$(ls /sys/block/${dev#/dev/}/slaves)
for target in $dev $low $low $dev; do
	for job in "randwrite 4k 32" "write 1M 4"; do
		set -- $job
		$B/fio --name=c --filename=$target --ioengine=libaio --direct=1 --rw=$1 --bs=$2 --iodepth=$3 --size=256M \
			--runtime=15 --time_based --group_reporting --output-format=terse --output=/tmp/cost >/dev/null 2>&1 || fail "fio $target $job"
		# terse v3: field 49 write IOPS, 48 write bandwidth KiB/s
		echo "COST $target $1 $2 iops=$(cut -d';' -f49 /tmp/cost) kib_s=$(cut -d';' -f48 /tmp/cost)"
	done
done
$M --stop /dev/md/geo || fail stop3
`
