package cmd

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"mdtool/internal/mdvm"
)

// kernelNBDBins are the host programs the kernel NBD tests run in the VM
// (copied with their libraries; mkfs.ext4 arrives as mke2fs).
var kernelNBDBins = []string{"/usr/sbin/mkfs.ext4", "/usr/sbin/e2fsck", "/usr/sbin/losetup", "/usr/bin/fio"}

// kernelNBDRun runs script in the Linux 6.1 VM with the nbd and ext4
// modules and the mdtool binary, and fails on a "FAIL:" line.
func kernelNBDRun(t *testing.T, disks []mdvm.Disk, script string) string {
	t.Helper()
	mdvm.Require(t)
	bin := mdtoolBinary(t)
	start := time.Now()
	out := string(mdvm.MustExec(t, mdvm.Run{
		Disks:   disks,
		Bins:    append([]string{bin}, kernelNBDBins...),
		Modules: []string{"nbd", "ext4"},
		Mem:     1536,
		Script:  script,
		Timeout: 1500 * time.Second,
	}))
	t.Logf("VM run: %v\n%s", time.Since(start), out)
	if strings.Contains(out, "FAIL:") || !strings.Contains(out, "DONE") {
		t.Fatalf("guest script failed")
	}
	return out
}

func wantLines(t *testing.T, out string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(out, l) {
			t.Errorf("missing in the guest output: %q", l)
		}
	}
}

// TestKernelNBDProvisioning runs issue 12's provisioning script with
// mdtool for mdadm on 4 virtio disks in Linux 6.1, the array served as
// /dev/nbd0 (--device=auto picks NBD there): create raid10 with a bitmap,
// --detail --scan >> mdadm.conf, mkfs.ext4 -L data /dev/md0, mount, write
// files; stop refuses while mounted with mdadm's text (exit 1); umount,
// stop, assemble --scan, mount LABEL=data: files intact, e2fsck clean.
// Then the kernel md driver assembles the same disks: e2fsck clean, same
// files, check gives mismatch_cnt 0. The reverse: a raid5 made by mdadm
// and the kernel is assembled by mdtool as a block device and mounts with
// the same files; stop --force stops it while mounted, removes the link
// and leaves the superblocks clean.
func TestKernelNBDProvisioning(t *testing.T) {
	mdvm.Parallel(t)
	mdvm.Require(t)
	dir := t.TempDir()
	var disks []mdvm.Disk
	for i := 0; i < 4; i++ {
		disks = append(disks, mdvm.Disk{Path: sparse(t, dir, fmt.Sprintf("d%d.img", i), 96<<20)})
	}
	disks = append(disks, mdvm.Disk{Path: sparse(t, dir, "e.img", 256<<20)})
	out := kernelNBDRun(t, disks, provisioningScript)
	wantLines(t, out,
		"mdtool: /dev/md0 attached as /dev/nbd0 (nbd)\nmdtool: array /dev/md0 started.\n",
		"ARRAY /dev/md0 metadata=1.2 name=mdvm:0 UUID=",
		"/dev/md0 -> nbd0\n",
		"      Block Device : /dev/nbd0 (nbd)\n",
		"mdtool: Cannot get exclusive access to /dev/md0:Perhaps a running process, mounted filesystem or active volume group?\nstop-mounted rc=1\n",
		"mdtool: stopped /dev/md0\nstop rc=0\n",
		"assemble-scan rc=0\n", "f1: OK\nf2: OK\nf3: OK\nf4: OK\n", "\ne2fsck rc=0\n",
		"kernel e2fsck rc=0\n", "kernel md5 OK\n", "kernel mismatch_cnt=0\n",
		"/dev/md/rev -> ../nbd0\n", "rev md5 OK\n", "rev e2fsck rc=0\n", "rev stop rc=0\n",
		"mdtool: stopped /dev/md/rev\nforced stop rc=0\n", "\n3\nDONE")
}

