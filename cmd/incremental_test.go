package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIncremental runs the real binary as udev runs mdadm -I: members
// arrive one by one; the run directory's map keeps the waiting set; the
// array starts (in a background daemon) when every working member is there,
// or with --run as soon as it can run degraded; mdadm 4.2's messages and
// exit statuses throughout.
func TestIncremental(t *testing.T) {
	bin := mdtoolBinary(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/inc", 3, 16<<20, "-l5", "-n3", "--assume-clean")
	r1 := mkArray(t, dir, "/dev/md/deg", 2, 16<<20, "-l1", "-n2", "--assume-clean")
	ex := mkArray(t, dir, "/dev/md/ex", 2, 16<<20, "-l1", "-n2", "--assume-clean")
	plain := sparse(t, dir, "plain.img", 16<<20)
	env := append(os.Environ(), "MDTOOL_RUN_DIR="+runDir, "MDTOOL_CONFIG=/dev/null")
	runBin := func(args ...string) (int, string) {
		if args[0] == "-I" || args[0] == "-IR" || args[0] == "--incremental" {
			args = append(args, "--homehost=testhost", "--config=none")
		}
		return runBinEnv(t, bin, env, args...)
	}
	steps := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"-I", plain}, 1, "mdtool: no recognisable superblock on " + plain + ".\n"},
		{[]string{"-I", devs[0]}, 0, "mdtool: " + devs[0] + " attached to /dev/md/inc, not enough to start (1).\n"},
		{[]string{"-I", devs[0]}, 0, "mdtool: " + devs[0] + " attached to /dev/md/inc, not enough to start (1).\n"},
		{[]string{"--incremental", devs[2]}, 0, "mdtool: " + devs[2] + " attached to /dev/md/inc, not enough to start safely.\n"},
		{[]string{"-I", devs[1]}, 0, "mdtool: " + devs[1] + " attached to /dev/md/inc, which has been started.\n"},
		{[]string{"-I", devs[1]}, 1, "mdtool: cannot reopen " + devs[1] + ": Device or resource busy.\n"},
		{[]string{"-IR", r1[1]}, 0, "mdtool: " + r1[1] + " attached to /dev/md/deg, which has been started.\n"},
		{[]string{"-I", "--export", ex[0]}, 0, "MD_DEVICE=ex\nMD_DEVNAME=ex\nMD_FOREIGN=no\nMD_STARTED=unsafe\n"},
		{[]string{"-I", "-Y", ex[1]}, 0, "MD_DEVICE=ex\nMD_DEVNAME=ex\nMD_FOREIGN=no\nMD_STARTED=yes\n"},
	}
	t.Cleanup(func() {
		for _, md := range []string{"/dev/md/inc", "/dev/md/deg", "/dev/md/ex"} {
			mdtool(t, "stop", "--run-dir", runDir, md)
		}
	})
	for i, s := range steps {
		if i == 3 {
			m, err := os.ReadFile(filepath.Join(runDir, "map"))
			if err != nil || !strings.HasPrefix(string(m), "inc 1.2 ") || !strings.HasSuffix(string(m), " /dev/md/inc\n") {
				t.Errorf("map while waiting: %q %v", m, err)
			}
		}
		code, out := runBin(s.args...)
		if code != s.code || out != s.out {
			t.Errorf("%v: exit %d %q, want %d %q", s.args, code, out, s.code, s.out)
		}
	}
	for _, md := range []string{"/dev/md/inc", "/dev/md/deg", "/dev/md/ex"} {
		code, out := runBin("-D", md)
		if code != 0 || !strings.Contains(out, "Raid Level : raid") {
			t.Errorf("detail %s: exit %d\n%s", md, code, out)
		}
		if code, out := runBin("-S", md); code != 0 {
			t.Errorf("stop %s: %d %s", md, code, out)
		}
	}
	if m, _ := os.ReadFile(filepath.Join(runDir, "map")); len(m) != 0 {
		t.Errorf("map after the starts: %q", m)
	}
}
