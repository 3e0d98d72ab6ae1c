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

	"mdtool/engine/layout"
	"mdtool/internal/mdvm"
)

// takeoverStep is one level change of TestKernelTakeover: ChangeLevel
// to level, after failing and removing the member in role drop (-1:
// none), then a spare added and recovered when spare is set.
type takeoverStep struct {
	level layout.Level
	drop  int
	spare bool
}

// TestKernelTakeover checks level changes against Linux 6.1 md and
// mdadm 4.2 in one VM run (every member a loop device over a region of
// one image):
//
//   - the engine changes raid1 -> raid5, raid0 -> raid5 (+ recovery of
//     the parity onto a spare), raid0 -> raid5 -> raid0, raid5 -> raid6
//     (+ recovery of Q onto a spare), raid5 -> raid6 -> raid5, raid10 ->
//     raid0 and raid10 -> raid0 -> raid10 (+ recovery of the odd roles
//     onto two spares) with
//     writes after every change; the kernel assembles the final members
//     at the new level, not degraded, with the data the engine served
//     (md5), and its check finds no mismatch;
//   - mdadm and the kernel change raid5 -> raid6 (--layout=preserve,
//     recovery onto the spare added), raid1 -> raid5 and raid0 -> raid5
//     -> raid0; the engine assembles the members at the new level with
//     the kernel's data (md5) and its check finds no mismatch.
func TestKernelTakeover(t *testing.T) {
	mdvm.Require(t)
	const devMiB = 8
	cases := []struct {
		name  string
		spec  spec
		steps []takeoverStep
		want  string // the kernel's level afterwards
	}{
		{"r1-r5", spec{level: "raid1", n: 2, devMiB: []int{devMiB}}, []takeoverStep{{layout.RAID5, -1, false}}, "raid5"},
		{"r0-r5", spec{level: "raid0", n: 3, chunkKiB: 64, devMiB: []int{devMiB}}, []takeoverStep{{layout.RAID5, -1, true}}, "raid5"},
		{"r0-r5-r0", spec{level: "raid0", n: 3, chunkKiB: 64, devMiB: []int{devMiB}},
			[]takeoverStep{{layout.RAID5, -1, true}, {layout.RAID0, 3, false}}, "raid0"},
		{"r5-r6", spec{level: "raid5", n: 3, chunkKiB: 64, devMiB: []int{devMiB}}, []takeoverStep{{layout.RAID6, -1, true}}, "raid6"},
		{"r5-r6-r5", spec{level: "raid5", n: 4, chunkKiB: 32, devMiB: []int{devMiB}},
			[]takeoverStep{{layout.RAID6, -1, true}, {layout.RAID5, -1, false}}, "raid5"},
		{"r10-r0", spec{level: "raid10", n: 4, chunkKiB: 64, devMiB: []int{devMiB}}, []takeoverStep{{layout.RAID0, dropMirrors, false}}, "raid0"},
		{"r10-r0-r10", spec{level: "raid10", n: 4, chunkKiB: 32, devMiB: []int{devMiB}},
			[]takeoverStep{{layout.RAID0, dropMirrors, false}, {layout.RAID10, -1, true}}, "raid10"},
	}
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
	blank := func() region {
		r := region{off, devMiB << 20}
		off += r.size
		return r
	}
	var script strings.Builder
	script.WriteString("LO=/usr/bin/losetup\necho 500000 > /proc/sys/dev/raid/speed_limit_max\n")
	loop := func(r region) string {
		return fmt.Sprintf("$($LO --offset %d --sizelimit %d --direct-io=on --show -f /dev/vda)", r.off, r.size)
	}
	md5Of := func(md int, sectors int64) string {
		return fmt.Sprintf("$(dd if=/dev/md%d bs=4096 count=%d 2>/dev/null | md5sum | cut -d' ' -f1)", md, sectors/8)
	}
	check := func(md int) string {
		return fmt.Sprintf(`if [ -e /sys/block/md%[1]d/md/sync_action ]; then
  echo check > /sys/block/md%[1]d/md/sync_action; sleep 1
  for i in $(seq 1 600); do [ "$(cat /sys/block/md%[1]d/md/sync_action)" = idle ] && break; sleep 1; done
  echo "MISMATCH %[1]d $(cat /sys/block/md%[1]d/md/mismatch_cnt)"
else echo "MISMATCH %[1]d none"; fi
`, md)
	}

	// The engine's changes.
	served := make([]string, len(cases))
	sizes := make([]int64, len(cases))
	finals := make([][]*MemDevice, len(cases)) // the final members, in role order then spares
	for k, c := range cases {
		mems := create(t, c.spec)
		a := open(t, mems, recoverOptions())
		data := make([]byte, a.Size())
		fillPattern(newRand(uint64(40+k)), data)
		m := &model{b: data}
		mustWrite(t, a, m, data, 0)
		dropped := map[int]bool{}
		for _, s := range c.steps {
			if s.drop == dropMirrors {
				dropMirrorHalves(t, a, dropped)
			}
			if s.drop >= 0 {
				for _, mi := range a.Members() {
					if mi.Role == s.drop && mi.Device >= 0 {
						if err := a.FailDevice(mi.Device); err != nil {
							t.Fatal(err)
						}
						if err := a.RemoveDevice(mi.Device); err != nil {
							t.Fatal(err)
						}
						dropped[mi.Device] = true
					}
				}
			}
			if err := a.ChangeLevel(s.level); err != nil {
				t.Fatalf("%s: to %v: %v", c.name, s.level, err)
			}
			workload(t, a, m, uint64(k*10)+uint64(s.level), 60)
			if s.spare {
				// one spare per missing role (raid10: every odd one), one batch
				for k, missing := 0, a.Degraded(); k < max(missing, 1); k++ {
					mems = append(mems, NewMemDevice(devMiB<<20))
					if _, err := a.AddDevice(mems[len(mems)-1], AddOptions{Replacement: -1, DeferRecovery: k+1 < missing}); err != nil {
						t.Fatal(err)
					}
				}
				waitSync(t, a)
			}
			checkContent(t, a, m)
		}
		served[k] = arrayMD5(t, a)
		sizes[k] = a.Size()
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		script.WriteString("D=''\n")
		for i, d := range mems {
			r := place(d) // dropped members take their room too
			if !dropped[i] {
				finals[k] = append(finals[k], d)
				fmt.Fprintf(&script, "D=\"$D %s\"\n", loop(r))
			}
		}
		fmt.Fprintf(&script, `mdadm --assemble /dev/md%[1]d $D >/tmp/a 2>&1 || { echo "ERR %[1]d assemble"; cat /tmp/a; }
echo "LEVEL %[1]d $(cat /sys/block/md%[1]d/md/level)"
echo "DEGRADED %[1]d $(cat /sys/block/md%[1]d/md/degraded 2>/dev/null || echo 0)"
echo "MD5 %[1]d %[2]s"
%[3]smdadm --stop /dev/md%[1]d >/dev/null 2>&1 || echo "ERR %[1]d stop"
`, k, md5Of(k, sizes[k]>>9), check(k))
	}

	// mdadm's and the kernel's changes.
	type kcase struct {
		name    string
		members int // regions; the last ones are spares when create < members
		create  string
		grow    []string
		keep    int    // members the engine opens afterwards (the first ones)
		want    string // level
		twin    int    // the engine's case making the same change (superblocks compared)
	}
	kcases := []kcase{
		{"k-r5-r6", 4, "--level=5 --raid-devices=3 --chunk=64 --bitmap=none", []string{"--level=6 --raid-devices=4 --layout=preserve --add SPARE"}, 4, "raid6", 3},
		{"k-r1-r5", 2, "--level=1 --raid-devices=2 --bitmap=none", []string{"--level=5"}, 2, "raid5", 0},
		{"k-r0-r5-r0", 4, "--level=0 --raid-devices=3 --chunk=64", []string{"--level=5 --layout=parity-last --add SPARE", "--level=0"}, 3, "raid0", 2},
		{"k-r5-r6-r5", 5, "--level=5 --raid-devices=4 --chunk=32 --bitmap=none",
			[]string{"--level=6 --raid-devices=5 --layout=preserve --add SPARE", "--level=5"}, 5, "raid5", 4},
	}
	kregions := make([][]region, len(kcases))
	for j, c := range kcases {
		md := 10 + j
		var devs []string
		for i := 0; i < c.members; i++ {
			r := blank()
			kregions[j] = append(kregions[j], r)
			fmt.Fprintf(&script, "K%d=%s\n", i, loop(r))
			devs = append(devs, fmt.Sprintf("$K%d", i))
		}
		n := c.members
		if strings.Contains(strings.Join(c.grow, " "), "SPARE") {
			n--
		}
		fmt.Fprintf(&script, `mdadm --create /dev/md%[1]d --run --homehost=any --assume-clean %[2]s %[3]s >/tmp/c 2>&1 || { echo "ERR %[1]d create"; cat /tmp/c; }
dd if=/dev/urandom of=/dev/md%[1]d bs=1M oflag=direct 2>/dev/null
`, md, c.create, strings.Join(devs[:n], " "))
		for _, g := range c.grow {
			g = strings.ReplaceAll(g, "SPARE", devs[len(devs)-1])
			fmt.Fprintf(&script, `mdadm --grow /dev/md%[1]d %[2]s >/tmp/g 2>&1; echo "GROW %[1]d rc=$?"; cat /tmp/g
sleep 1; mdadm --wait /dev/md%[1]d >/dev/null 2>&1
`, md, g)
		}
		fmt.Fprintf(&script, `echo "LEVEL %[1]d $(cat /sys/block/md%[1]d/md/level)"
echo "SIZE %[1]d $(cat /sys/block/md%[1]d/size)"
echo "MD5 %[1]d $(md5sum < /dev/md%[1]d | cut -d' ' -f1)"
mdadm --stop /dev/md%[1]d >/dev/null 2>&1 || echo "ERR %[1]d stop"
`, md)
	}
	if err := f.Truncate(off); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out := mdvm.MustExec(t, mdvm.Run{
		Disks:   []mdvm.Disk{{Path: img}},
		Bins:    []string{"/usr/sbin/losetup"},
		Script:  script.String(),
		Timeout: 1800 * time.Second,
	})
	t.Logf("kernel run: %v\n%s", time.Since(start), out)
	if bytes.Contains(out, []byte("ERR")) {
		t.Errorf("guest errors:\n%s", out)
	}
	kv := vmLines(out)
	for k, c := range cases {
		if got := kv[fmt.Sprintf("LEVEL %d", k)]; got != c.want {
			t.Errorf("%s: the kernel assembled level %q, want %s", c.name, got, c.want)
		}
		if got := kv[fmt.Sprintf("DEGRADED %d", k)]; got != "0" {
			t.Errorf("%s: the kernel's array is degraded: %s", c.name, got)
		}
		if got := kv[fmt.Sprintf("MD5 %d", k)]; got != served[k] {
			t.Errorf("%s: kernel md5 %s, the engine served %s", c.name, got, served[k])
		}
		want := "0"
		if c.want == "raid0" {
			want = "none"
		}
		if got := kv[fmt.Sprintf("MISMATCH %d", k)]; got != want {
			t.Errorf("%s: kernel check mismatch_cnt %s", c.name, got)
		}
	}
	for j, c := range kcases {
		md := 10 + j
		if !bytes.Contains(out, []byte(fmt.Sprintf("GROW %d rc=0", md))) || bytes.Contains(out, []byte(fmt.Sprintf("GROW %d rc=1", md))) {
			t.Errorf("%s: mdadm --grow failed", c.name)
		}
		if got := kv[fmt.Sprintf("LEVEL %d", md)]; got != c.want {
			t.Fatalf("%s: the kernel's level %q, want %s", c.name, got, c.want)
		}
		var mems []*MemDevice
		for _, r := range kregions[j][:c.keep] {
			b := make([]byte, r.size)
			if _, err := f.ReadAt(b, r.off); err != nil {
				t.Fatal(err)
			}
			d := NewMemDevice(r.size)
			if _, err := d.WriteAt(b, 0); err != nil {
				t.Fatal(err)
			}
			mems = append(mems, d)
		}
		compareTakeoverSupers(t, c.name, mems, finals[c.twin])
		a := open(t, mems, recoverOptions())
		if lv := a.Geometry().Level().String(); lv != c.want || a.Degraded() != 0 {
			t.Errorf("%s: the engine assembled %s, degraded %d; the kernel left %s", c.name, lv, a.Degraded(), c.want)
		}
		size, _ := strconv.ParseInt(kv[fmt.Sprintf("SIZE %d", md)], 10, 64)
		if a.Size()>>9 != size {
			t.Errorf("%s: engine size %d sectors, kernel %d", c.name, a.Size()>>9, size)
		}
		if got := arrayMD5(t, a); got != kv[fmt.Sprintf("MD5 %d", md)] {
			t.Errorf("%s: engine md5 %s, the kernel's %s", c.name, got, kv[fmt.Sprintf("MD5 %d", md)])
		}
		if c.want != "raid0" {
			if mm, err := a.Check(context.Background(), false); err != nil || mm != 0 {
				t.Errorf("%s: engine check: %d mismatches, %v", c.name, mm, err)
			}
		}
		a.Close()
	}
}

