package cmd

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"mdtool/internal/mdvm"
)

// updateCase is one assemble --update run, done by mdadm 4.2 with Linux
// 6.1 in the VM and by mdtool on copies of the same two member images.
type updateCase struct {
	md     string   // md device on both sides
	update string   // --update=
	args   []string // more assemble options
	base   string   // base image set
	grow   int64    // members grown to this size first (bytes), 0: not
	wait   bool     // wait for the resync before stopping
	fails  bool     // assembly refused (exit 1)
}

var updateCases = []updateCase{
	{md: "/dev/md1", update: "uuid", args: []string{"--uuid=11111111:22222222:33333333:44444444"}, base: "b12"},
	{md: "/dev/md2", update: "name", args: []string{"--name=fresh"}, base: "b12"},
	{md: "/dev/md5", update: "name", base: "b12"},
	{md: "/dev/md3", update: "homehost", base: "b12"},
	{md: "/dev/md4", update: "resync", base: "b12", wait: true},
	{md: "/dev/md6", update: "devicesize", base: "b12", grow: 24 << 20},
	{md: "/dev/md7", update: "no-bbl", base: "b12"},
	{md: "/dev/md8", update: "bbl", base: "nobbl12"},
	{md: "/dev/md9", update: "bbl", base: "nobbl10"},
	{md: "/dev/md10", update: "summaries", base: "b12", fails: true},
	{md: "/dev/md11", update: "layout-original", base: "b12", fails: true},
}

