package cmd

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// refusedAssemble runs an assemble that must not start the array: it
// fails the test if the command has not ended within two minutes.
func refusedAssemble(t *testing.T, args ...string) (int, string) {
	t.Helper()
	env, _, errb := daemonEnv()
	done := make(chan int, 1)
	go func() { done <- Main(args, env) }()
	select {
	case code := <-done:
		return code, errb.String()
	case <-time.After(2 * time.Minute):
		t.Fatalf("%v did not end (the array started?):\n%s", args, errb.String())
		return 0, ""
	}
}

// TestAssembleDirtyDegraded: a raid6 that is not clean (created without
// --assume-clean, its resync not done) with a member missing cannot start
// dirty; --run does not help (RUN_ARRAY fails), --force marks it clean and
// starts it, as mdadm 4.2 does.
func TestAssembleDirtyDegraded(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/dd", 4, 32<<20, "-l6", "-n4")
	three := []string{devs[0], devs[1], devs[2]}
	before := hashAll(t, devs)

	code, errs := refusedAssemble(t, append([]string{"assemble", "--foreground", "--run-dir", runDir, "/dev/md/dd"}, three...)...)
	want := "mdtool: /dev/md/dd assembled from 3 drives - not enough to start the array while not clean - consider --force.\n"
	if code != 1 || errs != want {
		t.Errorf("without --run: exit %d:\n%s\nwant:\n%s", code, errs, want)
	}
	code, errs = refusedAssemble(t, append([]string{"assemble", "--foreground", "--run-dir", runDir, "/dev/md/dd", "--run"}, three...)...)
	want = "mdtool: failed to RUN_ARRAY /dev/md/dd: Input/output error\n" +
		"mdtool: Not enough devices to start the array while not clean - consider --force.\n"
	if code != 1 || errs != want {
		t.Errorf("--run: exit %d:\n%s\nwant:\n%s", code, errs, want)
	}
	for p, h := range hashAll(t, devs) {
		if before[p] != h {
			t.Errorf("%s changed without --force", p)
		}
	}

	s := serve(t, runDir, "/dev/md/dd", append([]string{"--force"}, three...)...)
	s.stop()
	got := s.stderr.String()
	if !strings.HasPrefix(got, "mdtool: Marking array /dev/md/dd as 'clean'\n"+
		"mdtool: /dev/md/dd has been started with 3 drives (out of 4).\n") {
		t.Errorf("--force:\n%s", got)
	}
}

// TestAssembleVerbose: --verbose says which slot each member fills, adds
// them in slot order and says where the array is served.
func TestAssembleVerbose(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/vb", 3, 32<<20, "-l1", "-n2", "-x1", "--assume-clean")
	s := serve(t, runDir, "/dev/md/vb", "--verbose", devs[2], devs[1], devs[0])
	s.stop()
	got := s.stderr.String()
	want := "mdtool: " + devs[2] + " is identified as a member of /dev/md/vb, slot -1.\n" +
		"mdtool: " + devs[1] + " is identified as a member of /dev/md/vb, slot 1.\n" +
		"mdtool: " + devs[0] + " is identified as a member of /dev/md/vb, slot 0.\n" +
		"mdtool: added " + devs[0] + " to /dev/md/vb as 0\n" +
		"mdtool: added " + devs[1] + " to /dev/md/vb as 1\n" +
		"mdtool: added " + devs[2] + " to /dev/md/vb as -1\n" +
		"mdtool: /dev/md/vb has been started with 2 drives and 1 spare.\n" +
		"mdtool: /dev/md/vb: NBD on unix socket " + filepath.Join(runDir, "vb.nbd") + "\n" +
		"mdtool: ublk: "
	if !strings.HasPrefix(got, want) {
		t.Errorf("stderr:\n%s\nwant it to start with:\n%s", got, want)
	}
}
