package superblock

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"mdtool/internal/mdvm"
)

var update = flag.Bool("update", false, "regenerate golden files under testdata/ (needs the mdvm kernel VM)")

// kernelRefuses predicts from our own checks whether Linux would refuse to
// load the member: any Parse error, or a CheckDevice error other than
// ErrOverlap (which is not a kernel rule).
func kernelRefuses(t *testing.T, b []byte, devSectors uint64) bool {
	sb, err := Parse(b)
	if sb == nil || err != nil {
		return true
	}
	for _, fe := range formatErrors(t, sb.CheckDevice(devSectors)) {
		if !errors.Is(fe, ErrOverlap) {
			return true
		}
	}
	return false
}

// TestKernelAcceptance writes superblocks made with this package, valid and
// broken one rule at a time, onto single members of two-device raid1
// arrays, lets mdadm 4.2 and Linux 6.1 try to start each (degraded, --run)
// and checks that the kernel starts exactly the ones our checks accept.
func TestKernelAcceptance(t *testing.T) {
	mdvm.Require(t)
	const size = 64 << 20
	type tc struct {
		name  string
		minor int
		mod   func(sb *Superblock)
		raw   func(b []byte)
	}
	cases := []tc{
		{name: "valid 1.2", minor: 2},
		{name: "valid 1.1", minor: 1},
		{name: "valid 1.0", minor: 0},
		{name: "checksum", minor: 2, raw: func(b []byte) { b[0xD8] ^= 1 }},
		{name: "pad0", minor: 2, mod: func(sb *Superblock) { sb.Pad0 = 1 }},
		{name: "pad3 last byte", minor: 2, mod: func(sb *Superblock) { sb.Pad3[31] = 1 }},
		{name: "unknown feature", minor: 2, mod: func(sb *Superblock) { sb.FeatureMap = 1 << 13 }},
		{name: "data inside sb", minor: 2, mod: func(sb *Superblock) { sb.DataOffset = 8; sb.BBLogSize = 0 }},
		{name: "data right after sb", minor: 2, mod: func(sb *Superblock) { sb.DataOffset = 9; sb.BBLogSize = 0; sb.DataSize = size/512 - 9 }},
		{name: "data_size 9", minor: 2, mod: func(sb *Superblock) { sb.DataSize = 9; sb.Size = 8 }},
		{name: "raid0 layout on raid1", minor: 2, mod: func(sb *Superblock) { sb.FeatureMap = FeatureRAID0Layout }},
		{name: "bblog of 16 sectors", minor: 2, mod: func(sb *Superblock) { sb.FeatureMap = FeatureBadBlocks; sb.BBLogSize = 16 }},
		{name: "max_dev 1921", minor: 2, mod: func(sb *Superblock) { sb.MaxDev = 1921 }},
		{name: "data past the end", minor: 2, mod: func(sb *Superblock) { sb.DataSize++ }},
		{name: "1.0 data_size past sb", minor: 0, mod: func(sb *Superblock) { sb.DataSize = sb.SuperOffset + 8; sb.Size = sb.SuperOffset - 16 }},
		{name: "overlap is no kernel rule", minor: 2, mod: func(sb *Superblock) { sb.BBLogOffset = 2040 + 4 }},
	}
	var disks []mdvm.Disk
	var script strings.Builder
	want := map[string]bool{}
	for i, c := range cases {
		sb := mkSB(c.minor)
		sb.SetUUID[0] = byte(i + 1) // one array per disk
		sb.SetNameString(fmt.Sprintf("kt:%d", i))
		if c.mod != nil {
			c.mod(sb)
		}
		b := sb.MarshalWithChecksum()
		if c.raw != nil {
			c.raw(b)
		}
		area := make([]byte, AreaSize)
		copy(area, b)
		img := writeImage(t, size, map[int64][]byte{int64(sb.SuperOffset) * 512: area})
		disks = append(disks, mdvm.Disk{Path: img, Mode: mdvm.COW})
		dev := fmt.Sprintf("/dev/vd%c", 'a'+i)
		want[dev] = !kernelRefuses(t, area[:max(len(b), HeaderSize)], size/512)
		fmt.Fprintf(&script, "mdadm --assemble --run /dev/md%d %s >/dev/null 2>&1; "+
			"if grep -q '^md%d : active' /proc/mdstat; then echo \"%s started\"; else echo \"%s refused\"; fi; "+
			"mdadm --stop /dev/md%d >/dev/null 2>&1\n", i, dev, i, dev, dev, i)
	}
	script.WriteString("dmesg | grep -E 'md:|md/|md[0-9]+:' | tail -n 60\n")
	out := string(mdvm.MustExec(t, mdvm.Run{Disks: disks, Script: script.String()}))
	for i, c := range cases {
		dev := fmt.Sprintf("/dev/vd%c", 'a'+i)
		m := regexp.MustCompile(regexp.QuoteMeta(dev) + ` (started|refused)`).FindStringSubmatch(out)
		if m == nil {
			t.Errorf("%s: no result in output", c.name)
			continue
		}
		if started := m[1] == "started"; started != want[dev] {
			t.Errorf("%s (%s): kernel %s it, our checks predict started=%v", c.name, dev, m[1], want[dev])
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("guest output:\n%s", out)
	}
}

// TestKernelGolden checks Parse/Parse090 against superblocks written by the
// real kernel and mdadm (testdata/kernel-*.sb, with the mdadm --examine text
// taken in the same VM run). -update regenerates them in the VM.
func TestKernelGolden(t *testing.T) {
	if *update {
		regenerateGolden(t)
	}
	cases := []struct {
		sb, examine string
		v090        bool
	}{
		{"testdata/kernel-090-raid1.sb", "testdata/kernel-090-raid1.examine", true},
		{"testdata/kernel-12-raid5-bitmap.sb", "testdata/kernel-12-raid5-bitmap.examine", false},
		{"testdata/kernel-10-raid1.sb", "testdata/kernel-10-raid1.examine", false},
	}
	for _, c := range cases {
		b, err := os.ReadFile(c.sb)
		if err != nil {
			t.Fatalf("%v (regenerate with go test -run TestKernelGolden -update ./superblock)", err)
		}
		text, err := os.ReadFile(c.examine)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, line := range strings.Split(string(text), "\n") {
			if k, v, ok := strings.Cut(line, " : "); ok {
				k = strings.TrimSpace(k)
				if _, dup := m[k]; !dup {
					m[k] = strings.TrimSpace(v)
				}
			}
		}
		check := func(label, got string) {
			t.Helper()
			if !strings.HasPrefix(m[label], got) {
				t.Errorf("%s: %s: examine says %q, we have %q", c.sb, label, m[label], got)
			}
		}
		if c.v090 {
			sb, err := Parse090(b)
			if err != nil {
				t.Fatalf("%s: %v", c.sb, err)
			}
			check("Checksum", fmt.Sprintf("%x - correct", sb.Checksum))
			check("UUID", FormatUUID(sb.UUID()))
			check("Events", fmt.Sprint(sb.Events()))
			check("Raid Devices", fmt.Sprint(sb.RaidDisks))
			check("Used Dev Size", fmt.Sprint(sb.Size))
			check("Version", fmt.Sprintf("%d.%02d.%02d", sb.MajorVersion, sb.MinorVersion, sb.PatchVersion))
			if sb.Level != 1 || sb.BigEndian {
				t.Errorf("%s: level %d big-endian %v", c.sb, sb.Level, sb.BigEndian)
			}
			continue
		}
		sb, err := Parse(b)
		if err != nil {
			t.Fatalf("%s: %v", c.sb, err)
		}
		check("Checksum", fmt.Sprintf("%x - correct", sb.Checksum))
		check("Array UUID", FormatUUID(sb.SetUUID))
		check("Device UUID", FormatUUID(sb.DeviceUUID))
		check("Events", fmt.Sprint(sb.Events))
		check("Raid Devices", fmt.Sprint(sb.RaidDisks))
		check("Super Offset", fmt.Sprintf("%d sectors", sb.SuperOffset))
		check("Avail Dev Size", fmt.Sprintf("%d sectors", sb.DataSize))
		check("Feature Map", fmt.Sprintf("0x%x", sb.FeatureMap))
		check("Version", fmt.Sprintf("1.%d", sb.Minor()))
		check("Name", sb.Name())
		if sb.FeatureMap&FeatureBitmapOffset != 0 {
			check("Internal Bitmap", fmt.Sprintf("%d sectors from superblock", sb.BitmapOffset))
		}
		if got := sb.Marshal(); string(got) != string(b[:len(got)]) {
			t.Errorf("%s: Marshal(Parse) differs from the kernel's bytes", c.sb)
		}
	}
}

// regenerateGolden creates the arrays in the VM and stores each first
// member's superblock area and mdadm --examine output.
func regenerateGolden(t *testing.T) {
	mdvm.Require(t)
	dir := t.TempDir()
	const size = 40 << 20
	var disks []mdvm.Disk
	for i := 0; i < 7; i++ {
		p := filepath.Join(dir, fmt.Sprintf("d%d.img", i))
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, size); err != nil {
			t.Fatal(err)
		}
		disks = append(disks, mdvm.Disk{Path: p, Mode: mdvm.RW})
	}
	script := `set -e
mdadm --create /dev/md0 --run --metadata=0.90 --level=1 --raid-devices=2 /dev/vda /dev/vdb
mdadm --wait /dev/md0 || true
mdadm --stop /dev/md0
mdadm --create /dev/md1 --run --metadata=1.2 --name=golden --homehost=mdvm --level=5 --chunk=64 --bitmap=internal --raid-devices=3 /dev/vdc /dev/vdd /dev/vde
mdadm --wait /dev/md1 || true
mdadm --stop /dev/md1
mdadm --create /dev/md2 --run --metadata=1.0 --name=golden10 --homehost=mdvm --level=1 --raid-devices=2 /dev/vdf /dev/vdg
mdadm --wait /dev/md2 || true
mdadm --stop /dev/md2
echo ==== 090; mdadm --examine /dev/vda
echo ==== 12; mdadm --examine /dev/vdc
echo ==== 10; mdadm --examine /dev/vdf
`
	out := string(mdvm.MustExec(t, mdvm.Run{Disks: disks, Script: script}))
	parts := strings.Split(out, "==== ")
	texts := map[string]string{}
	for _, p := range parts[1:] {
		k, v, _ := strings.Cut(p, "\n")
		texts[k] = v
	}
	read := func(img string, off int64, n int) []byte {
		f, err := os.Open(img)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		b := make([]byte, n)
		if _, err := f.ReadAt(b, off); err != nil {
			t.Fatal(err)
		}
		return b
	}
	off10, _ := Offset(0, size/512)
	golden := []struct {
		key, name, img string
		off            int64
		n              int
	}{
		{"090", "kernel-090-raid1", disks[0].Path, int64(Offset090(size)), Size090},
		{"12", "kernel-12-raid5-bitmap", disks[2].Path, 4096, AreaSize},
		{"10", "kernel-10-raid1", disks[5].Path, int64(off10) * 512, AreaSize},
	}
	for _, g := range golden {
		if texts[g.key] == "" {
			t.Fatalf("no examine output for %s:\n%s", g.key, out)
		}
		ex := strings.ReplaceAll(texts[g.key], "/dev/vd", "DEV/vd")
		if err := os.WriteFile(filepath.Join("testdata", g.name+".examine"), []byte(ex), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("testdata", g.name+".sb"), read(g.img, g.off, g.n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