// TestAssembleUpdateKernel: the superblocks (mdadm --examine) and the
// bitmap's uuid after mdtool assemble --update=WORD and stop are those
// mdadm 4.2 writes for the same --update on the same images (event counts,
// times and checksums aside), and a refused word is refused with the same
// text and exit status. The same boot checks that the kernel takes
// create --delay's daemon sleep, and -Q's text for a running array.
func TestAssembleUpdateKernel(t *testing.T) {
	mdvm.Parallel(t)
	mdvm.Require(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	const mib = 16 << 20
	bases := map[string][]string{}
	mkBase := func(name string, opts ...string) {
		var devs []string
		for i := 0; i < 2; i++ {
			devs = append(devs, sparse(t, dir, fmt.Sprintf("%s-%d.img", name, i), mib))
		}
		args := append([]string{"create", "/dev/md/" + name, "--run", "--start=false", "--homehost=hA", "--assume-clean",
			"-l1", "-n2", "--bitmap=internal", "--bitmap-chunk=1M", "--delay=7"}, opts...)
		if code, _, errs := mdtool(t, append(args, devs...)...); code != 0 {
			t.Fatalf("create %s: %s", name, errs)
		}
		bases[name] = devs
	}
	mkBase("b12")
	mkBase("nobbl12")
	mkBase("nobbl10", "-e1.0")
	var incBase []string
	for i := 0; i < 3; i++ {
		incBase = append(incBase, sparse(t, dir, fmt.Sprintf("inc-%d.img", i), mib))
	}
	if code, _, errs := mdtool(t, append([]string{"create", "/dev/md/inc", "--run", "--start=false", "--homehost=hA",
		"--assume-clean", "-l5", "-n3"}, incBase...)...); code != 0 {
		t.Fatalf("create inc: %s", errs)
	}
	for _, b := range []string{"nobbl12", "nobbl10"} {
		s := serve(t, runDir, "/dev/md/"+b, append(bases[b], "--update=no-bbl")...)
		s.stop()
	}

	// The members of every case: mdtool's copies and the VM's partitions.
	members := make([][]vmMember, len(updateCases))
	var parts []gptPart
	var images []string
	lba := int64(2048)
	for i, c := range updateCases {
		for j, src := range bases[c.base] {
			m := vmMember{host: filepath.Join(dir, fmt.Sprintf("c%d-%d.img", i, j))}
			copyFile(t, src, m.host)
			size := int64(mib)
			if c.grow != 0 {
				if err := os.Truncate(m.host, c.grow); err != nil {
					t.Fatal(err)
				}
				size = c.grow
			}
			parts = append(parts, gptPart{lba, size / 512})
			images = append(images, m.host)
			lba += size / 512
			m.guest = fmt.Sprintf("/dev/vda%d", len(parts))
			members[i] = append(members[i], m)
		}
	}
	// -I: the raid5's members arrive in the order 0, 2, 1, then 1 again.
	var inc []vmMember
	for j, src := range incBase {
		m := vmMember{host: filepath.Join(dir, fmt.Sprintf("i-%d.img", j))}
		copyFile(t, src, m.host)
		parts = append(parts, gptPart{lba, mib / 512})
		images = append(images, m.host)
		lba += mib / 512
		m.guest = fmt.Sprintf("/dev/vda%d", len(parts))
		inc = append(inc, m)
	}
	incOrder := []int{0, 2, 1, 1}
	disk := filepath.Join(dir, "disk.img")
	f, err := os.Create(disk)
	if err != nil {
		t.Fatal(err)
	}
	size := lba + 2048
	if err := f.Truncate(size * 512); err != nil {
		t.Fatal(err)
	}
	if err := writeGPT(f, size, parts); err != nil {
		t.Fatal(err)
	}
	for k, p := range parts {
		run(t, "dd", "if="+images[k], "of="+disk, "bs=512", fmt.Sprintf("seek=%d", p.first), "conv=notrunc,sparse", "status=none")
	}
	f.Close()

	var script strings.Builder
	for i, c := range updateCases {
		g := []string{members[i][0].guest, members[i][1].guest}
		fmt.Fprintf(&script, "echo \"BEGIN %d rc\"\nmdadm -A %s --homehost=hB --update=%s %s %s 2>&1; echo \"RC $?\"\necho END\n",
			i, c.md, c.update, strings.Join(c.args, " "), strings.Join(g, " "))
		if i == 0 {
			fmt.Fprintf(&script, "echo \"TIMEBASE $(cat /sys/block/md1/md/bitmap/time_base)\"\n")
		}
		if i == 1 {
			fmt.Fprintf(&script, "echo \"BEGIN 1 query\"\nmdadm -Q %s %s\necho END\n", c.md, g[0])
		}
		if c.wait {
			fmt.Fprintf(&script, "mdadm --wait %s\n", c.md)
		}
		fmt.Fprintf(&script, "mdadm -S %s 2>/dev/null\n", c.md)
		for j, d := range g {
			fmt.Fprintf(&script, "echo \"BEGIN %d E%d\"\nmdadm -E %s\necho END\n", i, j, d)
			fmt.Fprintf(&script, "echo \"BEGIN %d X%d\"\nmdadm -X %s | grep -E 'UUID|Chunksize|Daemon'\necho END\n", i, j, d)
		}
	}
	for k, j := range incOrder {
		fmt.Fprintf(&script, "echo \"BEGIN %d inc\"\nmdadm -I --homehost=hA %s 2>&1; echo \"RC $?\"\necho END\n", k, inc[j].guest)
	}
	script.WriteString("mdadm -S /dev/md/inc\n")
	// -o/-w on a running array: md's answers as mdadm words them.
	fmt.Fprintf(&script, "mdadm -A /dev/md20 %s %s\necho \"BEGIN 0 ro\"\n", members[0][0].guest, members[0][1].guest)
	script.WriteString("for o in -o -o -w -w; do mdadm $o /dev/md20 2>&1; echo \"RC $?\"; done\n" +
		"mdadm -D /dev/md20 | grep ' State :'\necho END\nmdadm -S /dev/md20\n")
	// -IY (udev's form) on the members the name update renamed to hB:fresh.
	fmt.Fprintf(&script, "echo \"BEGIN 0 export\"\nmdadm -IY --homehost=hB %s; echo \"RC $?\"\nmdadm -IY --homehost=hB %s; echo \"RC $?\"\necho END\nmdadm -Ss\n",
		members[1][0].guest, members[1][1].guest)
	out := string(mdvm.MustExec(t, mdvm.Run{Disks: []mdvm.Disk{{Path: disk, Mode: mdvm.COW}}, Script: script.String(), Timeout: 900 * time.Second}))
	guest := map[string]string{}
	for _, g := range regexp.MustCompile(`(?s)BEGIN (\d+ \w+)\n(.*?)END\n`).FindAllStringSubmatch(out, -1) {
		guest[g[1]] = g[2]
	}
	if !strings.Contains(out, "TIMEBASE 7\n") {
		t.Errorf("the kernel's bitmap time_base after create --delay=7: %s", regexp.MustCompile(`TIMEBASE.*`).FindString(out))
	}

	checkIncremental(t, runDir, inc, incOrder, guest)
	// What TestReadOnlyReadWrite expects of mdtool.
	if want := "RC 0\n" +
		"mdadm: failed to set readonly for /dev/md20: No such device or address\nRC 1\n" +
		"RC 0\n" +
		"mdadm: failed to set writable for /dev/md20: Device or resource busy\nRC 1\n" +
		"             State : clean \n"; guest["0 ro"] != want {
		t.Errorf("mdadm -o -o -w -w:\n%s\nwant (as mdtool says it):\n%s", guest["0 ro"], want)
	}
	for i, c := range updateCases {
		h := []string{members[i][0].host, members[i][1].host}
		args := append([]string{"--homehost=hB", "--update=" + c.update}, c.args...)
		want := guest[fmt.Sprintf("%d rc", i)]
		if c.fails {
			code, _, errs := mdtool(t, append(append([]string{"assemble", "--foreground", "--run-dir", runDir, c.md}, args...), h...)...)
			got := strings.ReplaceAll(errs, "mdtool:", "mdadm:")
			for j := range h {
				got = strings.ReplaceAll(got, h[j], members[i][j].guest)
			}
			if got+fmt.Sprintf("RC %d\n", code) != want {
				t.Errorf("%s --update=%s: mdtool said\n%sRC %d\nmdadm 4.2:\n%s", c.md, c.update, errs, code, want)
			}
		}
		var s *served
		if !c.fails {
			s = serve(t, runDir, c.md, append(args, h...)...)
		}
		hostRC := "RC 1"
		if s != nil {
			hostRC = "RC 0"
			if i == 1 {
				_, q, _ := mdtool(t, "-Q", c.md, h[0], "--run-dir", runDir)
				q = strings.ReplaceAll(q, h[0], members[i][0].guest)
				if want := guest["1 query"]; q != want {
					t.Errorf("-Q of a running array and a member:\n%s\nmdadm 4.2:\n%s", q, want)
				}
			}
			if c.wait {
				mdtool(t, "wait", "--run-dir", runDir, c.md)
			}
			s.stop()
		}
		if !strings.HasSuffix(want, hostRC+"\n") {
			t.Errorf("%s --update=%s: mdtool %s, mdadm 4.2:\n%s", c.md, c.update, hostRC, want)
		}
		for j := range h {
			e, err := exec.Command("mdadm", "-E", h[j]).Output()
			if err != nil {
				t.Fatalf("mdadm -E %s: %v", h[j], err)
			}
			got, want := normExamine(string(e)), normExamine(guest[fmt.Sprintf("%d E%d", i, j)])
			if got != want {
				t.Errorf("%s --update=%s %v, member %d: mdtool's superblock\n%s\nmdadm 4.2's\n%s", c.md, c.update, c.args, j, got, want)
			}
			_, x, _ := mdtool(t, "-X", h[j])
			var xl []string
			for _, l := range strings.SplitAfter(x, "\n") {
				if strings.Contains(l, "UUID") || strings.Contains(l, "Chunksize") || strings.Contains(l, "Daemon") {
					xl = append(xl, l)
				}
			}
			if got, want := strings.Join(xl, ""), guest[fmt.Sprintf("%d X%d", i, j)]; got != want {
				t.Errorf("%s --update=%s, member %d: bitmap\n%s\nmdadm 4.2:\n%s", c.md, c.update, j, got, want)
			}
		}
	}
	checkIncrementalExport(t, runDir, members[1], guest["0 export"])
}

// checkIncrementalExport runs -IY on the two members of a stopped array
// and compares the udev lines with mdadm 4.2's (MD_DEVICE is the kernel's
// mdN there, the run-directory name here).
func checkIncrementalExport(t *testing.T, runDir string, ms []vmMember, want string) {
	bin := mdtoolBinary(t)
	t.Cleanup(func() { mdtool(t, "stop", "--run-dir", runDir, "/dev/md/fresh") })
	var got strings.Builder
	for _, m := range ms {
		out, err := exec.Command(bin, "-IY", "--homehost=hB", "--config=none", "--run-dir", runDir, m.host).CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&got, "%sRC %d\n", out, code)
	}
	dev := regexp.MustCompile(`(?m)^MD_DEVICE=.*$`)
	if g, w := dev.ReplaceAllString(got.String(), "MD_DEVICE=x"), dev.ReplaceAllString(want, "MD_DEVICE=x"); g != w || !strings.Contains(g, "MD_STARTED=yes") {
		t.Errorf("-IY: mdtool\n%smdadm 4.2:\n%s", got.String(), want)
	}
}

