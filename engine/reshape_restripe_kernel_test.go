package engine

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"mdtool/internal/mdvm"
	"mdtool/superblock"
)

// kernelRestripes are the restriping reshapes both sides make in
// TestKernelRestripe, with mdadm 4.2's words for them.
var kernelRestripes = []struct {
	name   string // a restripeCases name
	create string // mdadm --create options
	grow   []string
	// kernel: mdadm and the kernel make it too. A "!" step is a shell
	// command: mdadm 4.2 alone cannot shrink without a backup file on
	// 6.1 ("Cannot set new_offset": md refuses a new offset above the
	// data until reshape_direction is backwards, which mdadm sets only
	// for an unchanged count), so the test sets the direction first.
	kernel bool
}{
	{"raid5-chunk512-64", "--level=5 --raid-devices=4 --chunk=512", []string{"--chunk=64"}, true},
	{"raid5-ls-ra", "--level=5 --raid-devices=4 --chunk=64", []string{"--layout=right-asymmetric"}, true},
	{"raid6-chunk64-128", "--level=6 --raid-devices=5 --chunk=64", []string{"--chunk=128"}, true},
	{"raid5-chunk64-128-up", "--level=5 --raid-devices=4 --chunk=64 --size=6144", []string{"--chunk=128"}, true},
	{"raid5-5to4", "--level=5 --raid-devices=5 --chunk=64 --size=6144", []string{"--array-size=18432", "!echo backwards > /sys/block/md%d/md/reshape_direction", "--raid-devices=4"}, true},
	{"raid6-6to5", "--level=6 --raid-devices=6 --chunk=64 --size=6144", []string{"--array-size=18432", "!echo backwards > /sys/block/md%d/md/reshape_direction", "--raid-devices=5"}, true},
}

func restripeCase(t *testing.T, name string) restripe {
	for _, c := range restripeCases() {
		if c.name == name {
			return c
		}
	}
	t.Fatalf("no case %s", name)
	return restripe{}
}

// imageFile places member images in one file; the guest reaches each
// through a loop device over its region.
type imageFile struct {
	t   *testing.T
	f   *os.File
	off int64
}

func (im *imageFile) place(d *MemDevice) region {
	r := region{im.off, d.Geometry().Size}
	im.store(r, d)
	im.off += (r.size + 1<<20 - 1) &^ (1<<20 - 1)
	return r
}

func (im *imageFile) blank(size int64) region {
	r := region{im.off, size}
	im.off += size
	return r
}

func (im *imageFile) store(r region, d *MemDevice) {
	b := make([]byte, r.size)
	if _, err := d.Reopen().ReadAt(b, 0); err != nil {
		im.t.Fatal(err)
	}
	if _, err := im.f.WriteAt(b, r.off); err != nil {
		im.t.Fatal(err)
	}
}

func (im *imageFile) load(r region) *MemDevice {
	b := make([]byte, r.size)
	if _, err := im.f.ReadAt(b, r.off); err != nil {
		im.t.Fatal(err)
	}
	d := NewMemDevice(r.size)
	d.WriteAt(b, 0)
	return d
}

func loopOf(r region) string {
	return fmt.Sprintf("$($LO --offset %d --sizelimit %d --direct-io=on --show -f /dev/vda)", r.off, r.size)
}

// kernelAssembleScript assembles md from the regions, waits for a
// reshape to end and prints its shape, md5 and check result under tag.
func kernelAssembleScript(w *strings.Builder, md int, tag string, rs []region, sectors int64) {
	w.WriteString("D=''\n")
	for _, r := range rs {
		fmt.Fprintf(w, "D=\"$D %s\"\n", loopOf(r))
	}
	fmt.Fprintf(w, `mdadm --assemble /dev/md%[1]d $D >/tmp/a 2>&1 || { echo "ERR %[2]s assemble"; cat /tmp/a; }
for i in $(seq 1 900); do [ -e /sys/block/md%[1]d/md ] || break; [ "$(cat /sys/block/md%[1]d/md/reshape_position)" = none ] && [ "$(cat /sys/block/md%[1]d/md/sync_action)" = idle ] && break; sleep 1; done
echo "SHAPE %[2]s $(cat /sys/block/md%[1]d/md/raid_disks),$(cat /sys/block/md%[1]d/md/chunk_size),$(cat /sys/block/md%[1]d/md/layout),$(cat /sys/block/md%[1]d/md/reshape_position)"
echo "MD5 %[2]s $(dd if=/dev/md%[1]d bs=4096 count=%[3]d 2>/dev/null | md5sum | cut -d' ' -f1)"
echo check > /sys/block/md%[1]d/md/sync_action; sleep 1
for i in $(seq 1 900); do [ -e /sys/block/md%[1]d/md ] || break; [ "$(cat /sys/block/md%[1]d/md/sync_action)" = idle ] && break; sleep 1; done
echo "MISMATCH %[2]s $(cat /sys/block/md%[1]d/md/mismatch_cnt)"
mdadm --stop /dev/md%[1]d >/dev/null 2>&1 || echo "ERR %[2]s stop"
`, md, tag, sectors/8)
}

