package cmd

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"mdtool/internal/daemon"
	"mdtool/internal/mdvm"
)

// hostExamineBitmap runs the host's mdadm -X on a read-only loop device
// of img (mdadm 4.2's -X cannot read plain files) and returns its text
// without the Filename line.
func hostExamineBitmap(t *testing.T, img string) string {
	t.Helper()
	requireHostMdadm(t)
	loop := strings.TrimSpace(run(t, "losetup", "--find", "--show", "--read-only", img))
	defer run(t, "losetup", "-d", loop)
	out, err := exec.Command("mdadm", "-X", loop).CombinedOutput()
	if err != nil {
		t.Fatalf("mdadm -X %s (%s): %v\n%s", loop, img, err, out)
	}
	return dropFilename(string(out))
}

// normExamine drops the "(local to host X)" note: the host's mdadm
// compares with its own host name, the in-process mdtool with the test's.
func normExamine(s string) string {
	return strings.TrimSpace(reLocalTo.ReplaceAllString(s, ""))
}

var reLocalTo = regexp.MustCompile(`  \(local to host [^)]*\)`)

func dropFilename(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.Contains(l, "Filename : ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// sameAsHostMdadm compares mdtool examine and -X of every member with the
// host's mdadm.
func sameAsHostMdadm(t *testing.T, what string, devs []string) {
	t.Helper()
	for _, d := range devs {
		host := hostExamine(t, d)
		code, ours, errs := mdtool(t, "examine", d)
		if code != 0 {
			t.Fatalf("%s: examine %s: exit %d: %s", what, d, code, errs)
		}
		if normExamine(host) != normExamine(ours) {
			t.Errorf("%s: examine %s differs from mdadm --examine:\nmdadm:\n%s\nmdtool:\n%s", what, d, host, ours)
		}
		hx := hostExamineBitmap(t, d)
		code, ox, errs := mdtool(t, "examine-bitmap", d)
		if code != 0 {
			t.Fatalf("%s: examine-bitmap %s: exit %d: %s", what, d, code, errs)
		}
		if dropFilename(ox) != hx {
			t.Errorf("%s: examine-bitmap %s differs from mdadm -X:\nmdadm:\n%s\nmdtool:\n%s", what, d, hx, ox)
		}
	}
}

// TestGrowSizeMax: for raid1, raid5, raid6 and raid10 with a bitmap,
// data is written, every member file is extended and `--grow --size=max`
// makes the array use it while it is served: mdadm's message, the new
// size in detail and over NBD (the old data intact, the new region
// writable), the new region resynced, and after the stop host mdadm
// --examine and -X print what mdtool prints. The array assembles again
// at the new size. --array-size then sets a smaller exported size that
// is not kept over a stop and assembly, and is refused beyond the
// component sizes. At the end the kernel assembles every grown set, its
// check finds 0 mismatches and the contents are the same.
func TestGrowSizeMax(t *testing.T) {
	requireHostMdadm(t)
	dir := t.TempDir()
	runDir := dir + "/run"
	const oldSize, newSize = 24 << 20, 40 << 20
	cases := []struct {
		name string
		opts []string
	}{
		{"r1", []string{"-l1", "-n2"}},
		{"r5", []string{"-l5", "-n3", "-c64"}},
		{"r6", []string{"-l6", "-n4", "-c64"}},
		{"r10", []string{"-l10", "-n4", "-c64"}},
	}
	var sets []kernelCheck
	for _, c := range cases {
		md := "/dev/md/grow" + c.name
		devs := mkArrayDevs(t, dir, md, c.opts, oldSize)
		s := serve(t, runDir, md, devs...)
		sock := daemon.PathsFor(runDir, s.name).NBD()
		st0, err := queryStatus(runDir, s.name)
		if err != nil {
			t.Fatal(err)
		}
		old := fillRandom(t, sock, 0, st0.Size, 11)
		for _, d := range devs {
			if err := os.Truncate(d, newSize); err != nil {
				t.Fatal(err)
			}
		}
		code, out, errs := mdtool(t, "--grow", "--run-dir", runDir, md, "--size=max")
		if code != 0 {
			t.Fatalf("%s: grow --size=max: exit %d: %s%s", c.name, code, out, errs)
		}
		st, err := queryStatus(runDir, s.name)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("mdtool: component size of %s has been set to %dK\n", md, st.ComponentSectors/2)
		if errs != want {
			t.Errorf("%s: grow said %q, want %q", c.name, errs, want)
		}
		if st.ComponentSectors <= st0.ComponentSectors || st.Size <= st0.Size {
			t.Fatalf("%s: component size %d -> %d sectors, array %d -> %d bytes: did not grow", c.name,
				st0.ComponentSectors, st.ComponentSectors, st0.Size, st.Size)
		}
		waitFor(t, runDir, md, "resync")
		// The same size again: mdadm's "unchanged".
		code, _, errs = mdtool(t, "--grow", "--run-dir", runDir, md, "-z", "max")
		if want := fmt.Sprintf("mdtool: component size of %s unchanged at %dK\n", md, st.ComponentSectors/2); code != 0 || errs != want {
			t.Errorf("%s: second grow: exit %d, said %q, want %q", c.name, code, errs, want)
		}
		got := readArray(t, sock, st.Size)
		if !bytes.Equal(got[:len(old)], old) {
			t.Fatalf("%s: the data before the old end changed", c.name)
		}
		tail := fillRandom(t, sock, st0.Size, st.Size-st0.Size, 12)
		all := append(append([]byte(nil), old...), tail...)
		if got := readArray(t, sock, st.Size); !bytes.Equal(got, all) {
			t.Fatalf("%s: the grown array does not read back what was written", c.name)
		}
		growArraySizeChecks(t, runDir, md, s.name, st)
		s.stop()
		sameAsHostMdadm(t, c.name+" after --size=max", devs)
		s = serve(t, runDir, md, devs...)
		st2, err := queryStatus(runDir, s.name)
		if err != nil {
			t.Fatal(err)
		}
		if st2.Size != st.Size || st2.ComponentSectors != st.ComponentSectors {
			t.Errorf("%s: assembled again at %d bytes (%d sectors per member), want %d (%d): --array-size kept or size lost",
				c.name, st2.Size, st2.ComponentSectors, st.Size, st.ComponentSectors)
		}
		if got := readArray(t, sock, st.Size); !bytes.Equal(got, all) {
			t.Errorf("%s: assembled again, the array serves other data", c.name)
		}
		s.stop()
		sets = append(sets, kernelCheck{name: c.name, imgs: devs, md5: md5hex(all)})
	}
	if t.Failed() {
		return
	}
	mdvm.Require(t)
	kernelChecks(t, sets)
}

// mkArrayDevs creates an array on fresh member files.
func mkArrayDevs(t *testing.T, dir, md string, opts []string, size int64) []string {
	t.Helper()
	n := 0
	for _, o := range opts {
		if strings.HasPrefix(o, "-n") {
			fmt.Sscanf(o[2:], "%d", &n)
		}
	}
	return mkArray(t, dir, md, n, size, append([]string{"--bitmap=internal", "--bitmap-chunk=1M", "--assume-clean"}, opts...)...)
}

// growArraySizeChecks: --array-size sets a smaller exported size (detail,
// NBD), refuses a size beyond the component sizes, and max restores it.
func growArraySizeChecks(t *testing.T, runDir, md, name string, st *daemon.Status) {
	t.Helper()
	half := st.Size / 2 / 1024
	code, _, errs := mdtool(t, "--grow", "--run-dir", runDir, md, fmt.Sprintf("--array-size=%d", half))
	if code != 0 {
		t.Fatalf("grow --array-size=%d: exit %d: %s", half, code, errs)
	}
	got, err := queryStatus(runDir, name)
	if err != nil {
		t.Fatal(err)
	}
	if got.Size != half*1024 {
		t.Errorf("--array-size=%dK: array size %d bytes", half, got.Size)
	}
	if d := detailText(t, runDir, md); !strings.Contains(d, fmt.Sprintf("Array Size : %d ", half)) {
		t.Errorf("--array-size=%dK: detail says:\n%s", half, d)
	}
	code, _, errs = mdtool(t, "--grow", "--run-dir", runDir, md, fmt.Sprintf("-Z%d", st.Size/1024+1024))
	if code != 1 || errs != "mdtool: --array-size setting is too large.\n" {
		t.Errorf("too large --array-size: exit %d, said %q", code, errs)
	}
	code, _, errs = mdtool(t, "--grow", "--run-dir", runDir, md, "--array-size=max")
	if code != 0 {
		t.Fatalf("grow --array-size=max: exit %d: %s", code, errs)
	}
	if got, err := queryStatus(runDir, name); err != nil || got.Size != st.Size {
		t.Errorf("--array-size=max: size %v (%v), want %d", got, err, st.Size)
	}
	// Not persistent: set it again, the stop and assembly that follow must
	// forget it.
	if code, _, errs := mdtool(t, "--grow", "--run-dir", runDir, md, fmt.Sprintf("--array-size=%d", half)); code != 0 {
		t.Fatalf("grow --array-size=%d: exit %d: %s", half, code, errs)
	}
}

func detailText(t *testing.T, runDir, md string) string {
	t.Helper()
	code, out, errs := mdtool(t, "detail", "--run-dir", runDir, md)
	if code != 0 {
		t.Fatalf("detail %s: exit %d: %s", md, code, errs)
	}
	return out
}
