package cmd

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"mdtool/internal/mdvm"
)

// mdadm 4.2's tests with an external bitmap file (--bitmap=FILE, issue
// 16), translated in testdata/mdadm-tests. Their scripts name the file
// $bmf (mdadm's tests: $targetdir/bitmap or $targetdir/bm): on the host
// a plain file in the test's directory; in the guest a file on an ext2
// filesystem (md reads and writes a bitmap file through bmap, which
// neither 9p nor tmpfs has) on a virtio disk of its own, mounted at
// mdadmBmfMount. finish (prelude.sh) logs the file's -X, and the logs
// see the guest's directory as the share's, so that both normalise to
// TARGET.
func init() {
	mdadmTests = append(mdadmTests,
		mdadmTest{name: "05r1-bitmapfile", devs: 3, final: []int{1, 2}, bitmap: "bitmap", bitmapFinal: true},
		// 0.90's -E lists each member's major and minor, which image
		// files on the host do not have: mdtool runs in the VM too
		mdadmTest{name: "05r1-n3-bitmapfile", devs: 4, final: []int{1, 2, 3}, bitmap: "bitmap", bitmapFinal: true, inVM: true},
		mdadmTest{name: "05r5-bitmapfile", devs: 4, final: []int{1, 2, 3}, bitmap: "bitmap", bitmapFinal: true},
		mdadmTest{name: "05r6-bitmapfile", devs: 5, final: []int{1, 2, 3, 4}, bitmap: "bitmap", bitmapFinal: true},
		// the bitmap is removed again at the end: the kernel assembles
		// the members without it
		mdadmTest{name: "05r1-grow-external", devs: 3, final: []int{1, 2}, bitmap: "bm"},
	)
	mdadmKnown = append(mdadmKnown, mdadmEventBands("05r5-bitmapfile", "raid5 create's recovery and the --add's recovery", [][2]int{{17, 20}, {21, 24}, {40, 46}})...)
	mdadmKnown = append(mdadmKnown, mdadmEventBands("05r6-bitmapfile", "raid6 create's resync and the --add's recovery", [][2]int{{16, 19}, {20, 23}, {39, 45}})...)
}

// mdadmEventBands masks the event counts of a test only within bands
// around the kernel's runs (bands that do not overlap). For a
// raid5/raid6 bitmap-file test: the first stop's -X,
// the second's, and the final -E/-X. The counts are timing in md: its
// sync thread records progress every 1/16 of the range and, with a
// bitmap, every daemon_sleep (md_bitmap_cond_end_sync; 1 s here,
// --delay=1), and the md thread writes what is pending when it runs, so
// the create's resync or recovery and the --add's recovery each make one
// event more or less from run to run. Kernel runs (first stop, second,
// final; the same steps, 20 MB members under TCG): raid5 18/22/42 five
// times, 19/23/42 three, 19/23/43 three, 18/22/41 twice; raid6 17/21/40
// three times, 17/21/41 once, 18/22/42 once. mdtool: raid5 18/22/41, raid6 17/21/40
// (it makes the 1/16 records but not md_bitmap_cond_end_sync's
// daemon_sleep ones, which would follow its own speed: mdtool under TCG
// in 05r1-n3-bitmapfile made 7 more). A count outside its band stays a number
// and shows as a difference; every other field of every -E and -X (the
// dirty counts included) is compared.
func mdadmEventBands(test, what string, bands [][2]int) []mdadmKnownDiff {
	var out []mdadmKnownDiff
	for i, b := range bands {
		var alts []string
		for n := b[0]; n <= b[1]; n++ {
			alts = append(alts, strconv.Itoa(n))
		}
		out = append(out, mdadmKnownDiff{test: test,
			mask: regexp.MustCompile(`Events : (?:` + strings.Join(alts, "|") + `)\b`),
			repl: fmt.Sprintf("Events : %d-%d", b[0], b[1]),
			item: fmt.Sprintf("events of the %s (timing; band %d)", what, i+1)})
	}
	return out
}

