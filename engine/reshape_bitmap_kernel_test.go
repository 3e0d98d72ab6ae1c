package engine

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mdtool/engine/layout"
	"mdtool/internal/mdvm"
	"mdtool/superblock"
)

// bitmapExamineFields are the mdadm -E lines a reshape or takeover with
// a bitmap must leave as the kernel leaves them (events and times aside).
var bitmapExamineFields = []string{"Feature Map", "Raid Level", "Raid Devices", "Avail Dev Size", "Array Size",
	"Used Dev Size", "Data Offset", "Unused Space", "Internal Bitmap", "Layout", "Chunk Size", "Bad Block Log"}

// bitmapXFields are the mdadm -X lines compared (events aside).
var bitmapXFields = []string{"Version", "State", "Chunksize", "Daemon", "Write Mode", "Sync Size", "Bitmap"}

// guestFields picks the lines "TAG field : value" of the guest output
// for the given fields.
func guestFields(out []byte, tag string, fields []string) map[string]string {
	got := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		l, ok := strings.CutPrefix(sc.Text(), tag+" ")
		if !ok {
			continue
		}
		k, v, ok := strings.Cut(l, " : ")
		if !ok {
			continue
		}
		k = strings.TrimSpace(k)
		for _, f := range fields {
			if f == k {
				got[k] = strings.Join(strings.Fields(v), " ")
			}
		}
	}
	return got
}

