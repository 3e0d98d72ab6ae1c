package plan

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"mdtool/internal/mdvm"
)

// vmArray is one planned array for the kernel test.
type vmArray struct {
	name string
	o    Options
	// after `mdadm --wait`: active members and spares the kernel reports
	active, spares int
}

func vmArrays() []vmArray {
	const m32 = 32 * mib
	mk := func(level string, n int, sizes []uint64, f func(o *Options)) Options {
		o := base(level, n, devs(sizes...))
		o.Rand = nil // real random UUIDs: arrays must not collide
		if f != nil {
			f(&o)
		}
		return o
	}
	return []vmArray{
		{"raid1", mk("raid1", 2, []uint64{m32, m32}, nil), 2, 0},
		{"raid5-rebuild", mk("raid5", 3, []uint64{m32, m32, m32}, nil), 3, 0},
		{"raid6-1.0-bitmap", mk("raid6", 4, []uint64{m32, m32, m32, m32}, func(o *Options) {
			o.Metadata, o.Bitmap, o.ChunkKiB = "1.0", "internal", 64
		}), 4, 0},
		{"raid10-f2-odd-1.1-bitmap", mk("raid10", 3, []uint64{203776, 203776, 203776}, func(o *Options) {
			o.Layout, o.Metadata, o.Bitmap = "f2", "1.1", "internal"
		}), 3, 0},
		{"raid0-unequal", mk("raid0", 3, []uint64{m32, m32 + 8*mib, m32 + 16*mib}, nil), 3, 0},
		{"linear-1.0-rounding", mk("linear", 2, []uint64{m32 + 100, m32 / 2}, func(o *Options) {
			o.Metadata, o.ChunkKiB = "1.0", 64
		}), 2, 0},
		{"raid4-spare", mk("raid4", 2, []uint64{m32, m32, m32}, nil), 2, 1},
		{"raid10-n2-degraded", mk("raid10", 4, []uint64{m32, 0, m32, m32}, func(o *Options) {
			o.Bitmap, o.BitmapChunk = "internal", 1<<20
		}), 3, 0},
		{"raid5-rs-1.1-assume-clean", mk("raid5", 3, []uint64{m32, m32, m32}, func(o *Options) {
			o.Layout, o.Metadata, o.AssumeClean, o.ChunkKiB = "rs", "1.1", true, 128
		}), 3, 0},
	}
}

var (
	reDetailArraySize = regexp.MustCompile(`(?m)^\s+Array Size : (\d+)`)
	reDetailUsed      = regexp.MustCompile(`(?m)^\s+Used Dev Size : (\d+)`)
	reDetailActive    = regexp.MustCompile(`(?m)^\s+Active Devices : (\d+)`)
	reDetailSpare     = regexp.MustCompile(`(?m)^\s+Spare Devices : (\d+)`)
	reDetailLevel     = regexp.MustCompile(`(?m)^\s+Raid Level : (\S+)`)
	reDetailLayout    = regexp.MustCompile(`(?m)^\s+Layout : ?(.*)$`)
	reDetailMember    = regexp.MustCompile(`(?m)^\s+(\d+)\s+\d+\s+\d+\s+(\d+|-)\s+(.*?)\s+(/dev/vd[a-z])$`)
)