// mdadmBmfMount is where the guest mounts the ext2 filesystem that holds
// the bitmap files: mdadm's in vm/NAME, mdtool's (inVM) in mt/NAME, the
// kernel check's copy in k.
const mdadmBmfMount = "/tmp/bmfs"

func mdadmBmfGuestDir(side, name string) string {
	return mdadmBmfMount + "/" + side + "/" + name
}

// bmfEnv is the script's $bmf with the bitmap file in dir (empty for a
// test without one).
func (c mdadmTest) bmfEnv(dir string) []string {
	if c.bitmap == "" {
		return []string{"bmf="}
	}
	return []string{"bmf=" + dir + "/" + c.bitmap}
}

// mdadmBmfQuote quotes the values of K=V pairs for the guest's shell.
func mdadmBmfQuote(env []string) []string {
	q := make([]string, len(env))
	for i, e := range env {
		k, v, _ := strings.Cut(e, "=")
		q[i] = k + "='" + v + "'"
	}
	return q
}

func mdadmBmfTests(tests []mdadmTest) bool {
	for _, c := range tests {
		if c.bitmap != "" {
			return true
		}
	}
	return false
}

// mdadmBmfSetup makes and mounts the guest's ext2 filesystem (on the one
// virtio disk mdadmBmfDisks attaches) and the tests' directories on it.
func mdadmBmfSetup(tests []mdadmTest) string {
	if !mdadmBmfTests(tests) {
		return ""
	}
	var s strings.Builder
	fmt.Fprintf(&s, "mke2fs -F /dev/vda >/dev/null 2>&1 || echo MKE2FS-FAILED\nmkdir -p %s\nmount -t ext4 /dev/vda %s || echo BMFS-MOUNT-FAILED\n", mdadmBmfMount, mdadmBmfMount)
	for _, c := range tests {
		if c.bitmap != "" {
			fmt.Fprintf(&s, "mkdir -p %s %s\n", mdadmBmfGuestDir("vm", c.name), mdadmBmfGuestDir("mt", c.name))
		}
	}
	return s.String()
}

// mdadmBmfDisks is the guest's disk for the bitmap files' filesystem.
func mdadmBmfDisks(t *testing.T, root string, tests []mdadmTest) []mdvm.Disk {
	if !mdadmBmfTests(tests) {
		return nil
	}
	p := filepath.Join(root, "bmfs.img")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, 32<<20); err != nil {
		t.Fatal(err)
	}
	return []mdvm.Disk{{Path: p, Mode: mdvm.RW}}
}

// mdadmBmfModules adds ext4 (which mounts the ext2 filesystem) to the
// guest's modules when a test has a bitmap file, and multipath when a
// test runs md's multipath personality; nil keeps the default.
func mdadmBmfModules(tests []mdadmTest) []string {
	var mods []string
	if mdadmBmfTests(tests) {
		mods = append(mods, "ext4")
	}
	if mdadmMultipath(tests) {
		mods = append(mods, "multipath")
	}
	if mods == nil {
		return nil
	}
	return append(strings.Fields(os.Getenv("MDVM_EXTRA_MODULES")), mods...)
}

// bmfSave copies the bitmap file mdtool left in the guest (inVM) to its
// share directory mt, for the kernel's check.
func (c mdadmTest) bmfSave(mt string) string {
	if c.bitmap == "" {
		return ""
	}
	return fmt.Sprintf("cp %s/%s %s/%s\n", mdadmBmfGuestDir("mt", c.name), c.bitmap, mt, c.bitmap)
}