// TestKernelReshapeBitmap checks reshapes and takeovers of arrays with an
// internal bitmap against Linux 6.1 md and mdadm 4.2 in one VM run:
//
//   - the engine grows a raid5 4->5 (writes during the reshape) and takes
//     a raid1 over into raid5; the kernel assembles each result with the
//     data the engine served (md5), check finds no mismatch, and mdadm
//     -E/-X of the members equal what mdadm + the kernel made from the
//     same start (--grow --raid-devices=5, --grow --level=5): the bitmap
//     keeps its offset, chunk and sync_size;
//   - a power cut mid-reshape (dirty bits, the parity of a write in the
//     new geometry torn): the kernel continues the reshape, resyncs what
//     the bits say, and has the data (md5), check 0, no dirty bit left;
//   - mdadm's --grow --level=0 on raid5 with a bitmap: the bitmap is
//     removed first; a left-symmetric raid5 then fails silently (exit 1),
//     a parity-last one becomes raid0 (cmd's TestGrowLevel holds mdtool
//     to the same).
func TestKernelReshapeBitmap(t *testing.T) {
	mdvm.Require(t)
	const devMiB = 8
	dir := t.TempDir()
	img := filepath.Join(dir, "members.img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var off int64 = 1 << 20
	place := func(d *MemDevice) region {
		r := region{off, d.Geometry().Size}
		b := make([]byte, r.size)
		if _, err := d.Reopen().ReadAt(b, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(b, r.off); err != nil {
			t.Fatal(err)
		}
		off += (r.size + 1<<20 - 1) &^ (1<<20 - 1)
		return r
	}
	var script strings.Builder
	script.WriteString("LO=/usr/bin/losetup\necho 500000 > /proc/sys/dev/raid/speed_limit_max\n")
	loops := func(ms []*MemDevice) string {
		var s []string
		for _, d := range ms {
			r := place(d)
			s = append(s, fmt.Sprintf("$($LO --offset %d --sizelimit %d --direct-io=on --show -f /dev/vda)", r.off, r.size))
		}
		return strings.Join(s, " ")
	}
	wait := func(md int) string {
		return fmt.Sprintf(`sleep 1; for i in $(seq 1 600); do [ "$(cat /sys/block/md%[1]d/md/reshape_position)" = none ] && [ "$(cat /sys/block/md%[1]d/md/sync_action)" = idle ] && break; sleep 1; done
`, md)
	}
	// verify: md5, check, then -E/-X of the first member after the stop
	verify := func(md int, tag string) string {
		return wait(md) + fmt.Sprintf(`echo "MD5 %[2]s $(md5sum < /dev/md%[1]d | cut -d' ' -f1)"
echo check > /sys/block/md%[1]d/md/sync_action
sleep 1; for i in $(seq 1 600); do [ "$(cat /sys/block/md%[1]d/md/sync_action)" = idle ] && break; sleep 1; done
echo "MISMATCH %[2]s $(cat /sys/block/md%[1]d/md/mismatch_cnt)"
F=$(mdadm -D /dev/md%[1]d | sed -n 's|^ *[0-9]* *[0-9]* *[0-9]* *0 *active sync *||p')
mdadm --stop /dev/md%[1]d >/dev/null 2>&1 || echo "ERR stop %[2]s"
mdadm -E $F | sed 's/^/E-%[2]s /'; mdadm -X $F | sed 's/^/X-%[2]s /'
`, md, tag)
	}
	want := map[string]string{} // md5s

	// 1. raid5 4 -> 5 by the engine; the kernel's twin from the same start
	{
		mems := createChunk(t, spec{level: "raid5", n: 4, chunkKiB: 64, devMiB: []int{devMiB}, bitmap: true}, 64<<10)
		a := open(t, mems, recoverOptions())
		data := make([]byte, a.Size())
		fillPattern(newRand(21), data)
		m := &model{b: data}
		mustWrite(t, a, m, data, 0)
		a.Close()
		start := cloneMems(t, mems)
		a = open(t, mems, recoverOptions())
		spare := NewMemDevice(devMiB << 20)
		if _, err := a.AddDevice(spare, AddOptions{Replacement: -1}); err != nil {
			t.Fatal(err)
		}
		if err := a.StartReshape(ReshapeStart{RaidDisks: 5}); err != nil {
			t.Fatal(err)
		}
		ra := &reshapeAction{a: a}
		p := uint64(0)
		for i := 0; i < 3; i++ {
			n, err := ra.unit(p, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			p += n
		}
		workload(t, a, m, 22, 40)
		if err := a.Reshape(context.Background()); err != nil {
			t.Fatal(err)
		}
		want["grow"] = arrayMD5(t, a)
		a.Close()
		fmt.Fprintf(&script, "mdadm --assemble /dev/md1 %s >/tmp/a 2>&1 || { echo 'ERR assemble grow'; cat /tmp/a; }\n%s",
			loops(append(append([]*MemDevice(nil), mems...), spare)), verify(1, "grow"))
		fmt.Fprintf(&script, `mdadm --assemble /dev/md2 %s >/tmp/a 2>&1 || { echo 'ERR assemble kgrow'; cat /tmp/a; }
mdadm /dev/md2 --add %s >/tmp/a 2>&1 || { echo 'ERR add kgrow'; cat /tmp/a; }
mdadm --grow /dev/md2 --raid-devices=5 >/tmp/g 2>&1; echo "GROW kgrow rc=$?"; cat /tmp/g
%s`, loops(start), loops([]*MemDevice{NewMemDevice(devMiB << 20)}), verify(2, "kgrow"))
	}

	// 2. a power cut mid-reshape with dirty bits and a torn new-side write
	{
		mems := createChunk(t, spec{level: "raid5", n: 4, chunkKiB: 64, devMiB: []int{devMiB}, bitmap: true}, 64<<10)
		a := open(t, mems, recoverOptions())
		data := make([]byte, a.Size())
		fillPattern(newRand(23), data)
		m := &model{b: data}
		mustWrite(t, a, m, data, 0)
		a.Close()
		a = open(t, mems, recoverOptions())
		spare := NewMemDevice(devMiB << 20)
		if _, err := a.AddDevice(spare, AddOptions{Replacement: -1}); err != nil {
			t.Fatal(err)
		}
		if err := a.StartReshape(ReshapeStart{RaidDisks: 5}); err != nil {
			t.Fatal(err)
		}
		ra := &reshapeAction{a: a}
		p := uint64(0)
		for i := 0; i < 4; i++ {
			n, err := ra.unit(p, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			p += n
		}
		rs := a.rs.now()
		newS := p / 2 / rs.New.StripeSectors() * rs.New.StripeSectors()
		oldS := (rs.Old.ArraySectors() - 4*rs.Old.StripeSectors()) / rs.Old.StripeSectors() * rs.Old.StripeSectors()
		b := make([]byte, 8192)
		fillPattern(newRand(24), b)
		mustWrite(t, a, m, b, int64(newS)*512)
		mustWrite(t, a, m, b, int64(oldS)*512)
		all := append(append([]*MemDevice(nil), mems...), spare)
		cut := cloneMems(t, all)
		sb := readSB(t, mems[0])
		tearParity(t, cut, rowOf(rs.New, newS), int64(sb.DataOffset+uint64(int64(sb.NewOffset)))*512, rs.New.ChunkSectors())
		if d := dirtyChunks(t, cut[0]); len(d) != 2 {
			t.Fatalf("the cut image has dirty bits %v, want 2", d)
		}
		full := make([]byte, int64(rs.New.ArraySectors())*512)
		copy(full, m.b)
		sum := md5.Sum(full)
		want["cut"] = hex.EncodeToString(sum[:])
		a.Close()
		fmt.Fprintf(&script, "mdadm --assemble /dev/md3 %s >/tmp/a 2>&1 || { echo 'ERR assemble cut'; cat /tmp/a; }\n%s",
			loops(cut), verify(3, "cut"))
	}

	// 3. raid1 -> raid5 by the engine; the kernel's twin
	{
		mems := createChunk(t, spec{level: "raid1", n: 2, devMiB: []int{devMiB}, bitmap: true}, 64<<10)
		a := open(t, mems, recoverOptions())
		data := make([]byte, a.Size())
		fillPattern(newRand(25), data)
		m := &model{b: data}
		mustWrite(t, a, m, data, 0)
		a.Close()
		start := cloneMems(t, mems)
		a = open(t, mems, recoverOptions())
		if err := a.ChangeLevel(layout.RAID5); err != nil {
			t.Fatal(err)
		}
		workload(t, a, m, 26, 40)
		want["r1r5"] = arrayMD5(t, a)
		a.Close()
		if s := readSB(t, mems[1]); s.FeatureMap&superblock.FeatureBitmapOffset == 0 || s.Level != 5 {
			t.Errorf("raid1 -> raid5: features %#x level %d", s.FeatureMap, s.Level)
		}
		fmt.Fprintf(&script, "mdadm --assemble /dev/md4 %s >/tmp/a 2>&1 || { echo 'ERR assemble r1r5'; cat /tmp/a; }\n%s",
			loops(mems), verify(4, "r1r5"))
		fmt.Fprintf(&script, `mdadm --assemble /dev/md5 %s >/tmp/a 2>&1 || { echo 'ERR assemble kr1r5'; cat /tmp/a; }
mdadm --grow /dev/md5 --level=5 >/tmp/g 2>&1; echo "GROW kr1r5 rc=$?"; cat /tmp/g
%s`, loops(start), verify(5, "kr1r5"))
	}

	// 4. mdadm --grow --level=0 with a bitmap
	// (a 3-device left-symmetric raid5 would start mdadm's restripe
	// towards parity-last instead: exit 0, the bitmap removed as well)
	for i, c := range []struct {
		layout string
		n      int
	}{{"left-symmetric", 2}, {"parity-last", 3}} {
		md := 6 + i
		var d []*MemDevice
		for j := 0; j < c.n; j++ {
			d = append(d, NewMemDevice(devMiB<<20))
		}
		fmt.Fprintf(&script, `mdadm --create /dev/md%[1]d --run --homehost=any --assume-clean -l5 -n%[4]d -c64 --layout=%[2]s --bitmap=internal %[3]s >/tmp/c 2>&1 || { echo "ERR create %[2]s"; cat /tmp/c; }
mdadm --grow /dev/md%[1]d --level=0 >/tmp/g 2>&1; echo "LEVEL0 %[2]s rc=$? level=$(cat /sys/block/md%[1]d/md/level) bitmap=$(cat /sys/block/md%[1]d/md/bitmap/location)"; sed 's/^/LEVEL0-OUT %[2]s /' /tmp/g
mdadm --stop /dev/md%[1]d >/dev/null 2>&1
`, md, c.layout, loops(d), c.n)
	}

	// 5. the kernel's reshape cut by a power loss with dirty bits (the
	// last step: the guest ends there); the engine continues it
	var kregs []region
	{
		var d []string
		for j := 0; j < 5; j++ {
			r := place(NewMemDevice(devMiB << 20))
			kregs = append(kregs, r)
			d = append(d, fmt.Sprintf("$($LO --offset %d --sizelimit %d --direct-io=on --show -f /dev/vda)", r.off, r.size))
		}
		fmt.Fprintf(&script, `K="%s"
set -- $K
mdadm --create /dev/md9 --run --homehost=any --assume-clean -l5 -n4 -c64 --bitmap=internal --bitmap-chunk=64K $1 $2 $3 $4 >/tmp/c 2>&1 || { echo "ERR create kcut"; cat /tmp/c; }
mdadm /dev/md9 --add $5 >/dev/null 2>&1 || echo "ERR add kcut"
dd if=/dev/urandom of=/tmp/fill bs=192k count=112 2>/dev/null
dd if=/tmp/fill of=/dev/md9 bs=192k oflag=direct 2>/dev/null
echo "KSIZE kcut $(cat /sys/block/md9/size)"
dd if=/dev/zero bs=8k count=1 2>/dev/null | tr '\000' A > /tmp/w
dd if=/tmp/w of=/tmp/fill bs=512 seek=128 conv=notrunc 2>/dev/null
dd if=/tmp/w of=/tmp/fill bs=512 seek=42000 conv=notrunc 2>/dev/null
echo "KMD5 kcut $(md5sum < /tmp/fill | cut -d' ' -f1)"
echo 3600 > /sys/block/md9/md/safe_mode_delay
mdadm --grow /dev/md9 --raid-devices=5 >/tmp/g 2>&1 || { echo "ERR grow kcut"; cat /tmp/g; }
echo 1 > /sys/block/md9/md/sync_speed_min
echo 100 > /sys/block/md9/md/sync_speed_max
for i in $(seq 1 600); do p=$(cat /sys/block/md9/md/reshape_position); [ "$p" != none ] && [ "$p" -gt 1536 ] && break; sleep 1; done
echo "KWRITE kcut $p"
dd if=/tmp/w of=/dev/md9 bs=512 seek=128 oflag=direct conv=notrunc 2>/dev/null
dd if=/tmp/w of=/dev/md9 bs=512 seek=42000 oflag=direct conv=notrunc 2>/dev/null
echo "KPOS kcut $(cat /sys/block/md9/md/reshape_position)"
mdvm-crash 0
`, strings.Join(d, " "))
	}

	if err := f.Truncate(off); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	out := execRetry(t, mdvm.Run{Disks: []mdvm.Disk{{Path: img}}, Bins: []string{"/usr/sbin/losetup"},
		Script: script.String(), Timeout: 1200 * time.Second}, nil)
	t.Logf("kernel run: %v\n%s", time.Since(t0), out)
	if bytes.Contains(out, []byte("ERR")) {
		t.Errorf("guest errors:\n%s", out)
	}
	kv := vmLines(out)
	for _, c := range []string{"grow", "cut", "r1r5"} {
		if got := kv["MD5 "+c]; got != want[c] {
			t.Errorf("%s: the kernel's md5 %s, the engine's data %s", c, got, want[c])
		}
		if got := kv["MISMATCH "+c]; got != "0" {
			t.Errorf("%s: kernel check mismatch_cnt %q", c, got)
		}
	}
	for _, c := range []string{"kgrow", "kr1r5"} {
		if !bytes.Contains(out, []byte("GROW "+c+" rc=0")) {
			t.Errorf("%s: mdadm --grow failed", c)
		}
	}
	for _, pair := range [][2]string{{"grow", "kgrow"}, {"r1r5", "kr1r5"}} {
		for _, k := range []string{"E", "X"} {
			fields := bitmapExamineFields
			if k == "X" {
				fields = bitmapXFields
			}
			e, kern := guestFields(out, k+"-"+pair[0], fields), guestFields(out, k+"-"+pair[1], fields)
			if len(kern) < 4 {
				t.Errorf("%s: no -%s from the kernel's members: %v", pair[1], k, kern)
			}
			for _, fl := range fields {
				if e[fl] != kern[fl] {
					t.Errorf("%s -%s %s: the engine's %q, the kernel's %q", pair[0], k, fl, e[fl], kern[fl])
				}
			}
		}
	}
	if x := guestFields(out, "X-cut", bitmapXFields); !strings.Contains(x["Bitmap"], " 0 dirty") {
		t.Errorf("cut: the kernel left dirty bits after reshape + resync: %q", x["Bitmap"])
	}
	if got := kv["LEVEL0 left-symmetric"]; got != "rc=1" || bytes.Contains(out, []byte("LEVEL0-OUT left-symmetric")) ||
		!bytes.Contains(out, []byte("LEVEL0 left-symmetric rc=1 level=raid5 bitmap=none")) {
		t.Errorf("mdadm --grow --level=0 of a left-symmetric raid5 with a bitmap: %q (want rc=1, no words, bitmap removed)", got)
	}
	if !bytes.Contains(out, []byte("LEVEL0 parity-last rc=0 level=raid0")) ||
		!bytes.Contains(out, []byte("LEVEL0-OUT parity-last mdadm: level of /dev/md7 changed to raid0")) {
		t.Errorf("mdadm --grow --level=0 of a parity-last raid5 with a bitmap: not changed to raid0")
	}
	kernelCutByEngine(t, f, kregs, kv)
}

// kernelCutByEngine: the engine assembles the members of the kernel's
// raid5 4->5 reshape cut by a power loss with dirty bits, continues the
// reshape, resyncs the dirty chunks and has the kernel's data (md5 of
// the old size), check 0.
func kernelCutByEngine(t *testing.T, f *os.File, regs []region, kv map[string]string) {
	t.Helper()
	var mems []*MemDevice
	for _, r := range regs {
		b := make([]byte, r.size)
		if _, err := f.ReadAt(b, r.off); err != nil {
			t.Fatal(err)
		}
		d := NewMemDevice(r.size)
		d.WriteAt(b, 0)
		mems = append(mems, d)
	}
	dirty := dirtyChunks(t, mems[0])
	// bit 0: the write at sector 128 (new geometry, row 0); bit 109: the
	// one at sector 42000 (old geometry: stripe 109 of 3 x 64 KiB, member
	// sector 13952, 64 KiB bitmap chunks)
	has := map[uint64]bool{}
	for _, c := range dirty {
		has[c] = true
	}
	if !has[0] || !has[109] {
		t.Errorf("the kernel's cut: dirty bits %v, want 0 and 109 among them", dirty)
	}
	a := open(t, mems, recoverOptions())
	defer a.Close()
	var kpos uint64
	fmt.Sscan(kv["KPOS kcut"], &kpos)
	if ok, pos := a.Reshaping(); !ok || pos < kpos || kpos == 0 {
		t.Errorf("the kernel's cut: reshaping %v at %d, the kernel had recorded %d", ok, pos, kpos)
	}
	if need, _ := a.NeedsResync(); !need {
		t.Error("the kernel's cut needs no resync")
	}
	if err := a.Reshape(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := a.Resync(context.Background()); err != nil {
		t.Fatal(err)
	}
	var size int64
	fmt.Sscan(kv["KSIZE kcut"], &size)
	b := make([]byte, size*512)
	if _, err := a.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	if sum := md5.Sum(b); hex.EncodeToString(sum[:]) != kv["KMD5 kcut"] {
		t.Errorf("the kernel's cut finished by the engine: md5 %x, the kernel's %s", sum, kv["KMD5 kcut"])
	}
	if mm, err := a.Check(context.Background(), false); err != nil || mm != 0 {
		t.Errorf("the kernel's cut finished by the engine: check %d mismatches, %v", mm, err)
	}
}
