package engine

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"mdtool/engine/layout"
	"mdtool/internal/mdvm"
	"mdtool/superblock"
)

// reshapeKernelCases are the arrays the kernel reshapes in
// TestKernelReshapeServe: mdadm 4.2 --grow --raid-devices=n+1 with a
// spare, on 1.2 metadata with room before the data (mdadm moves
// data_offset down; no backup file).
var reshapeKernelCases = []struct {
	level string
	n     int // devices before the grow; one more is the spare
}{{"raid5", 4}, {"raid6", 5}}

// TestKernelReshapeServe: the kernel (Linux 6.1, mdadm 4.2) grows a
// raid5 4->5 and a raid6 5->6 and loses power mid-way; the engine
// assembles the members and serves the data the kernel wrote (md5
// equal) through both geometries, writes on both sides of the reshape
// point and closes with the reshape fields intact; the kernel then
// assembles the members, finishes the reshape from reshape_position, and
// has the data the engine served (md5), with check finding no mismatch.
// A copy of each crashed set is finished by the engine instead (from the
// kernel's reshape_position to the end); the kernel assembles it as a
// plain array of n+1 devices with the same size and data, check 0.
// Two VM runs.
func TestKernelReshapeServe(t *testing.T) {
	mdvm.Require(t)
	dir := t.TempDir()
	var imgs [][]string
	makeImages := func() {
		imgs = nil
		for k, c := range reshapeKernelCases {
			var set []string
			for i := 0; i <= c.n; i++ {
				p := filepath.Join(dir, fmt.Sprintf("r%d-%d.img", k, i))
				os.Remove(p)
				f, err := os.Create(p)
				if err != nil {
					t.Fatal(err)
				}
				f.Truncate(32 << 20)
				f.Close()
				set = append(set, p)
			}
			imgs = append(imgs, set)
		}
	}
	makeImages()
	var disks []mdvm.Disk
	var script bytes.Buffer
	script.WriteString("echo 1000 > /proc/sys/dev/raid/speed_limit_max\n")
	vd := 0
	devNames := make([][]string, len(reshapeKernelCases))
	for k, c := range reshapeKernelCases {
		for i := 0; i <= c.n; i++ {
			disks = append(disks, mdvm.Disk{Path: imgs[k][i]})
			devNames[k] = append(devNames[k], "/dev/vd"+string(rune('a'+vd)))
			vd++
		}
		members := ""
		for _, d := range devNames[k][:c.n] {
			members += " " + d
		}
		// full-stripe writes over an --assume-clean array: parity right
		stripeKiB := 64 * (c.n - 1)
		if c.level == "raid6" {
			stripeKiB = 64 * (c.n - 2)
		}
		fmt.Fprintf(&script, `mdadm --create /dev/md%[1]d --run --homehost=any --name=g%[1]d --level=%[2]s --raid-devices=%[3]d --chunk=64 --bitmap=none --assume-clean%[4]s >/tmp/c 2>&1 || { echo ERR create%[1]d; cat /tmp/c; }
mdadm /dev/md%[1]d --add %[5]s >/dev/null 2>&1 || echo ERR add%[1]d
dd if=/dev/urandom of=/dev/md%[1]d bs=%[6]dk oflag=direct 2>/dev/null
echo "MD5 %[1]d $(md5sum < /dev/md%[1]d | cut -d' ' -f1)"
echo "SIZE %[1]d $(cat /sys/block/md%[1]d/size)"
`, k, c.level, c.n, members, devNames[k][c.n], stripeKiB)
	}
	for k, c := range reshapeKernelCases {
		fmt.Fprintf(&script, "mdadm --grow /dev/md%d --raid-devices=%d >/tmp/g 2>&1 || { echo ERR grow%d; cat /tmp/g; }\n", k, c.n+1, k)
	}
	// Wait until both reshapes have recorded about 30% (of 190464
	// sectors), then cut the power.
	script.WriteString(`for i in $(seq 1 600); do
  p0=$(cat /sys/block/md0/md/reshape_position); p1=$(cat /sys/block/md1/md/reshape_position)
  [ "$p0" != none ] && [ "$p1" != none ] && [ "$p0" -gt 57000 ] && [ "$p1" -gt 57000 ] && break
  sleep 1
done
echo "POS 0 $p0"
echo "POS 1 $p1"
mdvm-crash 0
`)
	start := time.Now()
	out := execRetry(t, mdvm.Run{Disks: disks, Script: script.String(), Timeout: 1200 * time.Second}, makeImages)
	t.Logf("kernel grow run: %v\n%s", time.Since(start), out)
	if bytes.Contains(out, []byte("ERR")) {
		t.Fatalf("kernel setup failed:\n%s", out)
	}
	kv := vmLines(out)

	// A copy of each crashed set for the engine to finish.
	fin := make([][]string, len(reshapeKernelCases))
	for k := range reshapeKernelCases {
		for i, p := range imgs[k] {
			q := filepath.Join(dir, fmt.Sprintf("f%d-%d.img", k, i))
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(q, b, 0o644); err != nil {
				t.Fatal(err)
			}
			fin[k] = append(fin[k], q)
		}
	}
	finMD5 := make([]string, len(reshapeKernelCases))
	finSize := make([]int64, len(reshapeKernelCases))
	for k, c := range reshapeKernelCases {
		a := openImages(t, fin[k], nil)
		start := time.Now()
		if err := a.Reshape(context.Background()); err != nil {
			t.Fatalf("%s: reshape: %v", c.level, err)
		}
		t.Logf("%s: engine finished the kernel's reshape in %v", c.level, time.Since(start))
		if ok, _ := a.Reshaping(); ok || a.Geometry().RaidDisks() != c.n+1 {
			t.Fatalf("%s: after the engine's reshape: reshaping %v, raid_disks %d", c.level, ok, a.Geometry().RaidDisks())
		}
		finMD5[k] = arrayMD5(t, a)
		finSize[k] = a.Size()
		// the data the kernel wrote, unchanged
		h := md5.New()
		b := make([]byte, 1<<20)
		old, _ := strconv.ParseInt(kv[fmt.Sprintf("SIZE %d", k)], 10, 64)
		for off := int64(0); off < old*512; off += int64(len(b)) {
			n := min(int64(len(b)), old*512-off)
			if _, err := a.ReadAt(b[:n], off); err != nil {
				t.Fatal(err)
			}
			h.Write(b[:n])
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != kv[fmt.Sprintf("MD5 %d", k)] {
			t.Errorf("%s: after the engine's reshape the old capacity has md5 %s, the kernel wrote %s", c.level, got, kv[fmt.Sprintf("MD5 %d", k)])
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	}

	served := make([]string, len(reshapeKernelCases))
	sizes := make([]int64, len(reshapeKernelCases))
	for k, c := range reshapeKernelCases {
		sb := readSB(t, mustFile(t, imgs[k][0]))
		size, _ := strconv.ParseUint(kv[fmt.Sprintf("SIZE %d", k)], 10, 64)
		pos := sb.ReshapePosition
		if sb.FeatureMap&superblock.FeatureReshapeActive == 0 || sb.FeatureMap&superblock.FeatureNewOffset == 0 ||
			sb.DeltaDisks != 1 || sb.RaidDisks != uint32(c.n+1) || pos < size/5 || pos >= size*19/20 {
			t.Fatalf("%s: not caught mid-reshape: features %#x delta %d raid_disks %d reshape_position %d of %d",
				c.level, sb.FeatureMap, sb.DeltaDisks, sb.RaidDisks, pos, size)
		}
		a := openImages(t, imgs[k], nil)
		if ok, p := a.Reshaping(); !ok || p != pos || uint64(a.Size()>>9) != size {
			t.Fatalf("%s: opened: reshaping %v at %d size %d; superblock %d, kernel size %d", c.level, ok, p, a.Size()>>9, pos, size)
		}
		if got := arrayMD5(t, a); got != kv[fmt.Sprintf("MD5 %d", k)] {
			t.Errorf("%s: md5 %s, the kernel wrote %s", c.level, got, kv[fmt.Sprintf("MD5 %d", k)])
		}
		// Writes on both sides and across the reshape point.
		r := newRand(uint64(100 + k))
		p0 := int64(pos) * 512
		for _, w := range []struct{ off, n int64 }{
			{p0 - 64<<10, 256 << 10}, {0, 1 << 20}, {p0 + 4096, 12 << 10}, {p0 - 8192, 4096},
			{a.Size() - 3<<20, 2 << 20}, {a.Size() / 2, 700 << 10},
		} {
			b := make([]byte, w.n)
			fillPattern(r, b)
			mustWrite(t, a, nil, b, w.off)
		}
		workload(t, a, nil, uint64(k), 100)
		served[k] = arrayMD5(t, a)
		sizes[k] = a.Size()
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		for i, p := range imgs[k] {
			s := readSB(t, mustFile(t, p))
			if s.FeatureMap&superblock.FeatureReshapeActive == 0 || s.ReshapePosition != pos || s.DeltaDisks != 1 ||
				s.NewOffset != sb.NewOffset || s.Events <= sb.Events {
				t.Errorf("%s member %d after close: features %#x pos %d delta %d new_offset %d events %d (kernel left %d)",
					c.level, i, s.FeatureMap, s.ReshapePosition, s.DeltaDisks, s.NewOffset, s.Events, sb.Events)
			}
		}
	}

	// The kernel finishes both reshapes and checks them.
	script.Reset()
	script.WriteString("echo 500000 > /proc/sys/dev/raid/speed_limit_max\n")
	for k := range reshapeKernelCases {
		members := ""
		for _, d := range devNames[k] {
			members += " " + d
		}
		fmt.Fprintf(&script, `mdadm --assemble /dev/md%[1]d%[2]s >/tmp/a 2>&1 || { echo ERR assemble%[1]d; cat /tmp/a; }
for i in $(seq 1 600); do [ "$(cat /sys/block/md%[1]d/md/reshape_position)" = none ] && [ "$(cat /sys/block/md%[1]d/md/sync_action)" = idle ] && break; sleep 1; done
echo "DISKS %[1]d $(cat /sys/block/md%[1]d/md/raid_disks) $(cat /sys/block/md%[1]d/md/reshape_position) $(cat /sys/block/md%[1]d/md/sync_action)"
echo "MD5 %[1]d $(dd if=/dev/md%[1]d bs=512 count=%[3]d 2>/dev/null | md5sum | cut -d' ' -f1)"
echo check > /sys/block/md%[1]d/md/sync_action
sleep 1
for i in $(seq 1 600); do [ "$(cat /sys/block/md%[1]d/md/sync_action)" = idle ] && break; sleep 1; done
echo "MISMATCH %[1]d $(cat /sys/block/md%[1]d/md/mismatch_cnt)"
mdadm --stop /dev/md%[1]d >/dev/null 2>&1 || echo ERR stop%[1]d
`, k, members, sizes[k]>>9)
	}
	for k := range reshapeKernelCases {
		members := ""
		for _, p := range fin[k] {
			disks = append(disks, mdvm.Disk{Path: p})
			members += " /dev/vd" + string(rune('a'+vd))
			vd++
		}
		fmt.Fprintf(&script, `mdadm --assemble /dev/md%[1]d%[2]s >/tmp/a 2>&1 || { echo ERR assemble%[1]d; cat /tmp/a; }
echo "FDISKS %[3]d $(cat /sys/block/md%[1]d/md/raid_disks) $(cat /sys/block/md%[1]d/md/reshape_position) $(cat /sys/block/md%[1]d/md/sync_action)"
echo "FSIZE %[3]d $(cat /sys/block/md%[1]d/size)"
echo "FMD5 %[3]d $(md5sum < /dev/md%[1]d | cut -d' ' -f1)"
echo check > /sys/block/md%[1]d/md/sync_action
sleep 1
for i in $(seq 1 600); do [ "$(cat /sys/block/md%[1]d/md/sync_action)" = idle ] && break; sleep 1; done
echo "FMISMATCH %[3]d $(cat /sys/block/md%[1]d/md/mismatch_cnt)"
mdadm --stop /dev/md%[1]d >/dev/null 2>&1 || echo ERR stop%[1]d
`, 2+k, members, k)
	}
	start = time.Now()
	out = execRetry(t, mdvm.Run{Disks: disks, Script: script.String(), Timeout: 1200 * time.Second}, nil)
	t.Logf("kernel finish run: %v\n%s", time.Since(start), out)
	if bytes.Contains(out, []byte("ERR")) {
		t.Fatalf("kernel run failed:\n%s", out)
	}
	kv = vmLines(out)
	for k, c := range reshapeKernelCases {
		if got := kv[fmt.Sprintf("DISKS %d", k)]; got != strconv.Itoa(c.n+1) {
			t.Errorf("%s: the kernel did not finish the reshape: raid_disks %s\n%s", c.level, got, out)
		}
		if got := kv[fmt.Sprintf("MD5 %d", k)]; got != served[k] {
			t.Errorf("%s: after the kernel's reshape md5 %s, the engine served %s", c.level, got, served[k])
		}
		if got := kv[fmt.Sprintf("MISMATCH %d", k)]; got != "0" {
			t.Errorf("%s: check found mismatch_cnt %s", c.level, got)
		}
		// the set the engine finished
		if got := kv[fmt.Sprintf("FDISKS %d", k)]; got != strconv.Itoa(c.n+1) {
			t.Errorf("%s (engine-finished): kernel raid_disks %s", c.level, got)
		}
		if got := kv[fmt.Sprintf("FSIZE %d", k)]; got != strconv.FormatInt(finSize[k]>>9, 10) {
			t.Errorf("%s (engine-finished): kernel size %s sectors, engine %d", c.level, got, finSize[k]>>9)
		}
		if got := kv[fmt.Sprintf("FMD5 %d", k)]; got != finMD5[k] {
			t.Errorf("%s (engine-finished): kernel md5 %s, engine %s", c.level, got, finMD5[k])
		}
		if got := kv[fmt.Sprintf("FMISMATCH %d", k)]; got != "0" {
			t.Errorf("%s (engine-finished): check found mismatch_cnt %s", c.level, got)
		}
	}
}

// TestKernelReshapeFromEngine: the engine starts growing raid5 4->5 and
// raid6 5->6 onto a spare, and a raid0 of 3 as mdadm 4.2 grows it (taken
// over to a raid4 of 4 roles, parity missing, grown to 5 roles: the spare
// fills the old parity role as the reshape passes,
// reshape_spares.go), and is cut off at about 40% (the member images
// as they are then, without a clean stop: a power cut); the kernel
// (Linux 6.1, mdadm 4.2) assembles them, finishes the reshape from the
// recorded reshape_position and has the same data, check 0; the grown
// raid4 is degraded by its parity role alone, and mdadm takes it to
// raid0 with the same data. One VM run.
func TestKernelReshapeFromEngine(t *testing.T) {
	mdvm.Require(t)
	dir := t.TempDir()
	var disks []mdvm.Disk
	var script bytes.Buffer
	script.WriteString("echo 500000 > /proc/sys/dev/raid/speed_limit_max\n")
	cases := append(reshapeKernelCases[:len(reshapeKernelCases):len(reshapeKernelCases)], struct {
		level string
		n     int
	}{"raid0", 3})
	want := make([]string, len(cases))
	sizes := make([]int64, len(cases))
	vd := 0
	for k, c := range cases {
		mems := create(t, spec{level: c.level, n: c.n, chunkKiB: 64, devMiB: []int{16}})
		a := open(t, mems, recoverOptions())
		data := make([]byte, a.Size())
		fillPattern(newRand(uint64(70+k)), data)
		mustWrite(t, a, nil, data, 0)
		newN := c.n + 1
		if c.level == "raid0" {
			if err := a.ChangeLevel(layout.RAID4); err != nil {
				t.Fatal(err)
			}
			if err := a.StartAction(ActionFrozen); err != nil {
				t.Fatal(err)
			}
			newN = c.n + 2
		}
		spare := NewMemDevice(16 << 20)
		if _, err := a.AddDevice(spare, AddOptions{Replacement: -1}); err != nil {
			t.Fatal(err)
		}
		if err := a.StartReshape(ReshapeStart{RaidDisks: newN}); err != nil {
			t.Fatal(err)
		}
		ra := &reshapeAction{a: a}
		total := a.rs.geo.New.ArraySectors()
		for p := a.rs.progress.Load(); p < total*2/5; {
			n, err := ra.unit(p, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			p += n
		}
		// a write on each side of the point
		b := make([]byte, 64<<10)
		fillPattern(newRand(uint64(80+k)), b)
		for _, off := range []int64{4096, a.Size() - 1<<20} {
			if _, err := a.WriteAt(b, off); err != nil {
				t.Fatal(err)
			}
			copy(data[off:], b)
		}
		h := md5.Sum(data)
		want[k] = hex.EncodeToString(h[:])
		sizes[k] = a.Size()
		t.Logf("%s: cut at reshape_progress %d, reshape_safe %d of %d", c.level, a.rs.progress.Load(), a.rs.safe.Load(), total)
		members := ""
		for i, d := range append(append([]*MemDevice(nil), mems...), spare) {
			p := filepath.Join(dir, fmt.Sprintf("e%d-%d.img", k, i))
			saveImage(t, d, p) // as they are: no Close
			disks = append(disks, mdvm.Disk{Path: p})
			members += " /dev/vd" + string(rune('a'+vd))
			vd++
		}
		fmt.Fprintf(&script, `mdadm --assemble /dev/md%[1]d%[2]s >/tmp/a 2>&1 || { echo ERR assemble%[1]d; cat /tmp/a; }
for i in $(seq 1 600); do [ "$(cat /sys/block/md%[1]d/md/reshape_position)" = none ] && [ "$(cat /sys/block/md%[1]d/md/sync_action)" = idle ] && break; sleep 1; done
echo "DISKS %[1]d $(cat /sys/block/md%[1]d/md/raid_disks) $(cat /sys/block/md%[1]d/md/reshape_position) $(cat /sys/block/md%[1]d/md/sync_action)"
echo "DEGRADED %[1]d $(cat /sys/block/md%[1]d/md/degraded)"
echo "MD5 %[1]d $(dd if=/dev/md%[1]d bs=512 count=%[3]d 2>/dev/null | md5sum | cut -d' ' -f1)"
echo check > /sys/block/md%[1]d/md/sync_action
sleep 1
for i in $(seq 1 600); do [ "$(cat /sys/block/md%[1]d/md/sync_action)" = idle ] && break; sleep 1; done
echo "MISMATCH %[1]d $(cat /sys/block/md%[1]d/md/mismatch_cnt)"
`, k, members, sizes[k]>>9)
		if c.level == "raid0" {
			fmt.Fprintf(&script, `mdadm --grow /dev/md%[1]d --level=0 >/tmp/a 2>&1 || { echo ERR level%[1]d; cat /tmp/a; }
echo "LEVEL %[1]d $(cat /sys/block/md%[1]d/md/level)"
echo "MD5L0 %[1]d $(dd if=/dev/md%[1]d bs=512 count=%[2]d 2>/dev/null | md5sum | cut -d' ' -f1)"
`, k, sizes[k]>>9)
		}
		fmt.Fprintf(&script, "mdadm --stop /dev/md%[1]d >/dev/null 2>&1 || echo ERR stop%[1]d\n", k)
	}
	start := time.Now()
	out := execRetry(t, mdvm.Run{Disks: disks, Script: script.String(), Timeout: 1200 * time.Second}, nil)
	t.Logf("kernel run: %v\n%s", time.Since(start), out)
	if bytes.Contains(out, []byte("ERR")) {
		t.Fatalf("kernel run failed:\n%s", out)
	}
	kv := vmLines(out)
	for k, c := range cases {
		newN, deg := c.n+1, "0"
		if c.level == "raid0" {
			newN, deg = c.n+2, "1" // the new parity role stays missing
			if got := kv[fmt.Sprintf("LEVEL %d", k)]; got != "raid0" {
				t.Errorf("raid0 growth: mdadm -G -l0 of the grown raid4 left level %q", got)
			}
			if got := kv[fmt.Sprintf("MD5L0 %d", k)]; got != want[k] {
				t.Errorf("raid0 growth: back at raid0 md5 %s, want %s", got, want[k])
			}
		}
		if got := kv[fmt.Sprintf("DISKS %d", k)]; got != strconv.Itoa(newN) {
			t.Errorf("%s: the kernel did not finish the engine's reshape: raid_disks %s", c.level, got)
		}
		if got := kv[fmt.Sprintf("DEGRADED %d", k)]; got != deg {
			t.Errorf("%s: degraded %s after the kernel finished the engine's reshape, want %s", c.level, got, deg)
		}
		if got := kv[fmt.Sprintf("MD5 %d", k)]; got != want[k] {
			t.Errorf("%s: after the kernel finished the engine's reshape md5 %s, want %s", c.level, got, want[k])
		}
		if got := kv[fmt.Sprintf("MISMATCH %d", k)]; got != "0" {
			t.Errorf("%s: check found mismatch_cnt %s", c.level, got)
		}
	}
}
