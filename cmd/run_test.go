package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunWaiting: "mdadm -R MD" starts the set -I collected (degraded),
// with "started array PATH"; while the set waits, -D prints mdadm's
// inactive form; an MD with no set is "error opening"; a running array
// is left alone (exit 0, nothing said).
func TestRunWaiting(t *testing.T) {
	bin := mdtoolBinary(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/rw", 2, 16<<20, "-l1", "-n2", "--assume-clean")
	env := append(os.Environ(), "MDTOOL_RUN_DIR="+runDir, "MDTOOL_CONFIG=/dev/null")
	run := func(args ...string) (int, string) { return runBinEnv(t, bin, env, args...) }
	t.Cleanup(func() { run("-S", "/dev/md/rw") })
	if code, out := run("-I", "--homehost=testhost", "--config=none", devs[0]); code != 0 || !strings.Contains(out, "not enough to start safely") {
		t.Fatalf("-I: %d %q", code, out)
	}
	code, out := run("-D", "--homehost=testhost", "/dev/md/rw")
	want := "/dev/md/rw:\n           Version : 1.2\n        Raid Level : raid1\n     Total Devices : 1\n" +
		"       Persistence : Superblock is persistent\n\n             State : inactive\n   Working Devices : 1\n\n" +
		"              Name : testhost:rw  (local to host testhost)\n"
	if code != 0 || !strings.HasPrefix(out, want) || !strings.HasSuffix(out, "    Number   Major   Minor   RaidDevice\n\n       -       0        0        -        "+devs[0]+"\n") {
		t.Errorf("-D of the waiting set: %d\n%s\nwant it to start\n%s", code, out, want)
	}
	if code, out := run("-R", "/dev/md/none"); code != 1 || out != "mdtool: error opening /dev/md/none: No such file or directory\n" {
		t.Errorf("-R of no set: %d %q", code, out)
	}
	if code, out := run("-R", "/dev/md/rw"); code != 0 || out != "mdtool: started array /dev/md/rw\n" {
		t.Errorf("-R: %d %q", code, out)
	}
	if code, out := run("-D", "/dev/md/rw"); code != 0 || !strings.Contains(out, "State : clean, degraded") {
		t.Errorf("-D after -R: %d\n%s", code, out)
	}
	if code, out := run("-R", "/dev/md/rw"); code != 0 || out != "" {
		t.Errorf("-R of a running array: %d %q", code, out)
	}
}