// TestKernelAssemblesPlans writes planned arrays to image files and has
// the real Linux 6.1 md driver (mdvm VM) assemble and run them, then
// compares what mdadm --detail, /proc/mdstat and the block size report
// with the plan. All arrays share one VM run.
func TestKernelAssemblesPlans(t *testing.T) {
	mdvm.Require(t)
	dir := t.TempDir()
	arrays := vmArrays()
	var disks []mdvm.Disk
	var script strings.Builder
	script.WriteString("echo 200000 > /proc/sys/dev/raid/speed_limit_min\n")
	results := make([]*Result, len(arrays))
	// guest device name -> planned member, per array
	guestDev := make([]map[string]Member, len(arrays))
	next := 0
	for i, a := range arrays {
		r, err := Plan(a.o)
		if err != nil {
			t.Fatalf("%s: %v", a.name, err)
		}
		results[i] = r
		imgs := writeImages(t, filepath.Join(dir), a.o, r)
		guestDev[i] = map[string]Member{}
		var members []string
		for _, m := range r.Members {
			p := filepath.Join(dir, fmt.Sprintf("a%d-%s", i, filepath.Base(imgs[m.Device])))
			if err := os.Rename(imgs[m.Device], p); err != nil {
				t.Fatal(err)
			}
			disks = append(disks, mdvm.Disk{Path: p, Mode: mdvm.RW})
			dev := fmt.Sprintf("/dev/vd%c", 'a'+next)
			next++
			guestDev[i][dev] = m
			members = append(members, dev)
		}
		md := fmt.Sprintf("/dev/md%d", i)
		fmt.Fprintf(&script, "echo '=== %d'\n", i)
		fmt.Fprintf(&script, "mdadm --assemble --run %s %s 2>&1; echo \"assemble-rc=$?\"\n", md, strings.Join(members, " "))
		fmt.Fprintf(&script, "grep '^md%d :' /proc/mdstat\n", i)
		fmt.Fprintf(&script, "mdadm --wait %s >/dev/null 2>&1\n", md)
		fmt.Fprintf(&script, "mdadm --detail %s\n", md)
		fmt.Fprintf(&script, "echo \"size=$(blockdev --getsize64 %s)\"\n", md)
		fmt.Fprintf(&script, "echo \"array_state=$(cat /sys/block/md%d/md/array_state)\"\n", i)
		fmt.Fprintf(&script, "mdadm --stop %s 2>&1; echo \"stop-rc=$?\"\n", md)
	}
	if next > 26 {
		t.Fatalf("%d disks, mdvm takes 26", next)
	}
	// mdadm 4.2 erases old superblocks before writing new ones, so
	// re-creating an array with the same UUID starts its events from 0
	// again (Plan never carries events over).
	script.WriteString(`echo '=== recreate'
cd /tmp && truncate -s 32M r0 r1 && L0=$(losetup -f) && losetup $L0 r0 && L1=$(losetup -f) && losetup $L1 r1
for pass in 1 2; do
  mdadm --create /dev/md100 --run --assume-clean --level=1 --raid-devices=2 --uuid=0123abcd:4567ef01:89abcdef:fedcba98 --bitmap=none $L0 $L1 >/dev/null 2>&1
  echo "create$pass-rc=$?"
  dd if=/dev/zero of=/dev/md100 bs=4096 count=16 oflag=direct 2>/dev/null; sleep 1
  mdadm --stop /dev/md100 >/dev/null 2>&1
  echo "events$pass=$(mdadm --examine $L0 | sed -n 's/^ *Events : //p')"
done
`)
	res := mdvm.MustExec(t, mdvm.Run{Disks: disks, Script: script.String(), Timeout: 600 * time.Second})
	out := string(res)
	if os.Getenv("MDTOOL_VM_LOG") != "" {
		t.Logf("guest output:\n%s", out)
	}
	sections := map[string]string{}
	for _, part := range strings.Split(out, "=== ")[1:] {
		name, body, _ := strings.Cut(part, "\n")
		sections[name] = body
	}
	for i, a := range arrays {
		t.Run(a.name, func(t *testing.T) {
			r := results[i]
			body, ok := sections[strconv.Itoa(i)]
			if !ok {
				t.Fatalf("no output for array %d:\n%s", i, out)
			}
			fail := func(format string, args ...any) {
				t.Helper()
				t.Errorf(format+"\n--- guest output ---\n%s", append(args, body)...)
			}
			if !strings.Contains(body, "assemble-rc=0") || !strings.Contains(body, "stop-rc=0") {
				fail("assemble or stop failed")
				return
			}
			if !strings.Contains(body, fmt.Sprintf("md%d : active %s", i, r.LevelName)) {
				fail("/proc/mdstat does not show md%d active %s", i, r.LevelName)
			}
			if m := reDetailLevel.FindStringSubmatch(body); m == nil || m[1] != r.LevelName {
				fail("Raid Level %v, want %s", m, r.LevelName)
			}
			if m := reDetailArraySize.FindStringSubmatch(body); m == nil || m[1] != strconv.FormatUint(r.ArraySizeKiB, 10) {
				fail("Array Size %v, planned %d KiB", m, r.ArraySizeKiB)
			}
			if r.Level > 0 {
				if m := reDetailUsed.FindStringSubmatch(body); m == nil || m[1] != strconv.FormatUint(r.KernelComponentSectors/2, 10) {
					fail("Used Dev Size %v, planned kernel component size %d KiB", m, r.KernelComponentSectors/2)
				}
			}
			if !strings.Contains(body, fmt.Sprintf("size=%d\n", r.ArraySizeKiB*1024)) {
				fail("blockdev --getsize64 differs from the planned %d KiB", r.ArraySizeKiB)
			}
			if r.Bitmap != strings.Contains(body, "Intent Bitmap : Internal") {
				fail("Intent Bitmap line present=%v, planned bitmap=%v", !r.Bitmap, r.Bitmap)
			}
			if r.Level == 5 || r.Level == 6 || r.Level == 10 || r.Level == 0 && r.Members[0].Superblock.FeatureMap != 0 {
				if m := reDetailLayout.FindStringSubmatch(body); m == nil || strings.TrimSpace(m[1]) != r.LayoutName {
					fail("Layout %q, planned %q", m, r.LayoutName)
				}
			}
			if m := reDetailActive.FindStringSubmatch(body); m == nil || m[1] != strconv.Itoa(a.active) {
				fail("Active Devices %v, want %d", m, a.active)
			}
			if m := reDetailSpare.FindStringSubmatch(body); m == nil || m[1] != strconv.Itoa(a.spares) {
				fail("Spare Devices %v, want %d", m, a.spares)
			}
			if !strings.Contains(body, "array_state=clean") && !strings.Contains(body, "array_state=active") {
				fail("array_state not clean/active")
			}
			// Member table: Number is the planned dev_number; a slot is
			// the planned role, or the rebuild slot for the recovery spare.
			rows := reDetailMember.FindAllStringSubmatch(body, -1)
			if len(rows) != len(r.Members) {
				fail("%d member rows, planned %d members", len(rows), len(r.Members))
			}
			for _, row := range rows {
				pm, ok := guestDev[i][row[4]]
				if !ok {
					fail("unexpected member %s", row[4])
					continue
				}
				if row[1] != strconv.Itoa(int(pm.DevNumber)) {
					fail("%s: Number %s, planned dev_number %d", row[4], row[1], pm.DevNumber)
				}
				wantSlot := "-"
				if int(pm.Role) < r.RaidDisks {
					wantSlot = strconv.Itoa(int(pm.Role))
				} else if pm.Device == r.RecoverySpare {
					wantSlot = strconv.Itoa(r.RecoverySlot)
				}
				if row[2] != wantSlot {
					fail("%s: RaidDevice %s, want %s", row[4], row[2], wantSlot)
				}
			}
		})
	}
	rec := sections["recreate"]
	e1 := regexp.MustCompile(`events1=(\d+)`).FindStringSubmatch(rec)
	e2 := regexp.MustCompile(`events2=(\d+)`).FindStringSubmatch(rec)
	if !strings.Contains(rec, "create1-rc=0") || !strings.Contains(rec, "create2-rc=0") || e1 == nil || e2 == nil {
		t.Fatalf("re-create experiment failed:\n%s", rec)
	}
	if e1[1] == "0" {
		t.Errorf("re-create experiment: the writes did not advance events (%s), so it shows nothing", e1[1])
	}
	if e1[1] != e2[1] {
		t.Errorf("re-creating with the same UUID: events %s then %s; mdadm 4.2 would have to keep events", e1[1], e2[1])
	}
	t.Logf("re-create with same uuid: events %s then %s", e1[1], e2[1])
}
