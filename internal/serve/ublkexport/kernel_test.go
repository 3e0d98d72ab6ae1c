//go:build linux

package ublkexport_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"mdtool/internal/mdvm"
)

// guestTools are the host programs the ublk kernel tests copy into the
// guest (make deps installs them).
var guestTools = []string{"fio", "mkfs.ext4", "e2fsck", "dumpe2fs", "blockdev"}

// lookTool finds a host program, also in the sbin directories.
func lookTool(n string) (string, error) {
	p, err := exec.LookPath(n)
	if err != nil {
		for _, d := range []string{"/usr/sbin", "/sbin"} {
			if _, serr := os.Stat(filepath.Join(d, n)); serr == nil {
				return filepath.Join(d, n), nil
			}
		}
		return "", fmt.Errorf("%s not installed (make deps)", n)
	}
	return p, nil
}

// toolPaths finds the guest tools on the host; missing ones fail under CI.
func toolPaths(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, n := range guestTools {
		p, err := lookTool(n)
		if err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s not installed (make deps)", n)
			}
			t.Skipf("%s not installed (make deps)", n)
		}
		out = append(out, p)
	}
	return out
}

// buildUblktest builds cmd/ublktest, static, for the guest.
func buildUblktest(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ublktest")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "./cmd/ublktest")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building ublktest: %v\n%s", err, out)
	}
	return bin
}

// guestHelpers are shell functions for the guest scripts: waitdev LOG
// waits (bounded) for ublktest's DEVICE line; the tools by their full
// paths (busybox prefers its own applets, and mkfs.ext4 is copied as the
// mke2fs it links to).
const guestHelpers = `set -u
U=/usr/bin/ublktest
waitdev() { i=0; while ! grep -q DEVICE "$1" && [ $i -lt 1800 ]; do kill -0 "$2" 2>/dev/null || break; sleep 0.1; i=$((i+1)); done; cat "$1"; }
writes() { set -- $(cat /sys/block/$1/stat); echo $5; }
`