// TestKernelNBDFioAndKill: fio verify (libaio, O_DIRECT, crc32c, 4 jobs,
// iodepth 32) through /dev/md/fN = /dev/nbd0 on raid1/5/6/10: no errors,
// and the kernel's check of the same members finds mismatch_cnt 0. Then
// the daemon of a mounted ext4 with fio running is killed with SIGKILL
// and assembled again: it re-attaches the same /dev/nbd0 (NBD reconfigure),
// the mount stays, fio's verify passes, e2fsck is clean and the kernel's
// check finds 0 mismatches.
func TestKernelNBDFioAndKill(t *testing.T) {
	mdvm.Parallel(t)
	mdvm.Require(t)
	img := sparse(t, t.TempDir(), "l.img", 1<<30)
	out := kernelNBDRun(t, []mdvm.Disk{{Path: img}}, fioKillScript)
	for _, l := range []int{1, 5, 6, 10} {
		wantLines(t, out, fmt.Sprintf("raid%d fio rc=0 err= 0\n", l), fmt.Sprintf("raid%d kernel mismatch_cnt=0\n", l))
	}
	wantLines(t, out, "mdtool: /dev/md/k re-attached as /dev/nbd0 (nbd)\nre-assemble rc=0\n",
		"fio after kill rc=0 err= 0", "mounted=1\n", "e2fsck after kill rc=0\n", "k kernel mismatch_cnt=0\n")
}

const provisioningScript = `M=/usr/bin/mdtool
B=/usr/bin
fail() { echo "FAIL: $*"; cat /run/mdtool/*.log 2>/dev/null | tail -20; exit 1; }
mkdir -p /etc/mdadm /mnt
echo "== A: provisioning"
$M --create /dev/md0 --level=10 --raid-devices=4 --bitmap=internal --bitmap-chunk=64M --run /dev/vda /dev/vdb /dev/vdc /dev/vdd 2>&1 || fail create
$M --detail --scan >> /etc/mdadm/mdadm.conf || fail detail-scan
cat /etc/mdadm/mdadm.conf
ls -l /dev/md0
$M --detail /dev/nbd0 | grep -E 'Block Device|State :'
$B/mke2fs -t ext4 -q -L data /dev/md0 || fail mkfs
mount /dev/md0 /mnt || fail mount
for i in 1 2 3 4; do dd if=/dev/urandom of=/mnt/f$i bs=64k count=$((i*16)) 2>/dev/null; done
(cd /mnt && md5sum f1 f2 f3 f4) > /tmp/sums
$M --stop /dev/md0; echo "stop-mounted rc=$?"
umount /mnt || fail umount
$M --stop /dev/md0; echo "stop rc=$?"
[ -e /dev/md0 ] && fail "/dev/md0 left after stop"
$M --assemble --scan; echo "assemble-scan rc=$?"
mount LABEL=data /mnt || fail "mount LABEL=data"
(cd /mnt && md5sum -c /tmp/sums) || fail "files after assemble --scan"
umount /mnt
$B/e2fsck -fn /dev/md0 >/tmp/fsck 2>&1; echo "e2fsck rc=$?"
$M --stop /dev/md0 || fail stop2
echo "== B: the kernel reads what the block device wrote"
mdadm --assemble /dev/md1 /dev/vda /dev/vdb /dev/vdc /dev/vdd 2>&1
$B/e2fsck -fn /dev/md1 >/tmp/fsck 2>&1; echo "kernel e2fsck rc=$?"
mount /dev/md1 /mnt && (cd /mnt && md5sum -c /tmp/sums) >/dev/null && echo "kernel md5 OK"; umount /mnt
mdadm --wait /dev/md1; echo check > /sys/block/md1/md/sync_action || fail check; mdadm --wait /dev/md1; echo "kernel mismatch_cnt=$(cat /sys/block/md1/md/mismatch_cnt)"
mdadm --stop /dev/md1
echo "== C: mdadm-made array served by mdtool"
L=""
for i in 0 1 2; do l=$($B/losetup -f --show -o $((i*80*1048576)) --sizelimit $((80*1048576)) /dev/vde) || fail losetup; L="$L $l"; done
mdadm --create /dev/md2 --run -l5 -n3 -c64 $L 2>&1; mdadm --wait /dev/md2
$B/mke2fs -t ext4 -q -L rev /dev/md2 || fail mkfs-rev
mount /dev/md2 /mnt && dd if=/dev/urandom of=/mnt/r1 bs=64k count=100 2>/dev/null && (cd /mnt && md5sum r1) > /tmp/rsums; umount /mnt
mdadm --stop /dev/md2
$M --assemble /dev/md/rev $L; echo "assemble rev rc=$?"
ls -l /dev/md/rev
mount /dev/md/rev /mnt && (cd /mnt && md5sum -c /tmp/rsums) && echo "rev md5 OK"; umount /mnt
$B/e2fsck -fn /dev/md/rev >/tmp/fsck 2>&1; echo "rev e2fsck rc=$?"
$M --stop /dev/md/rev; echo "rev stop rc=$?"
[ -e /dev/md/rev ] && fail "/dev/md/rev left after stop"
echo "== stop --force while mounted"
$M --assemble /dev/md/rev $L >/dev/null 2>&1 || fail "assemble rev again"
mount /dev/md/rev /mnt || fail "mount rev again"
$M --stop --force /dev/md/rev; echo "forced stop rc=$?"
umount -l /mnt
[ -e /dev/md/rev ] && fail "/dev/md/rev left after a forced stop"
mdadm --examine $L | grep -c "State : clean"
echo DONE
`

