package cmd

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"mdtool/internal/mdvm"
)

// TestKernelUblkScriptAndFio runs, in one Linux 6.12 boot with the arrays
// served through the ublk door (--device=auto picks ublk there):
//
//   - issue 12's provisioning script unchanged, mdtool for mdadm, on 4
//     virtio disks: create raid10 with --bitmap=internal --bitmap-chunk=64M
//     (no --run), --detail --scan >> mdadm.conf, mkfs.ext4 -L data
//     /dev/md0, mount, write files; stop refuses while mounted with
//     mdadm's text (exit 1); umount, stop, assemble --scan, mount
//     LABEL=data: files intact, e2fsck -fn clean. Then the kernel md driver
//     assembles the same disks: e2fsck clean, same file md5s, check gives
//     mismatch_cnt 0.
//   - fio verify (libaio, O_DIRECT, crc32c, 4 jobs, iodepth 32) through
//     /dev/md/fN = /dev/ublkbN on raid1, raid5, raid6 and raid10 (loop
//     devices of 16 MiB on a fifth disk): 0 errors; the kernel assembles the same
//     members: the array's md5 equals the one read through ublk, and check
//     gives mismatch_cnt 0.
func TestKernelUblkScriptAndFio(t *testing.T) {
	mdvm.Parallel(t)
	mdvm.RequireKernel(t, "6.12")
	bin := mdtoolBinary(t)
	dir := t.TempDir()
	var disks []mdvm.Disk
	for i := 0; i < 4; i++ {
		disks = append(disks, mdvm.Disk{Path: sparse(t, dir, fmt.Sprintf("p%d.img", i), 64<<20)})
	}
	disks = append(disks, mdvm.Disk{Path: sparse(t, dir, "loops.img", 256<<20)})
	start := time.Now()
	out := string(mdvm.MustExec(t, mdvm.Run{
		Kernel:  "6.12",
		Disks:   disks,
		Bins:    append([]string{bin}, kernelNBDBins...),
		Modules: []string{"ublk_drv", "ext4"},
		Mem:     1536,
		Script:  ublkScriptAndFio,
		Timeout: 2400 * time.Second,
	}))
	t.Logf("VM run: %v\n%s", time.Since(start), out)
	if strings.Contains(out, "FAIL:") || !strings.Contains(out, "DONE") {
		t.Fatalf("guest script failed")
	}
	wantLines(t, out,
		"mdtool: /dev/md0 attached as /dev/ublkb0 (ublk)\nmdtool: array /dev/md0 started.\ncreate rc=0\n",
		"ARRAY /dev/md0 metadata=1.2 name=mdvm:0 UUID=",
		"/dev/md0 -> ublkb0\n",
		"      Block Device : /dev/ublkb0 (ublk)\n",
		"mkfs rc=0\n",
		"mdtool: Cannot get exclusive access to /dev/md0:Perhaps a running process, mounted filesystem or active volume group?\nstop-mounted rc=1\n",
		"mdtool: stopped /dev/md0\nstop rc=0\n",
		"assemble-scan rc=0\n", "f1: OK\nf2: OK\nf3: OK\nf4: OK\n", "\ne2fsck rc=0\n",
		"kernel e2fsck rc=0\n", "kernel md5 OK\n", "kernel mismatch_cnt=0\n")
	for _, l := range []int{1, 5, 6, 10} {
		wantLines(t, out,
			fmt.Sprintf("raid%d on /dev/ublkb", l),
			fmt.Sprintf("raid%d fio rc=0 err= 0\n", l),
			fmt.Sprintf("raid%d md5 ublk=kernel\n", l),
			fmt.Sprintf("raid%d kernel mismatch_cnt=0\n", l))
	}
}

