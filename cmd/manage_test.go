package cmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestManageFailAndDetailTest fails members of running arrays with the
// mdadm command line and checks what detail, --test, the superblocks and
// the next assembly make of it; and the refusals of manage, stop, detail
// and wait.
func TestManageFailAndDetailTest(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/mg", 4, 32<<20, "-l5", "-n4", "-c64", "--assume-clean")
	s := serve(t, runDir, "/dev/md/mg", devs...)
	// Devices to add: one that is no member, one too small, one with a
	// filesystem on it.
	other := sparse(t, dir, "other.img", 32<<20)
	small := sparse(t, dir, "small.img", 1<<20)
	fsImg := sparse(t, dir, "fs.img", 32<<20)
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", fsImg).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v %s", err, out)
	}
	detailTest := func() int {
		code, _, _ := mdtool(t, "detail", "--test", "--run-dir", runDir, "/dev/md/mg")
		return code
	}
	if c := detailTest(); c != 0 {
		t.Errorf("detail --test of a healthy array: %d", c)
	}
	// mdadm's manage form: MD --fail DEV.
	code, _, errs := mdtool(t, "/dev/md/mg", "--fail", devs[1], "--run-dir", runDir)
	if code != 0 || errs != "mdtool: set "+devs[1]+" faulty in /dev/md/mg\n" {
		t.Errorf("--fail: exit %d: %q", code, errs)
	}
	code, out, _ := mdtool(t, "-D", "/dev/md/mg", "--run-dir", runDir)
	for _, want := range []string{
		"             State : clean, degraded \n",
		"    Active Devices : 3\n   Working Devices : 3\n    Failed Devices : 1\n     Spare Devices : 0\n",
		"       -       0        0        1      removed\n",
		"       1       0        0        -      faulty   " + devs[1] + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("detail lacks %q:\n%s", want, out)
		}
	}
	if c := detailTest(); c != 1 {
		t.Errorf("detail --test of a degraded array: %d, want 1", c)
	}
	// Errors, worded as mdadm words them; nothing changes.
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--fail", filepath.Join(dir, "nope.img")}, "stat failed for " + filepath.Join(dir, "nope.img") + ": No such file or directory"},
		{[]string{"--fail", other}, "set device faulty failed for " + other + ":  No such device"},
		{[]string{"--remove", other}, "hot remove failed for " + other + ": No such device or address"},
		{[]string{"--remove", devs[0]}, "hot remove failed for " + devs[0] + ": Device or resource busy"},
		{[]string{"--add", devs[0]}, "Cannot open " + devs[0] + ": Device or resource busy"},
		{[]string{"--add", fsImg}, fsImg + " appears to contain ext4 filesystem"},
		{[]string{"--add", small}, small + " not large enough to join array"},
		{[]string{"--re-add", other}, "--re-add for " + other + " to /dev/md/mg is not possible"},
		{[]string{"--add", "failed"}, "failed only meaningful with -r or --re-add, not -a"},
		{[]string{"--add", "d1.img"}, "d1.img only meaningful with -r or -f, not -a"},
		{[]string{"--fail", "nothing.img"}, "nothing.img does not appear to be a component of /dev/md/mg"},
		{[]string{"--replace", other}, other + " not found in /dev/md/mg so cannot --replace it"},
		{[]string{"--replace", devs[1]}, devs[1] + " is not active and so cannot be replaced."},
		{[]string{"--replace", devs[0], "--with", devs[3]}, devs[3] + " is active and cannot be a replacement"},
		{[]string{"--replace", devs[0], "--with", devs[1]}, devs[1] + " is faulty and cannot be a replacement"},
		{[]string{"--replace", devs[0], "--with", other}, other + " not found in /dev/md/mg so cannot make it preferred replacement"},
		{[]string{"--with", other}, "No matching --replace device for --with " + other},
	} {
		args := append([]string{"/dev/md/mg"}, tc.args...)
		args = append(args, "--run-dir", runDir)
		code, _, errs := mdtool(t, args...)
		if code != 1 || !strings.Contains(errs, "mdtool: "+tc.msg) {
			t.Errorf("%v: exit %d: %q, want %q", tc.args, code, errs, tc.msg)
		}
	}
	if c := detailTest(); c != 1 {
		t.Errorf("detail --test after refused operations: %d, want 1", c)
	}
	// A second failure: raid5 has failed. Linux 6.1 marks the member
	// faulty but answers EBUSY (MD_BROKEN); mdadm exits 2.
	if code, _, errs := mdtool(t, "manage", "/dev/md/mg", "-f", devs[2], "--run-dir", runDir); code != 2 ||
		errs != "mdtool: set device faulty failed for "+devs[2]+":  Device or resource busy\n" {
		t.Errorf("second --fail: %d %q", code, errs)
	}
	code, out, _ = mdtool(t, "detail", "--run-dir", runDir, "/dev/md/mg")
	if !strings.Contains(out, "             State : clean, FAILED \n     Failed Reason : ") ||
		!strings.Contains(out, "       2       0        0        -      faulty   "+devs[2]+"\n") {
		t.Errorf("detail of a failed array:\n%s", out)
	}
	if c := detailTest(); c != 2 {
		t.Errorf("detail --test of a failed array: %d, want 2", c)
	}
	// wait: nothing to wait for.
	if code, _, _ := mdtool(t, "--wait", "/dev/md/mg", "--run-dir", runDir); code != 1 {
		t.Errorf("wait on an idle array: %d, want 1", code)
	}
	s.stop()

	// The superblocks record the failures: devs[1] and devs[2] are out.
	e, _ := exec.Command("mdadm", "--examine", devs[0]).CombinedOutput()
	if !strings.Contains(string(e), "   Array State : A..A ") {
		t.Errorf("mdadm --examine after the failures:\n%s", e)
	}
	// Not running any more.
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"-D", "/dev/md/mg"}, 1, "mdtool: cannot open /dev/md/mg: No such file or directory\n"},
		{[]string{"-D", "--test", "/dev/md/mg"}, 4, "mdtool: cannot open /dev/md/mg: No such file or directory\n"},
		{[]string{"-S", "/dev/md/mg"}, 1, "mdtool: error opening /dev/md/mg: No such file or directory\n"},
		{[]string{"/dev/md/mg", "--fail", devs[0]}, 1, "mdtool: error opening /dev/md/mg: No such file or directory\n"},
		{[]string{"--wait", "/dev/md/mg"}, 2, "mdtool: stat failed for /dev/md/mg: No such file or directory\n"},
	} {
		args := append(tc.args, "--run-dir", runDir)
		code, _, errs := mdtool(t, args...)
		if code != tc.code || errs != tc.msg {
			t.Errorf("%v: exit %d %q, want %d %q", tc.args, code, errs, tc.code, tc.msg)
		}
	}
}