const fioKillScript = `M=/usr/bin/mdtool
B=/usr/bin
fail() { echo "FAIL: $*"; tail -20 /run/mdtool/*.log 2>/dev/null; exit 1; }
mkdir -p /mnt
n=0
loops() { # count MiB: L = that many new loop devices of MiB each on /dev/vda
	L=""
	for i in $(seq $1); do
		l=$($B/losetup -f --show -o $((n*1048576)) --sizelimit $(($2*1048576)) /dev/vda) || fail losetup
		n=$((n+$2)); L="$L $l"
	done
}
echo "== D: fio verify through the block device"
for spec in "1 2" "5 3" "6 4" "10 4"; do
	set -- $spec
	loops $2 16 # fio writes 8 MiB of each array
	$M --create /dev/md/f$1 --level=$1 --raid-devices=$2 --assume-clean --run --quiet $L || fail "create raid$1"
	$B/fio --name=v$1 --filename=/dev/md/f$1 --ioengine=libaio --direct=1 --rw=randwrite --bs=4k --verify=crc32c --verify_fatal=1 \
		--numjobs=4 --iodepth=32 --size=2M --offset_increment=2M --group_reporting --output=/tmp/fio$1 >/dev/null 2>&1
	echo "raid$1 fio rc=$? $(grep -o 'err= *[0-9]*' /tmp/fio$1 | head -1)"
	$M --stop /dev/md/f$1 || fail "stop raid$1"
	mdadm --assemble /dev/md$1 $L >/dev/null 2>&1 || fail "kernel assemble raid$1"
	mdadm --wait /dev/md$1; echo check > /sys/block/md$1/md/sync_action || fail check; mdadm --wait /dev/md$1
	echo "raid$1 kernel mismatch_cnt=$(cat /sys/block/md$1/md/mismatch_cnt)"
	mdadm --stop /dev/md$1 >/dev/null 2>&1
done
echo "== E: daemon killed under a mounted file system"
loops 2 40 # ext4 with fio's 16 MiB file
$M --create /dev/md/k --level=1 --raid-devices=2 --bitmap=internal --assume-clean --run --quiet $L || fail "create k"
$B/mke2fs -q -t ext4 /dev/md/k || fail mkfs
mount /dev/md/k /mnt || fail mount
$B/fio --name=k --filename=/mnt/kf --size=16M --ioengine=libaio --direct=1 --rw=randwrite --bs=4k --iodepth=8 --verify=crc32c --verify_fatal=1 --output=/tmp/fiok >/dev/null 2>&1 &
fpid=$!
sleep 3
pid=$(cat /run/mdtool/k.lock)
kill -9 $pid; echo "killed daemon $pid"
sleep 1
t0=$(date +%s)
$M --assemble /dev/md/k $L; echo "re-assemble rc=$?"
wait $fpid; echo "fio after kill rc=$? $(grep -o 'err= *[0-9]*' /tmp/fiok | head -1) ($(( $(date +%s) - t0 )) s after re-assemble)"
echo "mounted=$(grep -c ' /mnt ' /proc/mounts)"
ls /mnt; umount /mnt; echo "umount rc=$?"
$B/e2fsck -fn /dev/md/k >/tmp/fsck 2>&1; echo "e2fsck after kill rc=$?"
$M --stop /dev/md/k; echo "stop rc=$?"
mdadm --assemble /dev/md9 $L >/dev/null 2>&1; mdadm --wait /dev/md9; echo check > /sys/block/md9/md/sync_action; mdadm --wait /dev/md9
echo "k kernel mismatch_cnt=$(cat /sys/block/md9/md/mismatch_cnt)"
dmesg | grep -i nbd | tail -15
echo DONE
`
