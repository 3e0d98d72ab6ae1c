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
	"strconv"
	"strings"
	"testing"
	"time"

	"mdtool/internal/mdvm"
	"mdtool/superblock"
)

// vmLines collects "KEY N VALUE" lines of a guest's output.
func vmLines(out []byte) map[string]string {
	m := make(map[string]string)
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 3 {
			m[f[0]+" "+f[1]] = f[2]
		}
	}
	return m
}

// arrayMD5 reads the whole array and returns its md5 in hex.
func arrayMD5(t *testing.T, a *Array) string {
	t.Helper()
	h := md5.New()
	buf := make([]byte, 1<<20)
	for off := int64(0); off < a.Size(); {
		n := min(int64(len(buf)), a.Size()-off)
		if _, err := a.ReadAt(buf[:n], off); err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		h.Write(buf[:n])
		off += n
	}
	return hex.EncodeToString(h.Sum(nil))
}

func saveImage(t *testing.T, d *MemDevice, path string) {
	t.Helper()
	b := make([]byte, d.Geometry().Size)
	if _, err := d.Reopen().ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func openImages(t *testing.T, paths []string, wrap func(i int, d Device) Device) *Array {
	t.Helper()
	var ds []Device
	for i, p := range paths {
		d, err := OpenFile(p, FileOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var dd Device = d
		if wrap != nil {
			dd = wrap(i, d)
		}
		ds = append(ds, dd)
	}
	a, err := Open(ds, recoverOptions())
	if err != nil {
		t.Fatalf("open %v: %v", paths, err)
	}
	return a
}

// TestKernelRecovery checks recovery against Linux 6.1 md, both ways:
//
//	(a) the engine rebuilds failed members onto fresh spares (raid1,
//	    raid5, raid6 with two missing, raid10); the kernel assembles the
//	    result, its check finds no mismatch and the data is the same;
//	(b) arrays the kernel left mid-recovery (raid1 stopped, raid5 after a
//	    power cut while dirty) and mid-resync (raid1 initial resync
//	    stopped) are resumed by the engine from the recorded
//	    recovery_offset / resync_offset (nothing is written below them),
//	    and the kernel then finds them clean, in sync and unchanged.
//
// Two VM runs: the kernel's part of (b), then the kernel's checks of all.
func TestKernelRecovery(t *testing.T) {
	mdvm.Require(t)
	dir := t.TempDir()
	img := func(name string, size int64, fill byte) string {
		p := filepath.Join(dir, name+".img")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if fill != 0 {
			b := bytes.Repeat([]byte{fill}, int(size))
			f.Write(b)
		}
		f.Truncate(size)
		f.Close()
		return p
	}
	// (b) images: md0 raid1 a0 a1 + spare a2; md1 raid1 b0 b1 (b1 holds
	// other data, so the initial resync has something to copy); md2 raid5
	// c0..c3 + spare c4.
	var bImgs []string
	makeImages := func() {
		bImgs = nil
		for _, n := range []string{"a0", "a1", "a2"} {
			bImgs = append(bImgs, img(n, 32<<20, 0))
		}
		bImgs = append(bImgs, img("b0", 32<<20, 0), img("b1", 32<<20, 0x5a))
		for _, n := range []string{"c0", "c1", "c2", "c3", "c4"} {
			bImgs = append(bImgs, img(n, 24<<20, 0))
		}
	}
	makeImages()
	script := `
echo 4000 > /proc/sys/dev/raid/speed_limit_max
mdadm --create /dev/md0 --run --homehost=any --name=r0 --level=1 --raid-devices=2 --bitmap=none --assume-clean /dev/vda /dev/vdb >/tmp/c0 2>&1 || { echo ERR create0; cat /tmp/c0; }
dd if=/dev/urandom of=/dev/md0 bs=64k oflag=direct 2>/dev/null
echo "MD5 0 $(md5sum < /dev/md0 | cut -d' ' -f1)"
mdadm /dev/md0 --fail /dev/vda >/dev/null 2>&1; mdadm /dev/md0 --remove /dev/vda >/dev/null 2>&1
mdadm /dev/md0 --add /dev/vdc >/dev/null 2>&1 || echo ERR add0
sleep 3
echo "SYNC 0 $(cat /sys/block/md0/md/sync_action)"
mdadm --stop /dev/md0 >/dev/null 2>&1 || echo ERR stop0
mdadm --create /dev/md1 --run --homehost=any --name=r1 --level=1 --raid-devices=2 --bitmap=none /dev/vdd /dev/vde >/tmp/c1 2>&1 || { echo ERR create1; cat /tmp/c1; }
dd if=/dev/urandom of=/dev/md1 bs=64k count=16 oflag=direct 2>/dev/null
sleep 2
echo "SYNC 1 $(cat /sys/block/md1/md/sync_action)"
echo "MD5 1 $(md5sum < /dev/md1 | cut -d' ' -f1)"
mdadm --stop /dev/md1 >/dev/null 2>&1 || echo ERR stop1
mdadm --create /dev/md2 --run --homehost=any --name=r2 --level=5 --raid-devices=4 --chunk=64 --bitmap=internal --assume-clean /dev/vdf /dev/vdg /dev/vdh /dev/vdi >/tmp/c2 2>&1 || { echo ERR create2; cat /tmp/c2; }
dd if=/dev/urandom of=/dev/md2 bs=192k oflag=direct 2>/dev/null
echo "MD5 2 $(md5sum < /dev/md2 | cut -d' ' -f1)"
echo 2000 > /sys/block/md2/md/sync_speed_max
mdadm /dev/md2 --fail /dev/vdg >/dev/null 2>&1; mdadm /dev/md2 --remove /dev/vdg >/dev/null 2>&1
mdadm /dev/md2 --add /dev/vdj >/dev/null 2>&1 || echo ERR add2
sleep 4
echo "SYNC 2 $(cat /sys/block/md2/md/sync_action)"
echo "DONE 2 $(cat /sys/block/md2/md/sync_completed | tr -d ' ')"
dd if=/dev/md2 of=/tmp/blk bs=4k count=1 skip=100 iflag=direct 2>/dev/null
# hold md2 dirty (active) until the crash, however slow the guest is
echo 3600 > /sys/block/md2/md/safe_mode_delay || echo ERR safe_mode_delay
dd if=/tmp/blk of=/dev/md2 bs=4k count=1 seek=100 oflag=direct 2>/dev/null
mdvm-crash 0
`
	var disks []mdvm.Disk
	for _, p := range bImgs {
		disks = append(disks, mdvm.Disk{Path: p})
	}
	start := time.Now()
	out := execRetry(t, mdvm.Run{Disks: disks, Script: script, Timeout: 300 * time.Second}, makeImages)
	t.Logf("kernel setup run: %v\n%s", time.Since(start), out)
	if bytes.Contains(out, []byte("ERR")) {
		t.Fatalf("kernel setup failed:\n%s", out)
	}
	kv := vmLines(out)
	for i := 0; i < 3; i++ {
		if kv[fmt.Sprintf("SYNC %d", i)] != map[int]string{0: "recover", 1: "resync", 2: "recover"}[i] {
			t.Fatalf("array %d was not mid-sync when stopped:\n%s", i, out)
		}
	}

	// (b) md0: raid1 stopped mid-recovery; a2 took role 0.
	{
		sb := readSB(t, mustFile(t, bImgs[2]))
		rec := sb.RecoveryOffset
		if sb.FeatureMap&superblock.FeatureRecoveryOffset == 0 || rec == 0 || rec >= sb.Size {
			t.Fatalf("md0 spare: features %#x recovery_offset %d of %d", sb.FeatureMap, rec, sb.Size)
		}
		var cw *offsetWrites
		a := openImages(t, bImgs[1:3], func(i int, d Device) Device {
			if i == 1 {
				cw = &offsetWrites{Device: d, from: int64(sb.DataOffset) * 512, below: int64(sb.DataOffset+rec) * 512}
				return cw
			}
			return d
		})
		if mi := a.Members()[sb.Role()]; mi.State != Recovering || mi.RecoveryOffset != rec {
			t.Fatalf("md0 opened: %+v, want recovering from %d", mi, rec)
		}
		if err := a.StartAction(ActionRecover); err != nil {
			t.Fatal(err)
		}
		waitSync(t, a)
		if a.Degraded() != 0 || cw.count.Load() != 0 || cw.writes.Load() == 0 {
			t.Errorf("md0: degraded %d, %d writes below %d, %d in all", a.Degraded(), cw.count.Load(), rec, cw.writes.Load())
		}
		if st := a.SyncStatus(); st.Written != sb.Size-rec {
			t.Errorf("md0: recovery wrote %d sectors, want %d (from %d)", st.Written, sb.Size-rec, rec)
		}
		if got := arrayMD5(t, a); got != kv["MD5 0"] {
			t.Errorf("md0 data md5 %s, kernel had %s", got, kv["MD5 0"])
		}
		compareAdded(t, a, sb, 32<<20)
		a.Close()
	}
	// md1: raid1 initial resync stopped.
	{
		sb := readSB(t, mustFile(t, bImgs[3]))
		ro := sb.ResyncOffset
		if ro == 0 || ro >= sb.Size {
			t.Fatalf("md1: resync_offset %d of %d", ro, sb.Size)
		}
		cws := make([]*offsetWrites, 2)
		a := openImages(t, bImgs[3:5], func(i int, d Device) Device {
			cws[i] = &offsetWrites{Device: d, from: int64(sb.DataOffset) * 512, below: int64(sb.DataOffset+ro) * 512}
			return cws[i]
		})
		if need, from := a.NeedsResync(); !need || from != ro {
			t.Fatalf("md1: NeedsResync %v from %d, superblock says %d", need, from, ro)
		}
		if err := a.Resync(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := cws[0].count.Load() + cws[1].count.Load(); n != 0 {
			t.Errorf("md1: %d writes below resync_offset %d", n, ro)
		}
		if st := a.SyncStatus(); st.Written == 0 || st.Mismatches == 0 {
			t.Errorf("md1: resync from %d rewrote nothing: %+v", ro, st)
		}
		if got := arrayMD5(t, a); got != kv["MD5 1"] {
			t.Errorf("md1 data md5 %s, kernel had %s", got, kv["MD5 1"])
		}
		a.Close()
	}
	// md2: raid5 power cut mid-recovery while dirty; c4 took role 1.
	md2 := []string{bImgs[5], bImgs[7], bImgs[8], bImgs[9]}
	{
		sb := readSB(t, mustFile(t, bImgs[9]))
		rec := sb.RecoveryOffset
		if sb.FeatureMap&superblock.FeatureRecoveryOffset == 0 || rec == 0 || rec >= sb.Size || sb.Role() != 1 {
			t.Fatalf("md2 spare: features %#x role %d recovery_offset %d of %d", sb.FeatureMap, sb.Role(), rec, sb.Size)
		}
		var cw *offsetWrites
		a := openImages(t, md2, func(i int, d Device) Device {
			if i == 3 {
				cw = &offsetWrites{Device: d, from: int64(sb.DataOffset) * 512, below: int64(sb.DataOffset+rec) * 512}
				return cw
			}
			return d
		})
		if need, _ := a.NeedsResync(); !need {
			t.Error("md2: the crashed array is not dirty")
		}
		if mi := a.Members()[1]; mi.State != Recovering || mi.RecoveryOffset != rec {
			t.Fatalf("md2 opened: %+v, want recovering from %d", mi, rec)
		}
		if err := a.StartAction(ActionRecover); err != nil {
			t.Fatal(err)
		}
		waitSync(t, a)
		if a.Degraded() != 0 || cw.count.Load() != 0 || cw.writes.Load() == 0 {
			t.Errorf("md2: degraded %d, %d writes below %d, %d in all", a.Degraded(), cw.count.Load(), rec, cw.writes.Load())
		}
		if st := a.SyncStatus(); st.Written != sb.Size-rec {
			t.Errorf("md2: recovery wrote %d sectors, want %d (from %d)", st.Written, sb.Size-rec, rec)
		}
		if err := a.Resync(context.Background()); err != nil {
			t.Fatal(err)
		}
		if need, _ := a.NeedsResync(); need {
			t.Error("md2 still needs a resync")
		}
		if got := arrayMD5(t, a); got != kv["MD5 2"] {
			t.Errorf("md2 data md5 %s, kernel had %s", got, kv["MD5 2"])
		}
		compareAdded(t, a, sb, 24<<20)
		a.Close()
	}

	// (a) engine rebuilds.
	type aCase struct {
		s       spec
		drop    []int
		replace bool // hot-replace drop[0] instead of failing it; its old image goes to the kernel too
	}
	aCases := []aCase{
		{spec{level: "raid1", n: 2, devMiB: []int{4}, bitmap: true}, []int{0}, false},
		{spec{level: "raid5", n: 4, chunkKiB: 64, devMiB: []int{4}, bitmap: true}, []int{2}, false},
		{spec{level: "raid6", n: 4, chunkKiB: 64, devMiB: []int{4}}, []int{1, 3}, false},
		{spec{level: "raid10", n: 4, chunkKiB: 64, devMiB: []int{4}, bitmap: true}, []int{3}, false},
		{spec{level: "raid5", n: 3, chunkKiB: 64, devMiB: []int{4}, bitmap: true}, []int{1}, true}, // 26 disks in all
	}
	aImgs := make([][]string, len(aCases))
	aMD5 := make([]string, len(aCases))
	for k, c := range aCases {
		mems := createChunk(t, c.s, 0)
		a := open(t, mems, recoverOptions())
		p := make([]byte, a.Size())
		fillPattern(newRand(uint64(40+k)), p)
		mustWrite(t, a, nil, p, 0)
		var fresh []*MemDevice
		if c.replace {
			d := NewMemDevice(c.s.devSize(0))
			fresh = append(fresh, d)
			idx, err := a.AddDevice(d.Reopen(), AddOptions{Replacement: -1})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Replace(c.drop[0], idx); err != nil {
				t.Fatal(err)
			}
			workload(t, a, nil, uint64(k), 30)
			waitSync(t, a)
		} else {
			for _, r := range c.drop {
				if err := a.FailDevice(r); err != nil {
					t.Fatal(err)
				}
			}
			workload(t, a, nil, uint64(k), 30)
			for _, r := range c.drop {
				if err := a.RemoveDevice(r); err != nil {
					t.Fatal(err)
				}
			}
			a.StartAction(ActionFrozen)
			for range c.drop {
				d := NewMemDevice(c.s.devSize(0))
				fresh = append(fresh, d)
				if _, err := a.AddDevice(d.Reopen(), AddOptions{Replacement: -1}); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.StartAction(ActionRecover); err != nil {
				t.Fatal(err)
			}
			waitSync(t, a)
		}
		if a.Degraded() != 0 {
			t.Fatalf("%v: still degraded", c.s)
		}
		aMD5[k] = arrayMD5(t, a)
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		for i, d := range mems {
			if !contains(c.drop, i) || c.replace {
				p := filepath.Join(dir, fmt.Sprintf("e%d-%d.img", k, i))
				saveImage(t, d, p)
				aImgs[k] = append(aImgs[k], p)
			}
		}
		for i, d := range fresh {
			p := filepath.Join(dir, fmt.Sprintf("e%d-new%d.img", k, i))
			saveImage(t, d, p)
			aImgs[k] = append(aImgs[k], p)
		}
	}

	// Run 2: the kernel assembles everything, checks and reads.
	sets := [][]string{bImgs[1:3], bImgs[3:5], md2}
	sets = append(sets, aImgs...)
	disks = nil
	var sc strings.Builder
	for k, set := range sets {
		var devs []string
		for _, p := range set {
			devs = append(devs, fmt.Sprintf("/dev/vd%c", 'a'+len(disks)))
			disks = append(disks, mdvm.Disk{Path: p, Mode: mdvm.COW})
		}
		fmt.Fprintf(&sc, "mdadm --assemble /dev/md%d --run %s >/tmp/a%d 2>&1 || { echo ERR assemble %d; cat /tmp/a%d; }\n", k, strings.Join(devs, " "), k, k, k)
		fmt.Fprintf(&sc, "echo \"DEG %d $(cat /sys/block/md%d/md/degraded)\"\n", k, k)
		fmt.Fprintf(&sc, "echo \"STATE %d $(cat /sys/block/md%d/md/array_state)\"\n", k, k)
		fmt.Fprintf(&sc, "echo \"ACT %d $(cat /sys/block/md%d/md/sync_action)\"\n", k, k)
		fmt.Fprintf(&sc, "echo check > /sys/block/md%d/md/sync_action; sleep 0.3; mdadm --wait /dev/md%d >/dev/null 2>&1\n", k, k)
		fmt.Fprintf(&sc, "echo \"MM %d $(cat /sys/block/md%d/md/mismatch_cnt)\"\n", k, k)
		fmt.Fprintf(&sc, "echo \"MD5 %d $(md5sum < /dev/md%d | cut -d' ' -f1)\"\n", k, k)
		fmt.Fprintf(&sc, "mdadm --stop /dev/md%d >/dev/null 2>&1\n", k)
	}
	start = time.Now()
	out = execRetry(t, mdvm.Run{Disks: disks, Script: sc.String(), Timeout: 300 * time.Second}, nil)
	t.Logf("kernel check run: %v\n%s", time.Since(start), out)
	kv2 := vmLines(out)
	if bytes.Contains(out, []byte("ERR")) {
		t.Errorf("kernel assembly failed:\n%s", out)
	}
	want := []string{kv["MD5 0"], kv["MD5 1"], kv["MD5 2"]}
	want = append(want, aMD5...)
	for k := range sets {
		id := strconv.Itoa(k)
		if kv2["DEG "+id] != "0" || kv2["MM "+id] != "0" || kv2["ACT "+id] != "idle" || kv2["STATE "+id] != "clean" {
			t.Errorf("array %d in the kernel: degraded %q, mismatch_cnt %q, sync_action %q, state %q", k,
				kv2["DEG "+id], kv2["MM "+id], kv2["ACT "+id], kv2["STATE "+id])
		}
		if kv2["MD5 "+id] != want[k] {
			t.Errorf("array %d: kernel reads md5 %s, want %s", k, kv2["MD5 "+id], want[k])
		}
	}
}

func mustFile(t *testing.T, p string) Device {
	t.Helper()
	d, err := OpenFile(p, FileOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// compareAdded adds a blank device of size to a and compares the layout
// fields of the superblock the engine writes with those mdadm --add wrote
// for the kernel's spare (want), then removes it again.
func compareAdded(t *testing.T, a *Array, want *superblock.Superblock, size int64) {
	t.Helper()
	d := NewMemDevice(size)
	idx, err := a.AddDevice(d.Reopen(), AddOptions{Replacement: -1})
	if err != nil {
		t.Fatalf("add: %v", err)
	}
	got := readSB(t, d)
	type f struct {
		name      string
		got, want any
	}
	for _, x := range []f{
		{"data_offset", got.DataOffset, want.DataOffset},
		{"data_size", got.DataSize, want.DataSize},
		{"super_offset", got.SuperOffset, want.SuperOffset},
		{"bitmap_offset", got.BitmapOffset, want.BitmapOffset},
		{"bblog_offset", got.BBLogOffset, want.BBLogOffset},
		{"bblog_size", got.BBLogSize, want.BBLogSize},
		{"set_uuid", got.SetUUID, want.SetUUID},
		{"level", got.Level, want.Level},
		{"size", got.Size, want.Size},
		{"feature_map&bitmap", got.FeatureMap & superblock.FeatureBitmapOffset, want.FeatureMap & superblock.FeatureBitmapOffset},
	} {
		if x.got != x.want {
			t.Errorf("added device %s = %v, mdadm --add wrote %v", x.name, x.got, x.want)
		}
	}
	if got.Role() != superblock.RoleSpare || got.DeviceUUID == want.DeviceUUID {
		t.Errorf("added device: role %#x, device_uuid %x", got.Role(), got.DeviceUUID)
	}
	if err := a.RemoveDevice(idx); err != nil {
		t.Fatal(err)
	}
}

// execRetry runs the VM, and again (at most twice more) when the run
// itself fails: on this 2-core TCG machine a guest occasionally hangs
// before printing anything. reset restores the RW images first.
func execRetry(t *testing.T, r mdvm.Run, reset func()) []byte {
	t.Helper()
	var err error
	var res mdvm.Result
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 && reset != nil {
			reset()
		}
		res, err = r.Exec(context.Background())
		if err == nil {
			if res.Code != 0 {
				t.Fatalf("mdvm guest script exited %d; output:\n%s", res.Code, res.Output)
			}
			return res.Output
		}
		t.Logf("mdvm attempt %d: %v\noutput:\n%s", attempt+1, err, res.Output)
	}
	t.Fatalf("mdvm: %v", err)
	return nil
}