// compareTakeoverSupers compares the fields a level change writes in the
// superblocks the kernel left (kernel) with the engine's after the same
// change on an array of the same shape (engine), member by member in
// role order (then the spares).
func compareTakeoverSupers(t *testing.T, name string, kernel, engine []*MemDevice) {
	t.Helper()
	if len(kernel) != len(engine) {
		t.Errorf("%s: %d kernel members, %d engine members", name, len(kernel), len(engine))
		return
	}
	for i := range kernel {
		k, e := readSB(t, kernel[i]), readSB(t, engine[i])
		type f struct {
			name      string
			got, want any
		}
		for _, x := range []f{
			{"level", e.Level, k.Level}, {"layout", e.Layout, k.Layout}, {"chunk", e.ChunkSize, k.ChunkSize},
			{"raid_disks", e.RaidDisks, k.RaidDisks}, {"size", e.Size, k.Size}, {"feature_map", e.FeatureMap, k.FeatureMap},
			{"new_level", e.NewLevel, k.NewLevel}, {"new_layout", e.NewLayout, k.NewLayout}, {"new_chunk", e.NewChunk, k.NewChunk},
			{"delta_disks", e.DeltaDisks, k.DeltaDisks}, {"resync_offset", e.ResyncOffset, k.ResyncOffset},
			{"role", e.Role(), k.Role()},
		} {
			if x.got != x.want {
				t.Errorf("%s member %d: %s %v, the kernel wrote %v", name, i, x.name, x.got, x.want)
			}
		}
	}
}