// ublkScriptAndFio: part A is the script as a user runs it
// (mkfs.ext4 is linked to the copied mke2fs so that the line is unchanged;
// /srv as in the issue).
const ublkScriptAndFio = `M=/usr/bin/mdtool
B=/usr/bin
fail() { echo "FAIL: $*"; tail -30 /run/mdtool/*.log 2>/dev/null; dmesg | tail -20; exit 1; }
ln -sf $B/mke2fs $B/mkfs.ext4
export PATH=$B:$PATH
mkdir -p /etc/mdadm /srv /mnt
echo "== A: the provisioning script, mdtool for mdadm, on ublk"
$M --create /dev/md0 --level=10 --raid-devices=4 --bitmap=internal --bitmap-chunk=64M /dev/vda /dev/vdb /dev/vdc /dev/vdd 2>&1; echo "create rc=$?"
$M --detail --scan >> /etc/mdadm/mdadm.conf || fail detail-scan
mkfs.ext4 -L data /dev/md0 >/tmp/mkfs 2>&1; echo "mkfs rc=$?"
mount /dev/md0 /srv || fail mount
cat /etc/mdadm/mdadm.conf
ls -l /dev/md0
$M --detail /dev/md0 | grep -E 'Block Device|State :|Bitmap|Layout'
for i in 1 2 3 4; do dd if=/dev/urandom of=/srv/f$i bs=64k count=$((i*16)) 2>/dev/null; done
(cd /srv && md5sum f1 f2 f3 f4) > /tmp/sums
$M --stop /dev/md0; echo "stop-mounted rc=$?"
umount /srv || fail umount
$M --stop /dev/md0; echo "stop rc=$?"
[ -e /dev/md0 ] && fail "/dev/md0 left after stop"
$M --assemble --scan; echo "assemble-scan rc=$?"
mount LABEL=data /srv || fail "mount LABEL=data"
(cd /srv && md5sum -c /tmp/sums) || fail "files after assemble --scan"
umount /srv
$B/e2fsck -fn /dev/md0 >/tmp/fsck 2>&1; echo "e2fsck rc=$?"
$M --stop /dev/md0 || fail stop2
echo "== B: the kernel reads what the ublk device wrote"
mdadm --assemble /dev/md1 /dev/vda /dev/vdb /dev/vdc /dev/vdd 2>&1
$B/e2fsck -fn /dev/md1 >/tmp/fsck 2>&1; echo "kernel e2fsck rc=$?"
mount /dev/md1 /mnt && (cd /mnt && md5sum -c /tmp/sums) >/dev/null && echo "kernel md5 OK"; umount /mnt
mdadm --wait /dev/md1; echo check > /sys/block/md1/md/sync_action || fail check; mdadm --wait /dev/md1
echo "kernel mismatch_cnt=$(cat /sys/block/md1/md/mismatch_cnt)"
mdadm --stop /dev/md1
echo "== D: fio verify through the ublk device"
n=0
loops() { # count: L = that many new loop devices of 16 MiB on /dev/vde (fio writes 8 MiB of each array)
	L=""
	for i in $(seq $1); do
		l=$($B/losetup -f --show -o $((n*16*1048576)) --sizelimit $((16*1048576)) /dev/vde) || fail losetup
		n=$((n+1)); L="$L $l"
	done
}
for spec in "1 2" "5 3" "6 4" "10 4"; do
	set -- $spec
	loops $2
	$M --create /dev/md/f$1 --level=$1 --raid-devices=$2 --assume-clean --run --quiet $L || fail "create raid$1"
	echo "raid$1 on $(readlink -f /dev/md/f$1)"
	$B/fio --name=v$1 --filename=/dev/md/f$1 --ioengine=libaio --direct=1 --rw=randwrite --bs=4k --verify=crc32c --verify_fatal=1 \
		--numjobs=4 --iodepth=32 --size=2M --offset_increment=2M --group_reporting --output=/tmp/fio$1 >/dev/null 2>&1
	echo "raid$1 fio rc=$? $(grep -o 'err= *[0-9]*' /tmp/fio$1 | head -1)"
	u=$(md5sum < /dev/md/f$1)
	$M --stop /dev/md/f$1 || fail "stop raid$1"
	mdadm --assemble /dev/md$1 $L >/dev/null 2>&1 || fail "kernel assemble raid$1"
	k=$(md5sum < /dev/md$1)
	[ "$u" = "$k" ] && echo "raid$1 md5 ublk=kernel" || echo "raid$1 md5 ublk $u kernel $k"
	mdadm --wait /dev/md$1; echo check > /sys/block/md$1/md/sync_action || fail check; mdadm --wait /dev/md$1
	echo "raid$1 kernel mismatch_cnt=$(cat /sys/block/md$1/md/mismatch_cnt)"
	mdadm --stop /dev/md$1 >/dev/null 2>&1
done
echo DONE
`