// TestManageLastCopy: md refuses to fail the last working copy of raid1
// data (mdadm reports EBUSY).
func TestManageLastCopy(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/lc", 2, 32<<20, "-l1", "-n2", "--assume-clean")
	s := serve(t, runDir, "/dev/md/lc", devs...)
	if code, _, errs := mdtool(t, "/dev/md/lc", "--fail", devs[0], "--run-dir", runDir); code != 0 {
		t.Fatalf("first --fail: %d %s", code, errs)
	}
	// mdadm exits 2 when md refuses (EBUSY), 1 with --test.
	code, _, errs := mdtool(t, "/dev/md/lc", "--fail", devs[1], "--run-dir", runDir)
	if code != 2 || errs != "mdtool: set device faulty failed for "+devs[1]+":  Device or resource busy\n" {
		t.Errorf("failing the last copy: exit %d: %q", code, errs)
	}
	if code, _, _ := mdtool(t, "/dev/md/lc", "--fail", devs[1], "--test", "--run-dir", runDir); code != 1 {
		t.Errorf("failing the last copy with --test: exit %d, want 1", code)
	}
	_, out, _ := mdtool(t, "-D", "/dev/md/lc", "--run-dir", runDir)
	if !strings.Contains(out, "             State : clean, degraded \n") {
		t.Errorf("detail:\n%s", out)
	}
	s.stop()
}

// TestManageDetached: "detached" stands for the members whose device is
// gone (here: an image file deleted while the array runs).
func TestManageDetached(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	md := "/dev/md/dt"
	devs := mkArray(t, dir, md, 3, 32<<20, "-l1", "-n3", "--assume-clean")
	s := serve(t, runDir, md, devs...)
	if err := os.Remove(devs[2]); err != nil {
		t.Fatal(err)
	}
	m := func(args ...string) (int, string) {
		code, _, errs := mdtool(t, append(append([]string{md}, args...), "--run-dir", runDir)...)
		return code, errs
	}
	if code, errs := m("--fail", "detached"); code != 0 || errs != "mdtool: set "+devs[2]+" faulty in "+md+"\n" {
		t.Errorf("--fail detached: exit %d %q", code, errs)
	}
	// Already faulty: --fail detached has nothing more to do.
	if code, errs := m("--fail", "detached", "--test"); code != 2 || errs != "" {
		t.Errorf("--fail detached --test again: exit %d %q", code, errs)
	}
	if code, errs := m("--remove", "detached"); code != 0 || errs != "mdtool: hot removed "+devs[2]+" from "+md+"\n" {
		t.Errorf("--remove detached: exit %d %q", code, errs)
	}
	_, out, _ := mdtool(t, "-D", md, "--run-dir", runDir)
	if strings.Contains(out, devs[2]) || !strings.Contains(out, "     Total Devices : 2\n") ||
		!strings.Contains(out, "             State : clean, degraded \n") {
		t.Errorf("detail after removing the detached member:\n%s", out)
	}
	// A device with a filesystem is added only with --force.
	fsImg := sparse(t, dir, "fs.img", 32<<20)
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-L", "precious", fsImg).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v %s", err, out)
	}
	if code, errs := m("--add", fsImg); code != 1 || errs != "mdtool: "+fsImg+" appears to contain ext4 filesystem (label \"precious\")\n"+
		"mdtool: add aborted: "+fsImg+" holds data; use --force to add it anyway\n" {
		t.Errorf("--add of a filesystem: exit %d %q", code, errs)
	}
	if code, errs := m("--add", fsImg, "--force"); code != 0 || errs != "mdtool: added "+fsImg+"\n" {
		t.Errorf("--add --force of a filesystem: exit %d %q", code, errs)
	}
	waitHealthy(t, runDir, md)
	_, out, _ = mdtool(t, "-D", md, "--run-dir", runDir)
	if !strings.Contains(out, "             State : clean \n") || !strings.Contains(out, "      active sync   "+fsImg+"\n") {
		t.Errorf("detail after the forced add:\n%s", out)
	}
	s.stop()
}
