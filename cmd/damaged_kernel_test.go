package cmd

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"mdtool/internal/mdvm"
)

// copyExtents copies the allocated extents of the file src into dst at
// off (holes stay holes).
func copyExtents(t *testing.T, dst *os.File, src string, off int64) int64 {
	t.Helper()
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	fd := int(f.Fd())
	var pos int64
	for pos < fi.Size() {
		data, err := unix.Seek(fd, pos, unix.SEEK_DATA)
		if err != nil {
			break
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.NewOffsetWriter(dst, off+data), io.NewSectionReader(f, data, hole-data)); err != nil {
			t.Fatal(err)
		}
		pos = hole
	}
	return fi.Size()
}

var reDmgK = regexp.MustCompile(`(?m)^K (\S+) rc=(\d+) loops=(.*?) in=(.*?)$`)

// TestDamagedMembersKernel sends the damaged-member corpus to Linux 6.1
// and mdadm 4.2 in one VM run (each set's members are loop devices over
// regions of one image) and checks what `mdadm --assemble --run` does
// with each set against dmgCase.kernel: the kernel refuses exactly the
// members that fail mdtool's validation (TestDamagedMembers leaves out the
// same), except the cases marked kernelTakes, where mdtool is stricter,
// and mdadm aborts the same sets mdtool aborts.
func TestDamagedMembersKernel(t *testing.T) {
	mdvm.Parallel(t)
	mdvm.Require(t)
	dir := t.TempDir()
	pristine := dmgPristine(t, filepath.Join(dir, "pristine"))
	img := filepath.Join(dir, "corpus.img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	var cases []dmgCase
	var script strings.Builder
	script.WriteString("LO=/usr/bin/losetup\n")
	off := int64(1 << 20)
	for i, c := range dmgCases() {
		if c.name == "empty-file" || c.kernel == "skip" {
			// A loop device cannot be empty; "skip": see the case.
			continue
		}
		devs := dmgSet(t, pristine, filepath.Join(dir, c.name), c)
		script.WriteString("D=''\n")
		for _, d := range devs {
			n := copyExtents(t, f, d, off)
			fmt.Fprintf(&script, "D=\"$D $($LO --offset %d --sizelimit %d --show -f /dev/vda)\"\n", off, n)
			off += (n + 1<<20 - 1) &^ (1<<20 - 1)
		}
		md := fmt.Sprintf("/dev/md%d", i)
		fmt.Fprintf(&script, "mdadm --assemble --run %s $D >/tmp/o 2>&1; rc=$?\n", md)
		fmt.Fprintf(&script, "in=$(ls -d /sys/block/md%d/md/dev-* 2>/dev/null | sed 's,.*/dev-,,' | tr '\\n' ' ')\n", i)
		fmt.Fprintf(&script, "echo \"K %s rc=$rc loops=$D in=$in\"\nsed 's/^/  | /' /tmp/o\n", c.name)
		fmt.Fprintf(&script, "mdadm --stop %s >/dev/null 2>&1\nfor d in $D; do $LO -d $d; done\n", md)
		cases = append(cases, c)
	}
	script.WriteString("dmesg | grep -E 'md: |md/raid|md[0-9]+:' | sed 's/^/  dmesg: /'\n")
	if err := f.Truncate(off); err != nil {
		t.Fatal(err)
	}
	f.Close()
	start := time.Now()
	out := string(mdvm.MustExec(t, mdvm.Run{
		Disks:   []mdvm.Disk{{Path: img}},
		Bins:    []string{"/usr/sbin/losetup"},
		Script:  script.String(),
		Timeout: 1200 * time.Second,
	}))
	t.Logf("VM run: %v", time.Since(start))
	got := map[string][]string{}
	for _, g := range reDmgK.FindAllStringSubmatch(out, -1) {
		got[g[1]] = g[2:]
	}
	for _, c := range cases {
		g, ok := got[c.name]
		if !ok {
			t.Errorf("%s: no result from the guest", c.name)
			continue
		}
		rc, loops, in := g[0], strings.Fields(g[1]), strings.Fields(g[2])
		has := map[string]bool{}
		for _, l := range in {
			has[l] = true
		}
		var idx []string
		for k, l := range loops {
			if has[strings.TrimPrefix(l, "/dev/")] {
				idx = append(idx, fmt.Sprint(k))
			}
		}
		gotK := "rc=" + rc + " in=" + strings.Join(idx, ",")
		want := c.kernel
		switch {
		case want != "":
		case c.abort != "":
			want = "rc=1 in="
		case c.field != "":
			want = "rc=0 in=0,2,3"
		default:
			t.Errorf("%s: no kernel expectation", c.name)
		}
		if gotK != want {
			t.Errorf("%s: the kernel (mdadm --assemble --run) gives %q, want %q", c.name, gotK, want)
		}
	}
	if t.Failed() {
		t.Logf("guest output:\n%s", out)
	}
}