// TestKernelRestripe: restriping reshapes (chunk 512K->64K, layout
// left-symmetric->right-asymmetric, raid6 chunk 64K->128K, chunk
// 64K->128K with more room after the data than before (data_offset moved
// up, backwards), raid5 5->4 and raid6 6->5) between mdtool and Linux
// 6.1 + mdadm 4.2. Two VM runs.
//
// Run 1: (a) the engine's reshapes, finished and cut off (a power cut) at
// about 40%: the kernel assembles each, finishes it if needed and has the
// engine's data (md5), check 0. (b) mdadm --grow makes the same reshapes
// twice: once to the end (its superblocks are compared with the
// engine's: data_offset, data_size, layout, chunk, raid_disks, roles),
// once held at sync_max about a third of the way and cut off by a power
// cut (the shrinks only on the engine side, see kernelRestripes).
// Then the engine assembles each cut set at the kernel's
// reshape_position, serves the kernel's data, finishes the reshape (its
// superblocks again compared with the kernel's), and run 2: the kernel
// assembles them with the same data, check 0.
func TestKernelRestripe(t *testing.T) {
	mdvm.Require(t)
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "members.img"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	im := &imageFile{t: t, f: f, off: 1 << 20}
	var script strings.Builder
	script.WriteString("LO=/usr/bin/losetup\nexport MDADM_NO_SYSTEMCTL=1\necho 500000 > /proc/sys/dev/raid/speed_limit_max\n")
	want := map[string]string{}
	engineSB := map[string][]*superblock.Superblock{}
	md := 0
	for _, kc := range kernelRestripes {
		c := restripeCase(t, kc.name)
		for _, cut := range []bool{false, true} {
			tag := "e-" + c.name
			if cut {
				tag = "c-" + c.name
			}
			mems, md5sum, size := engineRestripe(t, c, cut)
			want[tag] = md5sum
			if !cut {
				for _, d := range mems {
					engineSB[c.name] = append(engineSB[c.name], readSB(t, d))
				}
			}
			var rs []region
			for _, d := range mems {
				rs = append(rs, im.place(d))
			}
			kernelAssembleScript(&script, md, tag, rs, size>>9)
			md++
		}
	}
	// the kernel's own reshapes: to the end, then slowed and cut
	kregs := map[string][]region{}
	var kcases []string
	xmd := map[string]int{}
	for _, variant := range []string{"k", "x"} {
		if variant == "x" {
			script.WriteString("echo 500 > /proc/sys/dev/raid/speed_limit_max\n")
		}
		for _, kc := range kernelRestripes {
			if !kc.kernel {
				continue
			}
			if variant == "k" {
				kcases = append(kcases, kc.name)
			}
			c := restripeCase(t, kc.name)
			tag := variant + "-" + c.name
			var devs []string
			for i := 0; i < c.s.n; i++ {
				r := im.blank(c.s.devSize(0))
				kregs[tag] = append(kregs[tag], r)
				fmt.Fprintf(&script, "K%d=%s\n", i, loopOf(r))
				devs = append(devs, fmt.Sprintf("$K%d", i))
			}
			fmt.Fprintf(&script, `mdadm --create /dev/md%[1]d --run --homehost=any --name=%[2]s --bitmap=none --assume-clean %[3]s %[4]s >/tmp/c 2>&1 || { echo "ERR %[2]s create"; cat /tmp/c; }
dd if=/dev/urandom of=/dev/md%[1]d bs=1M oflag=direct 2>/dev/null
`, md, tag, kc.create, strings.Join(devs, " "))
			for i, g := range kc.grow {
				if i == len(kc.grow)-1 {
					fmt.Fprintf(&script, "echo \"KMD5 %[2]s $(md5sum < /dev/md%[1]d | cut -d' ' -f1)\"\necho \"KSIZE %[2]s $(cat /sys/block/md%[1]d/size)\"\n", md, tag)
				}
				if i == len(kc.grow)-1 && variant == "x" {
					// hold it about a third of the way (sync_max, as
					// mdadm holds a reshape it backs up)
					xmd[kc.name] = md
					fmt.Fprintf(&script, "echo 4096 > /sys/block/md%[1]d/md/sync_max || echo \"ERR %[2]s sync_max\"\n", md, tag)
				}
				if strings.HasPrefix(g, "!") {
					fmt.Fprintf(&script, g[1:]+"\n", md)
					continue
				}
				fmt.Fprintf(&script, "mdadm --grow /dev/md%[1]d %[2]s >/tmp/g 2>&1 || { echo \"ERR %[3]s grow\"; cat /tmp/g; }\n", md, g, tag)
			}
			if variant == "k" {
				fmt.Fprintf(&script, `for i in $(seq 1 900); do [ -e /sys/block/md%[1]d/md ] || break; [ "$(cat /sys/block/md%[1]d/md/reshape_position)" = none ] && [ "$(cat /sys/block/md%[1]d/md/sync_action)" = idle ] && break; sleep 1; done
echo "SHAPE %[2]s $(cat /sys/block/md%[1]d/md/raid_disks),$(cat /sys/block/md%[1]d/md/chunk_size),$(cat /sys/block/md%[1]d/md/layout),$(cat /sys/block/md%[1]d/md/reshape_position)"
mdadm --stop /dev/md%[1]d >/dev/null 2>&1 || echo "ERR %[2]s stop"
`, md, tag)
			}
			md++
		}
	}
	// cut when every held reshape has reached sync_max
	script.WriteString("for i in $(seq 1 900); do\n  ok=1\n")
	for _, name := range kcases {
		fmt.Fprintf(&script, `  c=$(cut -d' ' -f1 /sys/block/md%[1]d/md/sync_completed); [ "$c" = none ] && c=0
  [ "$(cat /sys/block/md%[1]d/md/reshape_position)" = none ] || [ "$c" -ge 4096 ] || ok=0
`, xmd[name])
	}
	script.WriteString("  [ $ok = 1 ] && break; sleep 1\ndone\nsleep 2\n")
	for _, name := range kcases {
		fmt.Fprintf(&script, "echo \"POS x-%s $(cat /sys/block/md%d/md/reshape_position)\"\n", name, xmd[name])
	}
	script.WriteString("mdvm-crash 0\n")
	if err := f.Truncate(im.off); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out := execRetry(t, mdvm.Run{Disks: []mdvm.Disk{{Path: f.Name()}}, Bins: []string{"/usr/sbin/losetup"},
		Script: script.String(), Timeout: 1800 * time.Second}, nil)
	t.Logf("kernel run 1: %v\n%s", time.Since(start), out)
	kv := vmLines(out)
	for tag, h := range want {
		checkKernelArray(t, kv, tag, h)
	}
	if bytes.Contains(out, []byte("ERR")) {
		t.Fatalf("kernel run 1 failed:\n%s", out)
	}
	for _, name := range kcases {
		compareSBs(t, "engine vs kernel "+name, engineSB[name], regionSBs(im, kregs["k-"+name]))
	}
	script.Reset()
	script.WriteString("LO=/usr/bin/losetup\necho 500000 > /proc/sys/dev/raid/speed_limit_max\n")
	for k, name := range kcases {
		tag := "x-" + name
		size := finishKernelCut(t, im, kregs[tag], tag, kv)
		compareSBs(t, "engine-finished vs kernel "+name, regionSBs(im, kregs[tag]), regionSBs(im, kregs["k-"+name]))
		kernelAssembleScript(&script, k, tag, kregs[tag], size>>9)
	}
	start = time.Now()
	out = execRetry(t, mdvm.Run{Disks: []mdvm.Disk{{Path: f.Name()}}, Bins: []string{"/usr/sbin/losetup"},
		Script: script.String(), Timeout: 1200 * time.Second}, nil)
	t.Logf("kernel run 2: %v\n%s", time.Since(start), out)
	if bytes.Contains(out, []byte("ERR")) {
		t.Fatalf("kernel run 2 failed:\n%s", out)
	}
	kv2 := vmLines(out)
	for _, name := range kcases {
		checkKernelArray(t, kv2, "x-"+name, kv["KMD5 x-"+name])
	}
}

