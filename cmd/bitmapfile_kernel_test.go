package cmd

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"mdtool/internal/crashload"
	"mdtool/internal/daemon"
	"mdtool/internal/mdvm"
	"mdtool/superblock"
)

// TestBitmapFileKernel checks bitmap files against Linux 6.1 in one VM
// boot. mdtool -> kernel: an array mdtool created and served with
// --bitmap=FILE is assembled by mdadm 4.2 with that file (on ext4 in the
// guest: md needs bmap), written, and checked (mismatch_cnt 0, data as
// mdtool served it). kernel -> mdtool: mdadm creates an array with a
// bitmap file, writes, and the guest crashes while writing; mdtool
// assembles the members with the file the kernel left (dirty bits, the
// array active) and resyncs only what the bitmap marks: the mirrors are
// identical afterwards.
func TestBitmapFileKernel(t *testing.T) {
	mdvm.Parallel(t)
	mdvm.Require(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")

	// mdtool side of the first array
	md := "/dev/md/bfk"
	abm := filepath.Join(dir, "fsroot", "a.bm")
	if err := os.MkdirAll(filepath.Dir(abm), 0o755); err != nil {
		t.Fatal(err)
	}
	adevs := mkArray(t, dir, md, 2, 16<<20, "-l1", "-n2", "--bitmap="+abm)
	s := serve(t, runDir, md, "--bitmap="+abm, adevs[0], adevs[1])
	waitDirty(t, abm, 0)
	sock := daemon.PathsFor(runDir, s.name).NBD()
	size := arraySize(t, runDir, s.name)
	c, err := crashload.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	p := bytes.Repeat([]byte("mdtool bitmap file "), 1<<17)[:2<<20]
	if err := c.WriteAt(p, 1<<20); err != nil {
		t.Fatal(err)
	}
	c.Close()
	want := md5hex(readArray(t, sock, size))
	s.stop()
	fsImg := filepath.Join(dir, "fs.img")
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-d", filepath.Dir(abm), fsImg, "8M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4 -d: %v %s", err, out)
	}
	bdevs := []string{sparse(t, dir, "b0.img", 16<<20), sparse(t, dir, "b1.img", 16<<20)}

	script := `
mkdir -p /mnt; mount -t ext4 /dev/vdc /mnt || echo MOUNT FAILED
mdadm --assemble /dev/md0 --bitmap=/mnt/a.bm /dev/vda /dev/vdb || echo A ASSEMBLY FAILED
echo "A-MD5 $(md5sum /dev/md0 | cut -d' ' -f1)"
echo "A-D $(mdadm -D /dev/md0 | grep 'Intent Bitmap')"
dd if=/dev/urandom of=/dev/md0 bs=64k count=16 seek=64 oflag=direct 2>/dev/null
echo check > /sys/block/md0/md/sync_action; sleep 0.2; mdadm --wait /dev/md0
echo "A-RES mismatch=$(cat /sys/block/md0/md/mismatch_cnt) last=$(cat /sys/block/md0/md/last_sync_action)"
mdadm --stop /dev/md0
mdadm --create /dev/md1 --run -l1 -n2 --assume-clean --delay=1 --bitmap=/mnt/b.bm /dev/vdd /dev/vde || echo B CREATE FAILED
echo 0 > /sys/block/md1/md/safe_mode_delay
sync
i=0; while [ $i -lt 120 ] && ! mdadm -X /mnt/b.bm | grep -q ' 0 dirty'; do sleep 1; i=$((i+1)); done
echo "B-X0 $(mdadm -X /mnt/b.bm | grep Bitmap)"
( i=0; while :; do dd if=/dev/urandom of=/dev/md1 bs=4k count=1 seek=$((512 + i % 256)) oflag=direct 2>/dev/null; i=$((i+1)); done ) &
sleep 1
echo "B-STATE $(cat /sys/block/md1/md/array_state)"
echo "B-X $(mdadm -X /mnt/b.bm | grep Bitmap)"
mdvm-crash 0
`
	disks := []mdvm.Disk{{Path: adevs[0], Mode: mdvm.COW}, {Path: adevs[1], Mode: mdvm.COW}, {Path: fsImg, Mode: mdvm.RW},
		{Path: bdevs[0], Mode: mdvm.RW}, {Path: bdevs[1], Mode: mdvm.RW}}
	out := string(mdvm.MustExec(t, mdvm.Run{Disks: disks, Script: script, Modules: []string{"ext4"}, Timeout: 600 * time.Second}))
	t.Logf("VM:\n%s", out)
	if strings.Contains(out, "FAILED") {
		t.Fatalf("VM:\n%s", out)
	}
	if !strings.Contains(out, "A-MD5 "+want+"\n") {
		t.Errorf("the kernel read other data than mdtool served (want md5 %s)", want)
	}
	if !strings.Contains(out, "A-D      Intent Bitmap : /mnt/a.bm\n") {
		t.Error("mdadm -D does not name the bitmap file")
	}
	if !strings.Contains(out, "A-RES mismatch=0 last=check\n") {
		t.Error("kernel check of mdtool's array with its bitmap file: mismatches")
	}
	if !strings.Contains(out, "B-X0           Bitmap : 3840 bits (chunks), 0 dirty (0.0%)\n") {
		t.Fatal("the kernel's daemon did not clear the new bitmap file before the writes")
	}
	if !strings.Contains(out, "B-STATE active") {
		t.Fatal("the kernel's array was not active when the guest crashed")
	}

	// kernel -> mdtool
	// the crash left the new file's inode in the journal: replay it,
	// then copy the file out
	bbm := filepath.Join(dir, "b.bm")
	e2fsckReplay(t, fsImg)
	debugfsDump(t, fsImg, "/b.bm", bbm)
	// safe_mode_delay 0 kept the array active (no clean mark between two
	// of the guest's slow writes): the crash left it dirty.
	if ro := readSB12(t, bdevs[0]).ResyncOffset; ro == superblock.MaxSector {
		t.Fatal("the kernel's array was clean at the crash (resync_offset MaxSector): nothing to resync")
	}
	dirty := dirtyOf(t, bbm)
	if dirty == 0 || dirty > 1000 {
		t.Fatalf("the kernel's bitmap file has %d dirty bits after the crash, want 1..1000 (writes to 2-3 MiB)", dirty)
	}
	// Plant a difference between the mirrors inside the written region
	// (2-3 MiB, dirty: the resync must fix it) and one at 10 MiB (clean
	// bits: a bitmap-guided resync leaves it).
	dataOff := int64(readSB12(t, bdevs[0]).DataOffset) * 512
	writeAt(t, bdevs[1], []byte("inside"), dataOff+2<<20+100) // block 512: the first one written
	writeAt(t, bdevs[1], []byte("outside"), dataOff+10<<20)
	s = serve(t, runDir, "/dev/md/bfk2", "--bitmap="+bbm, bdevs[0], bdevs[1])
	cl, err := daemon.Dial(runDir, s.name)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var st *daemon.Status
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if st, err = cl.Status(context.Background()); err != nil {
			t.Fatal(err)
		}
		if st.SyncAction == "idle" && st.LastSyncAction != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no resync end: %+v", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	chunk := bitmapChunkOf(t, bbm)
	if st.LastSyncAction != "resync" || st.SyncWritten == 0 || st.SyncWritten > uint64(dirty*chunk/512) {
		t.Errorf("after the crash: %s wrote %d of %d sectors (%d dirty chunks of %d bytes)",
			st.LastSyncAction, st.SyncWritten, st.ComponentSectors, dirty, chunk)
	}
	s.stop()
	var data [2][]byte
	for i, d := range bdevs {
		b, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		sb, err := superblock.Parse(b[4096:])
		if err != nil {
			t.Fatal(err)
		}
		data[i] = b[sb.DataOffset*512 : (sb.DataOffset+sb.Size)*512]
	}
	if !bytes.Equal(data[0][:10<<20], data[1][:10<<20]) || !bytes.Equal(data[0][10<<20+7:], data[1][10<<20+7:]) {
		t.Error("the mirrors differ after mdtool's bitmap-guided resync")
	}
	if bytes.Equal(data[0][10<<20:10<<20+7], data[1][10<<20:10<<20+7]) {
		t.Error("the resync touched a chunk whose bit was clear")
	}
}

// bitmapChunkOf is the chunk size (bytes) mdtool -X prints for a file.
func bitmapChunkOf(t *testing.T, bmf string) int {
	t.Helper()
	_, out, _ := mdtool(t, "-X", bmf)
	m := regexp.MustCompile(`Chunksize : (\d+) KB`).FindStringSubmatch(out)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n << 10
}

// e2fsckReplay repairs an ext4 image a guest crash left (its journal
// replayed); e2fsck exits 1 or 2 when it fixed something.
func e2fsckReplay(t *testing.T, img string) {
	t.Helper()
	if o, err := exec.Command("e2fsck", "-fy", img).CombinedOutput(); err != nil {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() >= 4 {
			t.Fatalf("e2fsck: %v %s", err, o)
		}
	}
}

// debugfsDump copies the file at path in the ext4 image img to dst.
func debugfsDump(t *testing.T, img, path, dst string) {
	t.Helper()
	if o, err := exec.Command("debugfs", "-R", "dump "+path+" "+dst, img).CombinedOutput(); err != nil {
		t.Fatalf("debugfs dump: %v %s", err, o)
	}
}