// normExamine drops what differs between runs from mdadm --examine text:
// the device line, times, checksums, event counts and the clean/active
// state (when the superblocks were last written differs).
var reExamineVolatile = regexp.MustCompile(`(?m)^(/dev/\S+|/\S+\.img):\n|^ *(Update Time|Checksum|Events|State) : .*\n`)

func normExamine(s string) string { return reExamineVolatile.ReplaceAllString(s, "") }

// vmMember is a member image on the host and the partition holding a copy
// in the VM.
type vmMember struct{ host, guest string }

// gptPart is one GPT partition: first LBA and length in sectors.
type gptPart struct{ first, sectors int64 }

// writeGPT writes a protective MBR and the primary and backup GPT headers
// and entry arrays (128 entries of 128 bytes) for parts on a disk of size
// sectors, as engine/layout's kernel test does.
func writeGPT(f *os.File, size int64, parts []gptPart) error {
	le := binary.LittleEndian
	mbr := make([]byte, 512)
	e := mbr[446:]
	e[2], e[4] = 2, 0xee
	e[5], e[6], e[7] = 0xff, 0xff, 0xff
	le.PutUint32(e[8:], 1)
	le.PutUint32(e[12:], uint32(min(size-1, 0xffffffff)))
	mbr[510], mbr[511] = 0x55, 0xaa
	entries := make([]byte, 128*128)
	for i, p := range parts {
		ent := entries[i*128:]
		copy(ent[0:16], "mdtool-raid-part")
		le.PutUint64(ent[16:], uint64(i+1))
		le.PutUint64(ent[32:], uint64(p.first))
		le.PutUint64(ent[40:], uint64(p.first+p.sectors-1))
	}
	crc := crc32.ChecksumIEEE(entries)
	header := func(my, alt, entriesLBA int64) []byte {
		h := make([]byte, 512)
		copy(h, "EFI PART")
		le.PutUint32(h[8:], 0x00010000)
		le.PutUint32(h[12:], 92)
		le.PutUint64(h[24:], uint64(my))
		le.PutUint64(h[32:], uint64(alt))
		le.PutUint64(h[40:], 34)
		le.PutUint64(h[48:], uint64(size-34))
		copy(h[56:72], "mdtool-disk-guid")
		le.PutUint64(h[72:], uint64(entriesLBA))
		le.PutUint32(h[80:], 128)
		le.PutUint32(h[84:], 128)
		le.PutUint32(h[88:], crc)
		le.PutUint32(h[16:], crc32.ChecksumIEEE(h[:92]))
		return h
	}
	for _, blk := range []struct {
		lba  int64
		data []byte
	}{{0, mbr}, {1, header(1, size-1, 2)}, {2, entries}, {size - 33, entries}, {size - 1, header(size-1, 1, size-33)}} {
		if _, err := f.WriteAt(blk.data, blk.lba*512); err != nil {
			return err
		}
	}
	return nil
}

// checkIncremental runs the real binary's -I over the members in order
// and compares its output and exit statuses with mdadm 4.2's.
func checkIncremental(t *testing.T, runDir string, inc []vmMember, order []int, guest map[string]string) {
	bin := mdtoolBinary(t)
	t.Cleanup(func() { mdtool(t, "stop", "--run-dir", runDir, "/dev/md/inc") })
	for k, j := range order {
		cmd := exec.Command(bin, "-I", "--homehost=hA", "--config=none", "--run-dir", runDir, inc[j].host)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		got := strings.ReplaceAll(string(out), "mdtool:", "mdadm:")
		for _, m := range inc {
			got = strings.ReplaceAll(got, m.host, m.guest)
		}
		got += fmt.Sprintf("RC %d\n", code)
		if want := guest[fmt.Sprintf("%d inc", k)]; got != want {
			t.Errorf("-I %s: mdtool\n%smdadm 4.2:\n%s", inc[j].guest, got, want)
		}
	}
}