// engineRestripe makes the case's reshape in the engine: to the end
// (closed), or cut off at about 40% (the images as they are, no Close).
func engineRestripe(t *testing.T, c restripe, cut bool) ([]*MemDevice, string, int64) {
	t.Helper()
	mems, data, _ := startRestripe(t, c)
	a := open(t, mems, recoverOptions())
	m := &model{b: data}
	if !cut {
		if err := a.Reshape(context.Background()); err != nil {
			t.Fatal(err)
		}
		workload(t, a, m, 21, 30)
		h := arrayMD5(t, a)
		size := a.Size()
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		return mems, h, size
	}
	ra := &reshapeAction{a: a}
	total := a.rs.geo.New.ArraySectors()
	for done := uint64(0); done < total*2/5; {
		n, err := ra.unit(0, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		done += n
	}
	workload(t, a, m, 22, 30)
	checkContent(t, a, m)
	t.Logf("%s: cut at reshape_progress %d, reshape_safe %d of %d", c.name, a.rs.progress.Load(), a.rs.safe.Load(), total)
	return cloneMems(t, mems), arrayMD5(t, a), a.Size()
}

func checkKernelArray(t *testing.T, kv map[string]string, tag, md5sum string) {
	t.Helper()
	if got := kv["MD5 "+tag]; got != md5sum {
		t.Errorf("%s: the kernel's md5 %s, want %s", tag, got, md5sum)
	}
	if got := kv["MISMATCH "+tag]; got != "0" {
		t.Errorf("%s: check found mismatch_cnt %s", tag, got)
	}
	if got := kv["SHAPE "+tag]; !strings.HasSuffix(got, ",none") {
		t.Errorf("%s: the kernel's shape after assembly %q: reshape not finished", tag, got)
	}
}

// finishKernelCut: the engine assembles a set the kernel was reshaping
// when the power was cut, serves the kernel's data at the kernel's
// reshape_position, finishes the reshape and writes the members back.
func finishKernelCut(t *testing.T, im *imageFile, rs []region, tag string, kv map[string]string) int64 {
	t.Helper()
	var mems []*MemDevice
	for _, r := range rs {
		mems = append(mems, im.load(r))
	}
	sb := readSB(t, mems[0])
	a := open(t, mems, recoverOptions())
	ok, pos := a.Reshaping()
	size, _ := strconv.ParseInt(kv["KSIZE "+tag], 10, 64)
	t.Logf("%s: the engine opens at reshape_position %d (superblock %d, the kernel's last %s)", tag, pos, sb.ReshapePosition, kv["POS "+tag])
	if !ok || pos != sb.ReshapePosition || a.Size()>>9 != size {
		t.Fatalf("%s: opened reshaping %v at %d, size %d; the kernel left %s, size %d (superblock features %#x position %d)",
			tag, ok, pos, a.Size()>>9, kv["POS "+tag], size, sb.FeatureMap, sb.ReshapePosition)
	}
	if pos == 0 || pos >= a.rs.geo.New.ArraySectors() {
		t.Errorf("%s: the kernel's reshape not caught mid-way: position %d of %d", tag, pos, a.rs.geo.New.ArraySectors())
	}
	if got := arrayMD5(t, a); got != kv["KMD5 "+tag] {
		t.Errorf("%s: the engine serves md5 %s mid-reshape, the kernel wrote %s", tag, got, kv["KMD5 "+tag])
	}
	if err := a.Reshape(context.Background()); err != nil {
		t.Fatalf("%s: %v", tag, err)
	}
	if got := arrayMD5(t, a); got != kv["KMD5 "+tag] {
		t.Errorf("%s: after the engine's reshape md5 %s, the kernel wrote %s", tag, got, kv["KMD5 "+tag])
	}
	if mm, err := a.Check(context.Background(), false); err != nil || mm != 0 {
		t.Errorf("%s: the engine's check: %d mismatches, %v", tag, mm, err)
	}
	out := a.Size()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		im.store(r, mems[i])
	}
	return out
}

