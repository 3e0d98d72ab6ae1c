package cmd

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestQuery: mdadm's --query text for a running array, its members (active,
// and a copy of one: mismatch), a stopped member and a device without
// metadata; the host's mdadm 4.2 prints the same for what it can see
// without the md driver.
func TestQuery(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/qa", 4, 16<<20, "-l5", "-n3", "-x1", "--assume-clean")
	plain := sparse(t, dir, "plain.img", 16<<20)
	stopped := filepath.Join(dir, "stopped.img")
	copyFile(t, devs[1], stopped)

	// Without a running array: as the host's mdadm says it.
	want, _ := exec.Command("mdadm", "-Q", stopped, plain).Output()
	code, out, errs := mdtool(t, "-Q", stopped, plain, "--run-dir", runDir)
	if code != 0 || out != string(want) || errs != "" ||
		!strings.Contains(out, stopped+": device 1 in 3 device inactive raid5 array.  Use mdadm --examine for more detail.\n") {
		t.Errorf("-Q: exit %d\n%s%s\nmdadm 4.2:\n%s", code, out, errs, want)
	}
	code, _, errs = mdtool(t, "--query", filepath.Join(dir, "nope"), "--run-dir", runDir)
	if code != 1 || errs != "mdtool: cannot open "+filepath.Join(dir, "nope")+": No such file or directory\n" {
		t.Errorf("-Q of a missing file: exit %d %q", code, errs)
	}
	if code, _, errs = mdtool(t, "-Q"); code != 2 || errs != "mdtool: No devices given.\n" {
		t.Errorf("-Q without devices: exit %d %q", code, errs)
	}

	s := serve(t, runDir, "/dev/md/qa", devs...)
	code, out, errs = mdtool(t, "-Q", "/dev/md/qa", devs[0], devs[3], stopped, "--run-dir", runDir)
	re := regexp.MustCompile(`^/dev/md/qa: 28\.00MiB raid5 3 devices, 1 spare\. Use mdadm --detail for more detail\.\n` +
		regexp.QuoteMeta(devs[0]+": is not an md array\n"+
			devs[0]+": device 0 in 3 device active raid5 /dev/md/qa.  Use mdadm --examine for more detail.\n"+
			devs[3]+": is not an md array\n"+
			devs[3]+": device 3 in 3 device active raid5 /dev/md/qa.  Use mdadm --examine for more detail.\n"+
			stopped+": is not an md array\n"+
			stopped+": device 1 in 3 device mismatch raid5 /dev/md/qa.  Use mdadm --examine for more detail.\n") + `$`)
	if code != 0 || errs != "" || !re.MatchString(out) {
		t.Errorf("-Q of a running array and members: exit %d\n%s%s", code, out, errs)
	}
	s.stop()
}