// The ublk door on Linux 6.12, in one boot, serving a virtio disk
// (/dev/vda) through export.File:
//   - geometry: logical/physical block, io_min and io_opt as set (powers of
//     two reach the kernel unchanged; a 3-chunk full stripe becomes the
//     chunk), volatile cache with FUA, discard granularity, a 3-chunk
//     request boundary (chunk_sectors) and largest request;
//   - dd round trip through /dev/ublkb0 and straight from /dev/vda;
//   - fio verify (libaio, direct, crc32c, 4 jobs, iodepth 32) on the raw
//     device: 0 errors;
//   - mkfs.ext4 takes its RAID stride and stripe width from the hints;
//   - kill -9 of the server while fio verify runs on the mounted ext4: the
//     device and the mount stay, `ublktest recover` takes the device over,
//     fio completes with its verify passing, e2fsck -fn is clean, and
//     Detach removes the device;
//   - Available(true) loads ublk_drv when /dev/ublk-control is missing.
func TestUblkKernel(t *testing.T) {
	mdvm.RequireKernel(t, "6.12")
	bins := append([]string{buildUblktest(t)}, toolPaths(t)...)
	dir := t.TempDir()
	disk := filepath.Join(dir, "vda.img")
	if err := os.WriteFile(disk, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(disk, 256<<20); err != nil {
		t.Fatal(err)
	}
	script := guestHelpers + `
$U attach -file /dev/vda -queues 2 -depth 32 -iomin 524288 -ioopt 2097152 -pbs 4096 -discard > /tmp/a.log 2>&1 &
spid=$!
waitdev /tmp/a.log $spid
echo "GEOM $(/usr/bin/blockdev --getss --getpbsz --getiomin --getioopt /dev/ublkb0 | tr '\n' ' ')"
echo "SIZE $(/usr/bin/blockdev --getsize64 /dev/ublkb0)"
q=/sys/block/ublkb0/queue
echo "CACHE $(cat $q/write_cache) FUA $(cat $q/fua) DISCARD $(cat $q/discard_granularity) MAXKB $(cat $q/max_sectors_kb)"
dd if=/dev/zero of=/tmp/img2 bs=1M count=16 2>/dev/null
$U attach -file /tmp/img2 -id 5 -iomin 524288 -ioopt 1572864 -maxio 1572864 -boundary 1572864 > /tmp/c.log 2>&1 &
cpid=$!
waitdev /tmp/c.log $cpid
echo "GEOM5 $(/usr/bin/blockdev --getiomin --getioopt /dev/ublkb5 | tr '\n' ' ')"
echo "LIMITS5 $(cat /sys/block/ublkb5/queue/chunk_sectors) $(cat /sys/block/ublkb5/queue/max_hw_sectors_kb) $(cat /sys/block/ublkb5/queue/max_sectors_kb)"
kill $cpid; wait $cpid; echo "DETACH5 rc=$? $(tail -1 /tmp/c.log)"
[ -e /dev/ublkb5 ] || echo "UBLKB5 GONE"

dd if=/dev/urandom of=/tmp/w bs=1M count=8 2>/dev/null
dd if=/tmp/w of=/dev/ublkb0 bs=128k seek=24 oflag=direct 2>/dev/null
dd if=/dev/ublkb0 of=/tmp/r1 bs=1M skip=3 count=8 iflag=direct 2>/dev/null
dd if=/dev/vda of=/tmp/r2 bs=1M skip=3 count=8 iflag=direct 2>/dev/null
cmp /tmp/w /tmp/r1 && cmp /tmp/w /tmp/r2 && echo "ROUNDTRIP OK"

fio --name=raw --filename=/dev/ublkb0 --ioengine=libaio --direct=1 --rw=randwrite --bsrange=4k-128k \
    --verify=crc32c --verify_fatal=1 --numjobs=4 --iodepth=32 --size=16M --offset_increment=16M \
    --group_reporting >/tmp/fio1.log 2>&1
echo "FIO RAW rc=$? $(grep -o 'err= *[0-9]*' /tmp/fio1.log | tr -d ' ' | sort -u | tr '\n' ' ')"

/usr/bin/mke2fs -t ext4 -b 4096 -q -F /dev/ublkb0 && echo "MKFS OK"
/usr/bin/dumpe2fs -h /dev/ublkb0 2>/dev/null | grep -E 'RAID stride|RAID stripe width'
mkdir -p /mnt && mount -t ext4 /dev/ublkb0 /mnt && echo "MOUNTED"
fio --name=fs --directory=/mnt --ioengine=libaio --direct=1 --rw=randwrite --bs=4k --verify=crc32c \
    --verify_fatal=1 --numjobs=4 --iodepth=32 --size=24M --group_reporting >/tmp/fio2.log 2>&1 &
fpid=$!
# kill once fio has written a share of its 24576 blocks (not by time)
w0=$(writes ublkb0); i=0
while [ $(( $(writes ublkb0) - w0 )) -lt 3000 ] && [ $i -lt 3000 ]; do sleep 0.1; i=$((i+1)); done
kill -0 $fpid && echo "FIO RUNNING AT KILL"
kill -9 $spid; wait $spid 2>/dev/null
echo "SERVER KILLED"
[ -b /dev/ublkb0 ] && grep -q ' /mnt ' /proc/mounts && echo "MOUNT STAYS"
$U recover -file /dev/vda -id 0 > /tmp/b.log 2>&1 &
spid=$!
waitdev /tmp/b.log $spid
# a failed takeover leaves fio blocked for good: end the run now
grep -q DEVICE /tmp/b.log || { echo "RECOVER FAILED"; dmesg | tail -20; exit 1; }
wait $fpid
echo "FIO FS rc=$? $(grep -o 'err= *[0-9]*' /tmp/fio2.log | tr -d ' ' | sort -u | tr '\n' ' ')"
grep -E '^ *(READ|WRITE):' /tmp/fio2.log
grep -q ' /mnt ' /proc/mounts && echo "MOUNT STILL THERE"
umount /mnt && echo "UMOUNTED"
/usr/bin/e2fsck -fn /dev/ublkb0 >/tmp/fsck.log 2>&1; echo "FSCK rc=$?"
kill $spid; wait $spid; echo "DETACH rc=$? $(tail -1 /tmp/b.log)"
[ -e /dev/ublkb0 ] || echo "UBLKB0 GONE"
rmmod ublk_drv && [ ! -e /dev/ublk-control ] && $U available
dmesg | grep -E 'I/O error|blk_update_request|WARNING:|BUG:' | head -5
true
`
	t0 := time.Now()
	out := string(mdvm.MustExec(t, mdvm.Run{
		Kernel:  "6.12",
		Modules: []string{"ublk_drv", "ext4"},
		Disks:   []mdvm.Disk{{Path: disk}},
		Bins:    bins,
		Script:  script,
		Timeout: 600 * time.Second,
	}))
	t.Logf("VM run %v; guest output:\n%s", time.Since(t0).Round(time.Second), out)
	for _, want := range []string{
		"DEVICE /dev/ublkb0 ID 0",
		"GEOM 512 4096 524288 2097152 ",
		"SIZE 268435456",
		"CACHE write back FUA 1 DISCARD 524288 MAXKB 1024",
		"GEOM5 524288 524288 ",
		"LIMITS5 3072 1536 1536\n",
		"DETACH5 rc=0 DETACHED",
		"UBLKB5 GONE",
		"ROUNDTRIP OK",
		"FIO RAW rc=0 err=0 \n",
		"MKFS OK",
		"MOUNTED",
		"FIO RUNNING AT KILL",
		"MOUNT STAYS",
		"FIO FS rc=0 err=0 \n",
		"MOUNT STILL THERE",
		"UMOUNTED",
		"FSCK rc=0",
		"DETACH rc=0 DETACHED",
		"UBLKB0 GONE",
		"AVAILABLE",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("guest output lacks %q", want)
		}
	}
	// 4 KiB blocks: stride = io_min / 4096, stripe width = io_opt / 4096
	if !regexp.MustCompile(`RAID stride:\s+128\n`).MatchString(out) || !regexp.MustCompile(`RAID stripe width:\s+512\n`).MatchString(out) {
		t.Errorf("mkfs.ext4 did not take stride 128 / stripe width 512 from io_min/io_opt")
	}
	if n := strings.Count(out, "DEVICE /dev/ublkb0 ID 0"); n != 2 {
		t.Errorf("the recovering server did not take over /dev/ublkb0 (%d DEVICE lines)", n)
	}
	for _, bad := range []string{"I/O error", "blk_update_request", "WARNING:", "BUG:"} {
		if strings.Contains(out, bad) {
			t.Errorf("kernel log has %q", bad)
		}
	}
}