func regionSBs(im *imageFile, rs []region) []*superblock.Superblock {
	var out []*superblock.Superblock
	for _, r := range rs {
		out = append(out, readSB(im.t, im.load(r)))
	}
	return out
}

// compareSBs compares the shape fields the two sides leave after a
// reshape, member by member.
func compareSBs(t *testing.T, what string, a, b []*superblock.Superblock) {
	t.Helper()
	if len(a) != len(b) {
		t.Errorf("%s: %d and %d members", what, len(a), len(b))
		return
	}
	for i := range a {
		x, y := a[i], b[i]
		fx := fmt.Sprintf("data_offset %d data_size %d size %d layout %d chunk %d raid_disks %d role %d features %#x",
			x.DataOffset, x.DataSize, x.Size, x.Layout, x.ChunkSize, x.RaidDisks, x.Role(), x.FeatureMap)
		fy := fmt.Sprintf("data_offset %d data_size %d size %d layout %d chunk %d raid_disks %d role %d features %#x",
			y.DataOffset, y.DataSize, y.Size, y.Layout, y.ChunkSize, y.RaidDisks, y.Role(), y.FeatureMap)
		if fx != fy {
			t.Errorf("%s member %d:\n  %s\n  %s", what, i, fx, fy)
		}
	}
}