// bmfKernelArg copies mdtool's final bitmap file from the share
// directory dir onto the guest's filesystem and returns the kernel
// check's "--bitmap=FILE " ("" when the final array has none).
func (c mdadmTest) bmfKernelArg(s *strings.Builder, dir string) string {
	if c.bitmap == "" || !c.bitmapFinal {
		return ""
	}
	k := mdadmBmfMount + "/k"
	fmt.Fprintf(s, "rm -rf %s; mkdir -p %s; cp %s/%s %s/%s\n", k, k, dir, c.bitmap, k, c.bitmap)
	return "--bitmap=" + k + "/" + c.bitmap + " "
}

// mdadmBmfUnguest writes the guest's bitmap directory of a log (side vm
// or mt) as the share's, which normaliseMdadmLog makes TARGET.
func mdadmBmfUnguest(log, side, name string) string {
	return strings.ReplaceAll(log, mdadmBmfGuestDir(side, name)+"/", "/share/"+side+"/"+name+"/")
}

// mdadmBmfBins: writedata and fill (prelude.sh) of mdtool in the guest
// (inVM bitmap-file tests, 00multipath) write through the array's NBD
// socket with nbdcopy.
func mdadmBmfBins(tests []mdadmTest) []string {
	for _, c := range tests {
		if c.bitmap != "" && c.inVM || c.multipath {
			return []string{"/usr/bin/nbdcopy"}
		}
	}
	return nil
}

// TestMdadmBmfScript checks the guest script's bitmap-file parts without
// a VM: the filesystem only when a test has a file, each side's $bmf, the
// inVM copy, and --bitmap= in the kernel check only where the final array
// uses the file.
func TestMdadmBmfScript(t *testing.T) {
	var bmf []mdadmTest
	for _, c := range mdadmTests {
		if c.bitmap != "" {
			bmf = append(bmf, c)
		}
	}
	if len(bmf) != 7 {
		t.Fatalf("%d bitmap-file tests in mdadmTests, want 7", len(bmf))
	}
	plain := mdadmTestVMScript(mdadmTests[:3])
	if strings.Contains(plain, "/dev/vda") || mdadmBmfModules(mdadmTests[:3]) != nil || mdadmBmfBins(mdadmTests[:3]) != nil {
		t.Errorf("a table without bitmap files gets the bitmap filesystem:\n%s", plain)
	}
	s := mdadmTestVMScript(bmf)
	for _, want := range []string{
		"mount -t ext4 /dev/vda /tmp/bmfs ",
		"bmf='/tmp/bmfs/vm/05r1-bitmapfile/bitmap'",
		"bmf='/tmp/bmfs/mt/05r1-n3-bitmapfile/bitmap'",
		"cp /tmp/bmfs/mt/05r1-n3-bitmapfile/bitmap /share/mt/05r1-n3-bitmapfile/bitmap\n",
		"cp /share/mt/05r6-bitmapfile/bitmap /tmp/bmfs/k/bitmap\n",
		"mdadm -A --run /dev/md9 --bitmap=/tmp/bmfs/k/bitmap /dev/loop0 /dev/loop1 /dev/loop2 /dev/loop3 2>&1", // 05r6-bitmapfile
		"mdadm -A --run /dev/md9 /dev/loop0 /dev/loop1 2>&1",                                                   // 05r1-grow-external: the bitmap removed
		"mdadm -B /dev/md9 -l1 -n2 --bitmap=/tmp/bmfs/k/bitmap2 /dev/loop0 /dev/loop1 2>&1",                    // 05r1-re-add-nosuper: built
	} {
		if !strings.Contains(s, want) {
			t.Errorf("guest script lacks %q:\n%s", want, s)
		}
	}
	if m := mdadmBmfModules(bmf); len(m) == 0 || m[len(m)-1] != "ext4" {
		t.Errorf("modules %q, want ext4 last", m)
	}
	if got := mdadmBmfUnguest("F : /tmp/bmfs/vm/x/bitmap\n", "vm", "x"); got != "F : /share/vm/x/bitmap\n" {
		t.Errorf("mdadmBmfUnguest: %q", got)
	}
}
