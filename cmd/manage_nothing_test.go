package cmd

import (
	"path/filepath"
	"testing"
)

// TestManageArrayOnly: "mdadm --remove /dev/mdX" with no member (the
// Ansible mdadm roles' "Removing Array(s)", after --stop) exits 0 on a
// running array and 1 with open_mddev's "error opening" on one that is
// not running, as mdadm 4.2 does (it used to be a usage error, exit 2).
func TestManageArrayOnly(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/mo", 2, 16<<20, "-l1", "-n2", "--assume-clean")
	s := serve(t, runDir, "/dev/md/mo", devs...)
	if code, out, errs := mdtool(t, "--remove", "/dev/md/mo", "--run-dir", runDir); code != 0 || out != "" || errs != "" {
		t.Errorf("--remove MD (running): exit %d: %q %q", code, out, errs)
	}
	if code, _, errs := mdtool(t, "--stop", "/dev/md/mo", "--run-dir", runDir); code != 0 {
		t.Fatalf("--stop: exit %d: %q", code, errs)
	}
	s.wait()
	if code, out, errs := mdtool(t, "--remove", "/dev/md/mo", "--run-dir", runDir); code != 1 || out != "" || errs != "mdtool: error opening /dev/md/mo: No such file or directory\n" {
		t.Errorf("--remove MD (stopped): exit %d: %q %q", code, out, errs)
	}
}
